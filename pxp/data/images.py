"""Safe image loading, and images prepared for content-addressed Asset storage (DESIGN §4, §6; stored by
pxp.data.importers.sending).

Untrusted image files are bounded before anything is decoded: a file-size limit,
formats restricted to PNG and JPEG (DICOM has its own reader, pxp.data.importers.dicom),
a pixel-count limit that also turns Pillow's decompression-bomb warning into a
refusal, and a full decode so a corrupt or truncated file is a clear error. EXIF
orientation is applied; a file that carries EXIF is re-encoded as PNG without it
(EXIF can hold identifying data). Other files are stored byte for byte, keyed by
their sha256, so one image shared by two rows is stored once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image, ImageOps, UnidentifiedImageError

from pxp.protocols.errors import PxpError

MAX_IMAGE_BYTES = 32 * 1024 * 1024
"""Largest image file accepted (bytes)."""
MAX_PIXELS = 50_000_000
"""Largest image accepted (width × height); larger is treated as a decompression bomb."""
MAX_FRAMES = 4
"""Most frames in one image file (an animated PNG, a multi-picture JPEG; a DICOM series' frames):
a radiograph is one picture, so a file of many frames is refused before anything is decoded."""
ALLOWED_FORMATS = ("PNG", "JPEG")
MIME = {"PNG": "image/png", "JPEG": "image/jpeg", "MPO": "image/jpeg"}


class ImageRejected(PxpError, ValueError):
    """An image file that is refused: one line saying why."""


@dataclass(frozen=True)
class PreparedImage:
    """Image bytes ready to store as an Asset (already validated and decoded once)."""

    data: bytes
    mime: str
    width: int
    height: int
    mode: str
    meta: dict[str, Any] = field(default_factory=dict)
    #: the sha256 of an image already handed over, whose bytes this copy no longer holds (ImageCache)
    digest: str = ""

    @property
    def sha256(self) -> str:
        return self.digest or hashlib.sha256(self.data).hexdigest()


def _line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def open_image(data: bytes, *, where: str = "image") -> Image.Image:
    """Open and fully decode PNG/JPEG bytes within the limits; ImageRejected otherwise."""
    if len(data) > MAX_IMAGE_BYTES:
        raise ImageRejected(
            f"{where}: file is {len(data) / 1e6:.1f} MB, more than the "
            f"{MAX_IMAGE_BYTES // (1024 * 1024)} MB limit"
        )
    if not data:
        raise ImageRejected(f"{where}: the file is empty")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            im = Image.open(io.BytesIO(data), formats=list(ALLOWED_FORMATS))
            w, h = im.size
            if w * h > MAX_PIXELS:
                raise ImageRejected(
                    f"{where}: {w}×{h} pixels is more than the {MAX_PIXELS:,} pixel limit "
                    "(possible decompression bomb)"
                )
            frames = int(getattr(im, "n_frames", 1) or 1)
            if frames > MAX_FRAMES:
                raise ImageRejected(f"{where}: {frames} frames is more than the {MAX_FRAMES} frame limit "
                                    "(a radiograph is one picture)")
            im.load()
    except ImageRejected:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as err:
        raise ImageRejected(f"{where}: refused as a decompression bomb ({_line(err)})") from None
    except UnidentifiedImageError:
        raise ImageRejected(f"{where}: not a PNG or JPEG image") from None
    except (OSError, SyntaxError, ValueError) as err:
        raise ImageRejected(f"{where}: corrupt or truncated image ({_line(err)})") from None
    return im


#: zlib level of the PNGs pxp writes: on a 2048² film 3–5× quicker to write than Pillow's default (6) for 3 % (16-bit)
#: to 12 % (8-bit) more bytes (docs/development.md, Images)
PNG_LEVEL = 3


def png_bytes(im: Image.Image) -> bytes:
    """`im` as PNG at PNG_LEVEL: what pxp stores and sends to the viewer."""
    buf = io.BytesIO()
    im.save(buf, format="PNG", compress_level=PNG_LEVEL)
    return buf.getvalue()


def prepare_image(data: bytes, *, where: str = "image") -> PreparedImage:
    """Validate image bytes and return what to store (EXIF orientation applied)."""
    im = open_image(data, where=where)
    fmt = im.format or "PNG"
    has_exif = bool(im.getexif()) or "exif" in im.info
    if has_exif:
        im = ImageOps.exif_transpose(im)
        data, fmt = png_bytes(im), "PNG"
    return PreparedImage(data=data, mime=MIME.get(fmt, "image/png"), width=im.width,
                         height=im.height, mode=im.mode,
                         meta={"format": fmt, "mode": im.mode, "exif_removed": has_exif})


def read_image_file(path: Path, *, where: str | None = None) -> PreparedImage:
    """Read and validate one image file (size checked before reading it all)."""
    label = where or path.name
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise ImageRejected(f"{label}: image not found") from None
    except OSError as err:
        raise ImageRejected(f"{label}: cannot read ({err.strerror})") from None
    if not path.is_file():
        raise ImageRejected(f"{label}: not a file")
    if size > MAX_IMAGE_BYTES:
        raise ImageRejected(
            f"{label}: file is {size / 1e6:.1f} MB, more than the "
            f"{MAX_IMAGE_BYTES // (1024 * 1024)} MB limit"
        )
    return prepare_image(path.read_bytes(), where=label)


def resolve_inside(root: Path, relative: str, *, where: str) -> Path:
    """root/relative, refusing absolute paths and paths that escape root (.., symlinks)."""
    rel = relative.strip().replace("\\", "/")
    if not rel:
        raise ImageRejected(f"{where}: empty image path")
    if rel.startswith("/") or (len(rel) > 1 and rel[1] == ":"):
        raise ImageRejected(f"{where}: absolute image path {relative!r} is not allowed")
    base = root.resolve()
    target = (base / rel).resolve()
    if not target.is_relative_to(base):
        raise ImageRejected(f"{where}: image path {relative!r} escapes the images root {root}")
    return target


class ImageCache:
    """Images of one import, read once per file however many rows name them: a file's image is
    returned whole the first time, then as its digest without the bytes (the import stores an
    image the first time it sees it), so memory does not grow with the images of a table."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._seen: dict[Path, PreparedImage] = {}

    def load(self, relative: str, *, where: str) -> PreparedImage:
        """The image at root/relative (inside root), validated; ImageRejected otherwise."""
        path = resolve_inside(self.root, relative, where=where)
        img = self._seen.get(path)
        if img is None:
            img = read_image_file(path, where=f"{where}: {relative.strip()}")
            self._seen[path] = dataclasses.replace(img, data=b"", digest=img.sha256)
        return img
