"""Where an image's caption comes from, in order: the caller; a vision model, when
one is configured; else what the file says of itself and the turns around it.

The vision model is any OpenAI-compatible chat endpoint that reads ``image_url``
parts. It is asked for JSON (a short caption, entities, a scene type, an
importance); the answer is validated, and kept per content hash and model so the
same picture is never described twice. A model that fails, times out or answers
garbage is logged and the image is captioned without it: an image is never lost
to its caption.
"""

from __future__ import annotations

import base64
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from arbormem.errors import LLMError
from arbormem.images.files import ImageFile
from arbormem.llm import LLMClient

log = logging.getLogger(__name__)

SCENES = ("screenshot", "chart", "photo", "document", "ui", "code", "other")
MAX_CAPTION_CHARS = 400
MAX_ENTITIES = 20
#: Importance of an image no model judged.
DEFAULT_IMPORTANCE = 0.3

VISION_PROMPT = (
    "Describe this image for a memory system that will find it again by text.\n"
    "Answer with one JSON object and nothing else:\n"
    '{"caption": "one or two plain sentences: what is shown, any legible text",\n'
    ' "entities": ["people, objects, places or names visible"],\n'
    ' "scene": "one of screenshot, chart, photo, document, ui, code, other",\n'
    ' "importance": 0.0 to 1.0, how likely the user will want this image again}'
)


@dataclass(frozen=True)
class Caption:
    """A caption and what was judged with it."""

    text: str
    source: str
    scene: str = "other"
    importance: float = DEFAULT_IMPORTANCE
    entities: tuple[str, ...] = field(default_factory=tuple)


def validate_answer(value: Any) -> dict[str, Any]:
    """A vision model's answer as a clean dict; ValueError or TypeError on a bad shape."""
    if not isinstance(value, Mapping):
        raise TypeError("expected a JSON object")
    text = value.get("caption")
    if not isinstance(text, str) or not text.strip():
        raise ValueError("'caption' must be a non-empty string")
    text = " ".join(text.split())[:MAX_CAPTION_CHARS]
    raw_entities = value.get("entities", [])
    if not isinstance(raw_entities, list):
        raise TypeError("'entities' must be a list of strings")
    entities = [" ".join(e.split())[:100] for e in raw_entities if isinstance(e, str) and e.strip()]
    scene = value.get("scene", "other")
    scene = scene.strip().lower() if isinstance(scene, str) else "other"
    if scene not in SCENES:
        scene = "other"
    importance = value.get("importance", DEFAULT_IMPORTANCE)
    if isinstance(importance, bool) or not isinstance(importance, (int, float)):
        raise TypeError("'importance' must be a number from 0 to 1")
    if not 0.0 <= float(importance) <= 1.0:
        raise ValueError("'importance' must be from 0 to 1")
    return {
        "caption": text,
        "entities": list(dict.fromkeys(entities))[:MAX_ENTITIES],
        "scene": scene,
        "importance": float(importance),
    }


def ask_vision(client: LLMClient, image: ImageFile) -> dict[str, Any] | None:
    """The model's validated answer, or None (logged) when it could not give one."""
    url = f"data:{image.mime};base64,{base64.b64encode(image.data).decode('ascii')}"
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": VISION_PROMPT},
                {"type": "image_url", "image_url": {"url": url}},
            ],
        }
    ]
    try:
        return client.complete_json(
            messages, validate=validate_answer, feature="image_caption", max_tokens=300
        )
    except LLMError as exc:
        log.warning("the vision model gave no caption (%s): captioned without it", exc)
        return None


_NAME_NOISE = re.compile(r"^(img|image|dsc|pxl|photo|screenshot|scan)?[\W_]*\d*$", re.I)


def name_words(name: str | None) -> str:
    """A file name as words, or "" when it says nothing (``IMG_2041.JPG``)."""
    if not name:
        return ""
    stem = name.rsplit(".", 1)[0]
    if _NAME_NOISE.match(stem):
        return ""
    return " ".join(re.split(r"[\W_]+", stem)).strip()


def fallback(image: ImageFile | None, around: Sequence[str], url: str | None = None) -> Caption:
    """A caption from what the file says (EXIF, PNG text, its name) and the turns
    shared around it, for when neither the caller nor a model gave one."""
    parts: list[str] = []
    source = "file"
    if image is not None and image.described:
        parts.append(image.described)
    words = name_words(image.name if image is not None else None)
    if not words and url:
        words = name_words(url.rsplit("/", 1)[-1].split("?", 1)[0])
    if words:
        parts.append(words)
    if not parts and around:
        source = "context"
    if around:
        parts.append("shared with: " + " / ".join(t.strip()[:200] for t in around if t.strip()))
    kind = "picture" if image is None else image.mime.split("/", 1)[1].upper() + " image"
    if image is not None and image.taken_at is not None:
        parts.append(f"taken {image.taken_at:%Y-%m-%d}")
    text = " ".join(parts).strip() or f"a {kind}"
    if image is not None and source != "caller":
        text = f"{text} ({image.width}x{image.height} {kind})"
    return Caption(text=" ".join(text.split())[: MAX_CAPTION_CHARS * 2], source=source)
