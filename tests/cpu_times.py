"""`pytest --cpu-times N`: each test's CPU time (setup, call and teardown), and the N largest, with the total per
file, at the end of the run (docs/development.md, Tests). Where the suite's minutes go on two CPUs is CPU, not
waiting, so a test's wall time under `-n 4` says little; this says what it costs.

A test's CPU is its test process's (every thread) plus the children that process waited for (`pxp` commands,
servers it stopped); not counted: the database server, and processes nobody waited for (chromium under
Playwright's driver). Under pytest-xdist each worker measures its own tests and the figures reach the
controller with the test's report.
"""

from __future__ import annotations

import resource
import time
from collections import defaultdict
from collections.abc import Generator

import pytest

_KEY = "cpu_s"
_start = pytest.StashKey[float]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cpu-times", type=int, default=0, metavar="N",
                     help="print each test's CPU time (its process and the children it waited for): the N largest")


def _cpu_now() -> float:
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    if item.config.getoption("cpu_times"):
        item.stash[_start] = _cpu_now()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                               ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if call.when == "teardown" and _start in item.stash:
        report.user_properties.append((_KEY, _cpu_now() - item.stash[_start]))
    return report


class _Collected:
    def __init__(self) -> None:
        self.tests: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, value in report.user_properties:
            if key == _KEY and isinstance(value, float):
                self.tests[report.nodeid] = value

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        n = terminalreporter.config.getoption("cpu_times")
        tests = self.tests
        files: dict[str, float] = defaultdict(float)
        for nodeid, cpu in tests.items():
            files[nodeid.split("::")[0]] += cpu
        w = terminalreporter.write_line
        terminalreporter.section(f"CPU time: {sum(tests.values()):.0f} s in {len(tests)} tests")
        w(f"tests of 1 s or more: {sum(1 for c in tests.values() if c >= 1)}, "
          f"{sum(c for c in tests.values() if c >= 1):.0f} s; under 0.1 s: "
          f"{sum(1 for c in tests.values() if c < 0.1)}, {sum(c for c in tests.values() if c < 0.1):.0f} s")
        for nodeid, cpu in sorted(tests.items(), key=lambda t: -t[1])[:n]:
            w(f"{cpu:8.1f} s  {nodeid}")
        w("by file:")
        for path, cpu in sorted(files.items(), key=lambda t: -t[1])[:n]:
            w(f"{cpu:8.1f} s  {path}")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("cpu_times") and not hasattr(config, "workerinput"):  # the controller (or a run without xdist)
        config.pluginmanager.register(_Collected(), "cpu_times_collected")
