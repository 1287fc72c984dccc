"""Browser tests wait for what the page shows with a generous deadline: a loaded machine (parallel test
workers, other builds) may take far longer than Playwright's 5 s default for `expect`."""

from playwright.sync_api import expect

expect.set_options(timeout=60_000)
