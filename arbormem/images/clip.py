"""Optional CLIP embeddings: text to image from the pixels, beside the captions.

``pip install 'arbormem[clip]'`` (sentence-transformers, which needs torch) and set
``clip_model`` to the folder of a sentence-transformers CLIP model saved beforehand
(``SentenceTransformer("clip-ViT-B-32").save(PATH)`` on a machine that may download).
The model is loaded from that folder only, never downloaded: a name that is not a
folder is refused.

Each image stored while a CLIP model is set gets its image embedding, kept per
content hash and model beside the vision model's answers (so it goes with the last
image that uses the bytes). ``search_images`` then fuses the ranking of the query's
text embedding against them with the caption ranking, by reciprocal rank.
"""

from __future__ import annotations

import hashlib
import io
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from arbormem.errors import InputError

#: The key an image embedding is kept under, beside vision answers: ``clip:<model id>``.
PREFIX = "clip:"


def model_id_of(folder: Path) -> str:
    """A stable id of a model folder: its name and a digest of its configuration
    files, so that two different models saved under the same name differ."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*.json")):
        digest.update(path.relative_to(folder).as_posix().encode())
        digest.update(path.read_bytes())
    return f"{folder.name}-{digest.hexdigest()[:12]}"


class ClipModel:
    """A sentence-transformers CLIP model read from a local folder."""

    def __init__(self, path: str) -> None:
        folder = Path(path).expanduser()
        if not folder.is_dir() or not (folder / "modules.json").is_file():
            raise InputError(
                "is not the folder of a saved sentence-transformers CLIP model",
                source=str(folder),
                field="clip_model",
                hint="save one with SentenceTransformer(NAME).save(PATH) where downloads "
                "are allowed, then set clip_model to PATH: arbormem never downloads a model",
            )
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise InputError(
                "is set, but sentence-transformers is not installed",
                field="clip_model",
                hint="pip install 'arbormem[clip]' (install torch's CPU build first)",
            ) from None
        # Offline: a folder needs nothing from a hub, and nothing may be fetched.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        self.model: Any = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
        self.model_id = model_id_of(folder)
        self.key = PREFIX + self.model_id
        # torch modules are not safe to call from two threads at once.
        self._lock = threading.Lock()

    def embed_images(self, images: Sequence[bytes]) -> np.ndarray:
        """One L2-normalised row per image file."""
        from PIL import Image

        pictures = [Image.open(io.BytesIO(data)).convert("RGB") for data in images]
        with self._lock:
            out = self.model.encode(pictures, normalize_embeddings=True, convert_to_numpy=True)
        return np.asarray(out, dtype=np.float32)

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised row per text, in the space of :meth:`embed_images`."""
        with self._lock:
            out = self.model.encode(list(texts), normalize_embeddings=True, convert_to_numpy=True)
        return np.asarray(out, dtype=np.float32)
