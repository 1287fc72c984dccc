"""Browser tests wait for what the page shows with a generous deadline: a loaded machine (parallel test
workers, other builds) may take far longer than Playwright's 5 s default for `expect`."""

from pathlib import Path

import pytest
from playwright.sync_api import expect

HERE = Path(__file__).resolve().parent

expect.set_options(timeout=60_000)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """With test workers (pytest -n), a module's browser tests run one after another on one worker (they may
    share a server); a browser test spends about half its time waiting for the page, so two modules at once
    fit on two cores."""
    for item in items:
        if item.path.parent == HERE and not any(m.name == "xdist_group" for m in item.iter_markers()):
            item.add_marker(pytest.mark.xdist_group(f"browser-{item.path.stem}"))
