"""Optional CLIP embeddings: an image found by what it shows, not only by its caption.

A CLIP model puts pictures and sentences in one vector space, so a text query can be
compared with the picture itself. arbormem uses one when the ``image_embedder``
setting names a local model folder (``clip:/path/to/folder``, in the layout
``sentence-transformers`` or ``transformers`` save a CLIP model in) and the extra
``arbormem[clip]`` is installed. Nothing is ever downloaded: the folder is loaded
with ``local_files_only``.

Each image's vector is computed when the image is added, kept in the store's vector
table under the image's content digest and the model's id (so a picture shared in
several scopes is embedded once), read back by :mod:`arbormem.images.index`, and
deleted with the image's bytes when no image refers to them any more.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from arbormem.errors import ConfigError

#: What ``image_embedder`` starts with to name a CLIP model folder.
PREFIX = "clip:"
#: The package the model is loaded with, and the extra that installs it.
PACKAGE = "sentence_transformers"
INSTALL_HINT = 'pip install "arbormem[clip]"'
#: Pictures embedded per call to the model.
BATCH = 16


def image_embedder_spec(value: Any) -> str:
    """The ``image_embedder`` setting: ``none`` or ``clip:FOLDER``, an existing
    folder holding a model (its ``config.json``)."""
    if not isinstance(value, str):
        raise TypeError(f"must be 'none' or 'clip:FOLDER', got {type(value).__name__}")
    text = value.strip()
    if text.lower() in ("", "none", "off"):
        return "none"
    if not text.startswith(PREFIX):
        raise ValueError(f"must be 'none' or 'clip:FOLDER' (a local CLIP model), not {text!r}")
    folder = Path(text[len(PREFIX) :].strip()).expanduser()
    if not (folder / "config.json").is_file():
        raise ValueError(
            f"{folder} holds no model (no config.json): give the folder a CLIP model was"
            " saved in; arbormem never downloads one"
        )
    return PREFIX + str(folder.resolve())


class ClipEmbedder:
    """A local CLIP model: pictures and texts to unit vectors of one space."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._model: Any = None
        self._lock = threading.Lock()
        digest = hashlib.blake2b(digest_size=8)
        for path in sorted(folder.iterdir()):
            if path.is_file():
                digest.update(path.name.encode())
                digest.update(str(path.stat().st_size).encode())
        digest.update((folder / "config.json").read_bytes())
        #: Names the vectors in the store: another model (or another version of the
        #: folder's files) makes vectors of its own.
        self.model_id = f"{PREFIX}{folder.name}:{digest.hexdigest()}"

    def _loaded(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise ConfigError(
                        f"image_embedder names a CLIP model but {PACKAGE} cannot be imported"
                        f" ({exc}): {INSTALL_HINT}, or set image_embedder to none"
                    ) from exc
                try:
                    self._model = SentenceTransformer(
                        str(self.folder), device="cpu", local_files_only=True
                    )
                except Exception as exc:  # the library's errors are its own
                    raise ConfigError(
                        f"the CLIP model in {self.folder} cannot be loaded: {exc}"
                    ) from exc
            return self._model

    def embed_images(self, datas: Sequence[bytes]) -> np.ndarray:
        """One unit vector per picture (in the formats :mod:`arbormem.images.files`
        accepts)."""
        from PIL import Image

        model = self._loaded()
        out: list[np.ndarray] = []
        for start in range(0, len(datas), BATCH):
            pictures = []
            for data in datas[start : start + BATCH]:
                with Image.open(io.BytesIO(data)) as img:
                    img.seek(0)  # the first frame of an animation
                    pictures.append(img.convert("RGB"))
            out.append(np.asarray(model.encode(pictures, normalize_embeddings=True)))
        if not out:
            return np.zeros((0, 0), dtype=np.float32)
        return np.vstack(out).astype(np.float32)

    def embed_text(self, text: str) -> np.ndarray:
        """The unit vector of a query in the pictures' space."""
        vec = self._loaded().encode([text], normalize_embeddings=True)
        return np.asarray(vec, dtype=np.float32)[0]


_opened: dict[str, ClipEmbedder] = {}
_opened_lock = threading.Lock()


def open_clip(spec: str) -> ClipEmbedder | None:
    """The CLIP model ``spec`` names (one per folder and process), None for ``none``.

    Checks that the package is installed (the model itself loads on first use, so
    opening a memory stays fast); raises :class:`~arbormem.errors.ConfigError` saying
    what to install when it is not."""
    if spec == "none":
        return None
    if importlib.util.find_spec(PACKAGE) is None:
        raise ConfigError(
            f"image_embedder is {spec!r} but {PACKAGE} is not installed: {INSTALL_HINT},"
            " or set image_embedder to none"
        )
    folder = Path(spec[len(PREFIX) :])
    with _opened_lock:
        found = _opened.get(str(folder))
        if found is None:
            found = _opened[str(folder)] = ClipEmbedder(folder)
        return found
