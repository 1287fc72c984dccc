"""The prepared LLM images are cached within a byte budget, not 32 entries (docs/development.md, Memory budgets): real
demo phantoms and Pillow-made X-ray-sized images through pxp.llm.images."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from importlib import resources

import pytest
from PIL import Image, ImageDraw

from pxp.llm import images
from pxp.llm.bytecache import MB, nbytes
from pxp.llm.images import CACHE, IMAGE_CACHE_BYTES, cached_image, prepare_image


def _demo_phantoms() -> list[bytes]:
    folder = resources.files("pxp.data") / "demo_data" / "demo-rad" / "images"
    return [p.read_bytes() for p in sorted(folder.iterdir(), key=lambda p: p.name) if p.name.endswith(".png")]


def _xray(i: int, size: tuple[int, int] = (2400, 2000)) -> bytes:
    """A large PNG (beyond Claude's 1568 px), distinct for each i."""
    img = Image.new("L", size, color=20 + i)
    ImageDraw.Draw(img).ellipse((size[0] // 4, size[1] // 4, size[0] // 2 + i * 10, size[1] // 2), fill=200)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture
def budget() -> Iterator[None]:
    """The real cache, emptied before and after (tests lower its budget with monkeypatch)."""
    CACHE.clear()
    yield
    CACHE.clear()


def test_the_default_budget_is_bytes() -> None:
    assert CACHE.max_bytes == IMAGE_CACHE_BYTES == 32 * MB


def test_demo_phantoms_fill_the_cache_past_its_budget_and_stay_under_it(
    budget: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    phantoms = _demo_phantoms()
    assert len(phantoms) == 30
    one = prepare_image(phantoms[0], "anthropic")
    assert one.data == phantoms[0]  # 256 px: within the limits, sent unchanged
    sizes = [nbytes((data, "image/png", 256, 256)) for data in phantoms]  # what each entry holds
    limit = 5 * max(sizes)  # five fit, six do not
    assert 6 * min(sizes) > limit
    monkeypatch.setattr(CACHE, "max_bytes", limit)
    seen = []
    for data in phantoms:
        part = prepare_image(data, "anthropic")
        seen.append(part.sha256)
        assert part.data == data and part.media_type == "image/png" and (part.width, part.height) == (256, 256)
        assert 0 < CACHE.nbytes <= limit
    assert len(CACHE) == 5
    # the five most recently prepared are kept, the earlier ones evicted
    assert all(cached_image(s, "anthropic") is not None for s in seen[-5:])
    assert all(cached_image(s, "anthropic") is None for s in seen[:-5])


def test_least_recently_used_is_evicted_and_hits_are_the_prepared_image(
    budget: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    sources = [_xray(i) for i in range(4)]
    fresh = [images._prepare(s, "anthropic") for s in sources]  # what each must be, uncached
    assert all(f[2] <= 1568 and f[3] <= 1568 and f[0] != s for f, s in zip(fresh, sources, strict=True))
    sizes = [nbytes(f) for f in fresh]
    monkeypatch.setattr(CACHE, "max_bytes", sizes[0] + sizes[1] + sizes[2])
    shas = [hashlib.sha256(s).hexdigest() for s in sources]
    for s in sources[:3]:
        prepare_image(s, "anthropic")
    assert cached_image(shas[0], "anthropic") is not None  # now the most recently used
    prepare_image(sources[3], "anthropic")  # over budget: image 1 (least recently used) goes
    assert cached_image(shas[1], "anthropic") is None
    for i in (0, 2, 3):
        hit = cached_image(shas[i], "anthropic")
        assert hit is not None
        assert (hit.data, hit.media_type, hit.width, hit.height) == fresh[i][:4]  # [4]: the source size
        assert hit.sha256 == shas[i]
    assert CACHE.nbytes <= CACHE.max_bytes
    # providers are cached apart: OpenAI's limits give another image of the same source
    gpt = prepare_image(sources[0], "openai")
    assert (gpt.width, gpt.height) != (fresh[0][2], fresh[0][3])
    assert cached_image(shas[0], "openai") is not None


def test_an_image_larger_than_the_budget_is_returned_not_kept(budget: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CACHE, "max_bytes", 4_000)
    part = prepare_image(_xray(9), "anthropic")
    assert len(part.data) > 4_000 and part.width < 2400
    assert cached_image(part.sha256, "anthropic") is None and CACHE.nbytes == 0
