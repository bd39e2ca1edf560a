"""Images as memories: stored once, captioned, found by text, fading with time.

* :mod:`.files` reads what a caller gives (a path, bytes, a file object, a data URL)
  and checks it is a PNG, JPEG, WebP or GIF by its bytes;
* :mod:`.caption` writes the caption: the caller's, a vision model's, or what the
  file and the conversation around it say;
* :mod:`.fading` is the forgetting curve;
* :mod:`.service` stores, searches, expires and restores image memories;
* :mod:`.api` is the part of :class:`~arbormem.Memory` that calls it.
"""
