"""Memory of the prepared-image cache (docs/development.md, Memory budgets): `python bench/bench_images.py [COUNT]`.

Prepares COUNT (default 200) distinct large images for Claude through pxp.llm.images, in this
process, as a run over a large image dataset does: each source is a 1600×1400 noise TIFF (so it
is re-encoded and downscaled to Claude's 1.15 megapixels, and the prepared PNG does not
compress): colour by default (~3.4 MB prepared, near Claude's 3.75 MB cap: the worst case),
8-bit grey with --grey (~1.1 MB, about a real prepared chest X-ray). Prints this process's
resident set size (VmRSS from /proc) before, every 50 images and at the end, with the bytes the
cache holds and what the old bound of 32 entries would have held. Goal: the cache stays within
IMAGE_CACHE_BYTES, and RSS stops growing once the cache is full.
"""

from __future__ import annotations

import argparse
import io
import time
from pathlib import Path

import checkout  # noqa: F401  (this checkout on the import path)
import numpy as np
from PIL import Image

from pxp.llm.bytecache import MB, nbytes
from pxp.llm.images import CACHE, IMAGE_CACHE_BYTES, prepare_image

SIZE = (1600, 1400)
OLD_ENTRIES = 32  # the bound by count this cache had before


def rss_mb() -> float:
    """This process's resident set size in MB (Linux /proc)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def source(rng: np.random.Generator, grey: bool) -> bytes:
    """A distinct large noise image, as an uncompressed TIFF (not a format sent as is)."""
    shape = (SIZE[1], SIZE[0]) if grey else (SIZE[1], SIZE[0], 3)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8)).save(buf, format="TIFF")
    return buf.getvalue()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("count", nargs="?", type=int, default=200)
    parser.add_argument("--every", type=int, default=50, help="print the RSS every N images")
    parser.add_argument("--grey", action="store_true", help="8-bit grey sources (default: colour)")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(13)
    CACHE.clear()
    start = rss_mb()
    print(f"budget {IMAGE_CACHE_BYTES / MB:.0f} MB; RSS before {start:.1f} MB")
    recent: list[int] = []
    t0 = time.perf_counter()
    full_at: float | None = None
    for i in range(1, args.count + 1):
        part = prepare_image(source(rng, args.grey), "anthropic")
        recent = [*recent, nbytes((part.data, part.media_type, part.width, part.height))][-OLD_ENTRIES:]
        if full_at is None and len(CACHE) < i:
            full_at = rss_mb()
            print(f"cache full after {i - 1} images ({part.width}×{part.height}, {len(part.data) / MB:.2f} MB each):"
                  f" RSS {full_at:.1f} MB")
        if i % args.every == 0 or i == args.count:
            print(f"{i:5d} images: RSS {rss_mb():.1f} MB, cache {CACHE.nbytes / MB:.1f} MB in {len(CACHE)} entries "
                  f"(32 entries would hold {sum(recent) / MB:.1f} MB); {(time.perf_counter() - t0) / i:.3f} s/image")
    end = rss_mb()
    assert CACHE.nbytes <= IMAGE_CACHE_BYTES
    grown = f", {end - full_at:+.1f} MB after the cache filled" if full_at is not None else ""
    print(f"RSS before {start:.1f} MB, at the end {end:.1f} MB ({end - start:+.1f} MB{grown}); "
          f"cache {CACHE.nbytes / MB:.1f} MB ≤ budget {IMAGE_CACHE_BYTES / MB:.0f} MB")


if __name__ == "__main__":
    main()
