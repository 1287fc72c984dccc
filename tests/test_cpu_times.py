"""`pytest --cpu-times N` (tests/cpu_times.py) counts a test's own CPU and its waited-for children's, and lists the
largest first with the total per file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

BURN = """
import subprocess, sys, time

def _burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass

def test_idle():
    time.sleep(0.3)

def test_itself():
    _burn(0.4)

def test_its_child():
    code = "import time\\nend = time.process_time() + 0.6\\nwhile time.process_time() < end: pass"
    subprocess.run([sys.executable, "-c", code], check=True)
"""


def test_the_largest_first_and_a_waited_child_counted(pytester: pytest.Pytester,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the plugin, in the run pytester starts
    pytester.makepyfile(test_burn=BURN)
    res = pytester.runpytest_subprocess("-p", "tests.cpu_times", "--cpu-times", "3", "-p", "no:cacheprovider")
    res.assert_outcomes(passed=3)
    out = res.stdout.str()
    rows = re.findall(r"^\s+([\d.]+) s  test_burn\.py::(\w+)$", out, re.M)
    assert [name for _, name in rows] == ["test_its_child", "test_itself", "test_idle"], out
    cpu = {name: float(s) for s, name in rows}
    assert cpu["test_its_child"] >= 0.6 and 0.4 <= cpu["test_itself"] < 0.6 and cpu["test_idle"] < 0.2, cpu
    assert re.search(r"CPU time: \d+ s in 3 tests", out) and re.search(r"^\s+[\d.]+ s  test_burn\.py$", out, re.M)
