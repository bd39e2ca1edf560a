"""The default embedder: WordLlama, a static token-embedding model.

Its 16 MB weights ship inside the ``wordllama`` wheel, it needs no torch and
embeds tens of thousands of sentences a second on one CPU core.

The model is an embedding table and a tokenizer: a text's vector is the mean
of its tokens' rows. arbormem reads the two files from the installed package
itself instead of going through ``WordLlama.load()``, which tries to download
files that are already installed, takes half a second to import (pydantic,
requests) and configures the root logger as a side effect. A test checks that
the vectors are the same as WordLlama's own.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from arbormem.embed.base import Embedder, l2_normalize
from arbormem.errors import EmbedderError

#: Width of the published WordLlama tables; smaller sizes are a prefix of it.
FULL_DIM = 256

#: Chunks of at least this many texts are tokenised on all cores at once.
PARALLEL_FROM = 32

#: A text longer than this many characters is tokenised a window at a time, and its
#: vector is the mean over all its tokens all the same. Whole, a 1 MiB message made
#: the tokenizer's output and a matrix of every token's row (1 GB) at once.
WINDOW_CHARS = 4096
#: Windows of one long text tokenised together (on all cores).
WINDOWS_AT_ONCE = 32

#: The word-start mark of a SentencePiece-style BPE: it stands for a space.
SPACE_MARK = "\u2581"
#: A text (spaces already marked) in pieces that no token crosses: a run of marks and
#: the run of other characters after it, or a run of marks alone at the end.
_PIECE = re.compile(f"{SPACE_MARK}*[^{SPACE_MARK}]+|{SPACE_MARK}+")
#: Pieces whose token ids are kept; the cache starts over when it holds more.
PIECE_CACHE = 50_000


def windows(text: str, size: int = WINDOW_CHARS) -> list[str]:
    """``text`` in pieces of at most ``size`` characters, each cut at a space where
    one is in its second half. The space is left out: the tokenizer marks the start
    of the next piece's first word as it marked it after the space, so the pieces
    give the tokens of the whole (a cut with no space may split one word)."""
    pieces: list[str] = []
    start = 0
    while len(text) - start > size:
        end = start + size
        cut = text.rfind(" ", start + size // 2, end)
        if cut == -1:
            pieces.append(text[start:end])
            start = end
        else:
            pieces.append(text[start:cut])
            start = cut + 1
    pieces.append(text[start:])
    return pieces


def package_folder() -> Path:
    """Where the ``wordllama`` package is installed (without importing it)."""
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderError(
            "the default embedder needs the 'wordllama' package: pip install wordllama"
        )
    return Path(next(iter(spec.submodule_search_locations)))


class WordLlamaEmbedder(Embedder):
    """WordLlama ``l2_supercat`` at 256 dimensions (or a truncation of it)."""

    batch_size = 512

    def __init__(self, config: str = "l2_supercat", dim: int = FULL_DIM) -> None:
        if not 0 < dim <= FULL_DIM:
            raise EmbedderError(f"WordLlama vectors have 1 to {FULL_DIM} dimensions, not {dim}")
        self.config = config
        self.dimensions = dim
        self.model_id = f"wordllama/{config}-{dim}"
        self._table: np.ndarray | None = None
        self._tokenizer: Any = None
        #: The tokenizer's BPE model, when a text may be tokenised piece by piece.
        self._bpe: Any = None
        #: Token ids of each piece tokenised so far (see ``_piece_ids``). Tuples: a
        #: tuple of numbers leaves the garbage collector's view (a list never does),
        #: and a long import or a server meets tens of thousands of pieces.
        self._pieces: dict[str, tuple[int, ...]] = {}
        #: Texts holding one of these are tokenised whole (they hold a special token).
        self._specials: tuple[str, ...] = ()

    def _load(self) -> tuple[np.ndarray, Any]:
        if self._table is None:
            folder = package_folder()
            weights = folder / "weights" / f"{self.config}_{FULL_DIM}.safetensors"
            vocab = folder / "tokenizers" / f"{self.config}_tokenizer_config.json"
            try:
                from safetensors import safe_open
                from tokenizers import Tokenizer

                with safe_open(str(weights), framework="np") as f:
                    table = f.get_tensor("embedding.weight")
                self._tokenizer = Tokenizer.from_file(str(vocab))
                self._tokenizer.no_truncation()
                self._tokenizer.no_padding()
                self._bpe = _piecewise_model(self._tokenizer)
                self._specials = tuple(
                    t.content for t in self._tokenizer.get_added_tokens_decoder().values()
                )
            except Exception as exc:
                raise EmbedderError(
                    f"cannot load WordLlama {self.config!r} from {weights} and {vocab}: {exc}"
                ) from exc
            self._table = np.ascontiguousarray(table[:, : self.dimensions], dtype=np.float32)
        return self._table, self._tokenizer

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        table, tokenizer = self._load()
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            rows = range(start, min(start + self.batch_size, len(texts)))
            short = [row for row in rows if len(texts[row]) <= WINDOW_CHARS]
            chunk = [texts[row] for row in short]
            # The batch call spreads a large chunk over the cores; for a few texts its
            # thread pool costs more than the tokenising itself (its idle threads spin,
            # which on a busy machine takes the cores from everything else). Its fast
            # form (tokenizers 0.21 on) gives the same ids without each token's
            # character offsets, which nothing here reads. Cached pieces (see
            # ``_piece_ids``) cost less still, on one core.
            if self._bpe is not None:
                ids = [self._piece_ids(t, tokenizer) for t in chunk]
            elif len(chunk) < PARALLEL_FROM:
                ids = [tokenizer.encode(t, add_special_tokens=False).ids for t in chunk]
            else:
                batch = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)
                ids = [e.ids for e in batch(chunk, add_special_tokens=False)]
            # The mean of each text's token rows. One small sum per text is faster than
            # one segmented sum (np.add.reduceat) over the gathered rows of the chunk;
            # take's own clipping costs half what np.clip then indexing did.
            for row, tokens in zip(short, ids):
                if tokens:
                    out[row] = table.take(tokens, axis=0, mode="clip").sum(axis=0) / len(tokens)
            for row in rows:
                if len(texts[row]) > WINDOW_CHARS:
                    out[row] = self._long_mean(texts[row], table, tokenizer)
        return l2_normalize(out)

    def _piece_ids(self, text: str, tokenizer: Any) -> list[int]:
        """The token ids of a text, as ``tokenizer.encode`` gives them, from the ids of
        its pieces (see :func:`_piecewise_model`), each piece tokenised once.

        The tokenizer has no pre-tokenizer: it runs BPE over a whole text at once, and
        its own cache, keyed by that text, never hits. Conversation turns share their
        words, so a piece is nearly always known already (LoCoMo's turns: 27 µs each
        instead of 69 with nothing cached, 11 once their words are).
        """
        if not text:
            return []
        if any(special in text for special in self._specials):
            return list(tokenizer.encode(text, add_special_tokens=False).ids)
        pieces = self._pieces
        out: list[int] = []
        for piece in _PIECE.findall(SPACE_MARK + text.replace(" ", SPACE_MARK)):
            ids = pieces.get(piece)
            if ids is None:
                if len(pieces) >= PIECE_CACHE:
                    pieces.clear()
                ids = pieces[piece] = tuple([t.id for t in self._bpe.tokenize(piece)])
            out += ids
        return out

    def _long_mean(self, text: str, table: np.ndarray, tokenizer: Any) -> np.ndarray:
        """The mean token row of a long text, tokenised :data:`WINDOW_CHARS` at a time:
        memory in proportion to the window, not to the text."""
        total = np.zeros(self.dimensions, dtype=np.float64)
        count = 0
        pieces = windows(text)
        for first in range(0, len(pieces), WINDOWS_AT_ONCE):
            group = pieces[first : first + WINDOWS_AT_ONCE]
            for encoding in tokenizer.encode_batch(group, add_special_tokens=False):
                if encoding.ids:
                    total += table.take(encoding.ids, axis=0, mode="clip").sum(axis=0)
                    count += len(encoding.ids)
        return (total / count if count else total).astype(np.float32)

    def tokenizer(self) -> Any:
        """The model's Hugging Face tokenizer (a LLaMA-2 BPE)."""
        return self._load()[1]


def _piecewise_model(tokenizer: Any) -> Any:
    """The tokenizer's BPE model if tokenising a text piece by piece gives the ids the
    whole text gets, else None.

    That holds for LLaMA-2's tokenizer (the ``l2`` models): its only normalisation
    marks every space (and the text's start) with :data:`SPACE_MARK`, nothing splits
    the text before BPE, and no token holds the mark after another character, so no
    token crosses the start of a word and BPE merges within each word alone. Other
    tokenizers (LLaMA-3's byte-level one) are used whole.
    """
    model = tokenizer.model
    if type(model).__name__ != "BPE" or model.dropout or tokenizer.pre_tokenizer is not None:
        return None
    normalizer = tokenizer.normalizer
    marks = {
        "type": "Sequence",
        "normalizers": [
            {"type": "Prepend", "prepend": SPACE_MARK},
            {"type": "Replace", "pattern": {"String": " "}, "content": SPACE_MARK},
        ],
    }
    if normalizer is None or json.loads(normalizer.__getstate__()) != marks:
        return None
    if any(SPACE_MARK in token.lstrip(SPACE_MARK) for token in tokenizer.get_vocab()):
        return None
    return model
