"""Images downscaled to a provider's limits before sending (DESIGN §5).

Claude: long edge at most 1568 px (and about 1.15 megapixels), at most 5 MB per
image. OpenAI vision: fits 2048 px, short side 768 px at high detail. A configured `max_image_px`
(a local model's own limit) bounds the long edge further. The image is sent at the largest size
these allow, downscaled once (aspect kept); one already within them and in an accepted format is
sent unchanged. Prepared images are
cached within a byte budget (IMAGE_CACHE_BYTES, docs/development.md, Memory budgets).
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass, replace
from typing import cast

from PIL import Image

from pxp.llm.base import ImagePart
from pxp.llm.bytecache import MB, ByteLRU
from pxp.protocols.errors import PxpError


@dataclass(frozen=True, slots=True)
class ImageLimits:
    long_edge: int
    short_edge: int | None = None
    max_pixels: int | None = None
    max_bytes: int = 5 * 1024 * 1024


LIMITS: dict[str, ImageLimits] = {
    "anthropic": ImageLimits(long_edge=1568, max_pixels=1_150_000, max_bytes=int(3.75 * 1024 * 1024)),
    "openai": ImageLimits(long_edge=2048, short_edge=768, max_bytes=20 * 1024 * 1024),
}

_ACCEPTED = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}


class ImageError(PxpError, ValueError):
    """The instance's image cannot be read."""


def _scale(w: int, h: int, lim: ImageLimits) -> float:
    s = min(1.0, lim.long_edge / max(w, h))
    if lim.short_edge is not None:
        s = min(s, lim.short_edge / min(w, h))
    if lim.max_pixels is not None and w * h * s * s > lim.max_pixels:
        s = min(s, (lim.max_pixels / (w * h)) ** 0.5)
    return s


def _to_8bit(img: Image.Image) -> Image.Image:
    if img.mode in ("L", "RGB", "RGBA", "LA", "P"):
        return img
    if img.mode in ("I", "I;16", "I;16B", "I;16L", "F"):
        lo, hi = cast(tuple[float, float], img.getextrema())
        span = (hi - lo) or 1
        return img.point(lambda v: (v - lo) * 255.0 / span).convert("L")
    return img.convert("RGB")


def _prepare(data: bytes, provider: str, max_px: int | None = None) -> Prepared:
    lim = LIMITS.get(provider, LIMITS["openai"])
    if max_px is not None and max_px < lim.long_edge:
        lim = replace(lim, long_edge=max_px, short_edge=None if lim.short_edge is None else min(lim.short_edge, max_px))
    try:
        img: Image.Image = Image.open(io.BytesIO(data))
        img.load()
    except Exception as e:
        raise ImageError(f"cannot read the image ({type(e).__name__})") from None
    fmt = img.format or ""
    w, h = source = img.size
    s = _scale(w, h, lim)
    if s >= 1.0 and fmt in _ACCEPTED and len(data) <= lim.max_bytes:
        return data, _ACCEPTED[fmt], w, h, source
    img = _to_8bit(img)
    if s < 1.0:
        w, h = max(1, int(w * s)), max(1, int(h * s))
        img = img.resize((w, h), Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    if buf.tell() <= lim.max_bytes:
        return buf.getvalue(), "image/png", w, h, source
    buf = io.BytesIO()
    img.convert("RGB").save(buf, format="JPEG", quality=90)
    return buf.getvalue(), "image/jpeg", w, h, source


#: byte budget of the prepared images (docs/development.md, Memory budgets). A prepared image is ~1.1 MB for a grey
#: X-ray
#: at Claude's 1.15 megapixels, up to 3.75 MB (colour) for Claude and ~6 MB for OpenAI, so the old
#: bound of 32 entries held 35-200 MB; 32 MB keeps the images of a run's concurrent sessions
#: (4 by default) many times over, and a miss costs ~0.1-0.3 s of re-encoding, not a call
IMAGE_CACHE_BYTES = 32 * MB

#: bytes, media type, the size sent, and the size of the image it was made from
Prepared = tuple[bytes, str, int, int, tuple[int, int]]
#: the prepared images by (sha256, provider, max_image_px), least recently used evicted first
CACHE: ByteLRU[tuple[str, str, int | None], Prepared] = ByteLRU(IMAGE_CACHE_BYTES, name="prepared LLM images")


def _part(hit: Prepared, sha: str) -> ImagePart:
    out, mime, w, h, source = hit
    return ImagePart(out, mime, sha256=sha, width=w, height=h, source=source if source != (w, h) else None)


def prepare_image(data: bytes, provider: str, *, sha256: str | None = None, max_px: int | None = None) -> ImagePart:
    """The image as an ImagePart within `provider`'s limits and `max_px` (the recent ones are cached by sha256
    within IMAGE_CACHE_BYTES, so a session's later messages and repeated evaluations do not
    re-encode it)."""
    sha = sha256 or hashlib.sha256(data).hexdigest()
    return _part(CACHE.get_or_make((sha, provider, max_px), lambda: _prepare(data, provider, max_px)), sha)


def cached_image(sha256: str | None, provider: str, max_px: int | None = None) -> ImagePart | None:
    """The prepared image for `provider` if it is still cached (saves loading the bytes)."""
    if sha256 is None:
        return None
    hit: Prepared | None = CACHE.get((sha256, provider, max_px))
    return None if hit is None else _part(hit, sha256)


def image_detail(part: ImagePart, provider: str, max_px: int | None) -> dict[str, object]:
    """What a call records of the image it sent: the size sent, the size it was made from, and the limit."""
    lim = LIMITS.get(provider, LIMITS["openai"])
    limit = f"max_image_px {max_px}" if max_px is not None and max_px < lim.long_edge else \
        f"{provider} {lim.long_edge} px"
    return {"sent": [part.width, part.height], "source": list(part.source or (part.width, part.height)),
            "limit": limit}
