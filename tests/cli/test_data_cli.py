"""`pxp import ...` and `pxp demo` through the command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from pxp.cli.main import app
from tests.study_sample import Study

runner = CliRunner()


def run(db_url: str, *args: str) -> tuple[int, str, str]:
    res = runner.invoke(app, ["--db", db_url, *args])
    return res.exit_code, res.stdout, res.stderr


def test_import_study_files(db_url: str, study: Study) -> None:
    data = study.data
    code, out, _ = run(db_url, "import", "study-rad", str(data / "train_xray_data.csv"),
                       "--name", "rad")
    assert code == 0
    assert out.strip() == ("imported dataset 'rad': 20 instances (20 added); 19 image(s), "
                           "19 newly stored")
    code, out, _ = run(db_url, "import", "study-drug", str(data / "retro.csv"), "--few-shot",
                       str(data / "few_shot_DRUG.csv"), "--split", "test")
    assert code == 0 and "dataset 'retro': 60 instances (60 added)" in out
    code, out, _ = run(db_url, "import", "study-drug", str(data / "retro.csv"))
    assert code == 0 and "60 instances (0 added, 60 already there)" in out


def test_problems_are_one_line_each_and_exit_1(db_url: str, tmp_path: Path) -> None:
    bad = tmp_path / "r.csv"
    bad.write_text("output,input,explanation\nCCO,C1CC,x\nXx,CCO,y\n")
    code, out, err = run(db_url, "import", "study-drug", str(bad))
    assert code == 1 and out == ""
    assert err.splitlines() == ["error: r.csv:2: invalid target (input) SMILES 'C1CC'",
                                "error: r.csv:3: invalid reactant (output) SMILES 'Xx'"]
    code, _, err = run(db_url, "import", "csv", str(bad), "--map", "output")
    assert code == 1 and err.strip() == "error: --map 'output': expected COLUMN=FIELD"
    code, _, err = run(db_url, "import", "dicom", str(tmp_path / "none"))
    assert code == 1 and "not a folder" in err


def test_import_csv_with_map(db_url: str, tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("q,a,why\nCapital of France?,Paris,geography\n")
    code, out, _ = run(db_url, "import", "csv", str(f), "--task", "text", "--map", "q=input",
                       "--map", "a=prediction", "--map", "why=explanation", "--name", "qa")
    assert code == 0 and "dataset 'qa': 1 instances (1 added)" in out


def test_pxp_demo_console_script(db_url: str) -> None:
    cmd = [sys.executable, "-c", "from pxp.cli.main import main; main()", "--db", db_url, "demo"]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("loaded the demo")
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0 and second.stdout.startswith("the demo is already loaded")
    rep = subprocess.run([*cmd[:-1], "report", "--experiment", "demo-drug-simulated"],
                         capture_output=True, text=True, timeout=120)
    assert rep.returncode == 0 and "Total sessions" in rep.stdout


def test_import_progress_draws_on_a_terminal_only(db_url: str, tmp_path: Path) -> None:
    import io

    from rich.console import Console

    from pxp.cli.data import import_progress

    screen = io.StringIO()
    with import_progress(True, Console(file=screen, force_terminal=True, width=120), after=0.0) as report:
        assert report is not None
        report(5_000, 0.5)
        report(10_000, 1.0)
    assert "10,000 rows" in screen.getvalue() and "rows/s" in screen.getvalue()
    with import_progress(True, Console(file=io.StringIO(), force_terminal=False)) as report:
        assert report is None  # a pipe or a log file: no progress
    with import_progress(False, Console(file=io.StringIO(), force_terminal=True)) as report:
        assert report is None  # --no-progress
    f = tmp_path / "t.csv"
    f.write_text("input\nsome text\n")
    code, out, err = run(db_url, "import", "csv", str(f), "--no-progress")
    assert code == 0 and "1 added" in out and "rows/s" not in err


def _capped(err: str, total: int) -> list[str]:
    """The error lines: the first 20 each name their line, then one counts the rest."""
    lines = err.splitlines()
    assert len(lines) == 21, lines
    assert lines[-1] == f"error: ... and {total - 20} more problems not shown (fix these and import again)"
    return lines[:20]


def test_every_importer_shows_the_first_20_problems_then_their_count(db_url: str, tmp_path: Path) -> None:
    bad = tmp_path / "r.csv"
    bad.write_text("key,input,split\n" + "".join(f"k{i},x,nosplit\n" for i in range(25)))
    code, out, err = run(db_url, "import", "csv", str(bad))
    assert code == 1 and out == ""
    assert _capped(err, 25) == [f"error: r.csv:{i + 2}: split must be train, val or test, not 'nosplit'"
                                for i in range(20)]
    drug = tmp_path / "d.csv"
    drug.write_text("output,input,explanation\n" + "CCO,C1CC,x\n" * 30)
    code, _, err = run(db_url, "import", "study-drug", str(drug))
    assert code == 1 and _capped(err, 30)[19] == "error: d.csv:21: invalid target (input) SMILES 'C1CC'"
    msgs = tmp_path / "t.jsonl"
    msgs.write_text('{"session": "s", "instance": "x", "j": 1, "sender": "machine"}\n' * 22)
    code, _, err = run(db_url, "import", "transcripts", str(msgs), "--name", "t")
    assert code == 1 and _capped(err, 22)[0] == ("error: t.jsonl:1: missing tag; every message needs "
                                                 "session, instance, j, sender, tag")
    runs = tmp_path / "runs" / "pair" / "privateshared" / "exp"
    for k in range(23):
        (runs / f"episode_{k}").mkdir(parents=True)
        (runs / f"episode_{k}" / "interactions.json").write_text("{")
    code, out, err = run(db_url, "scorekeeping", "import-clembench", str(tmp_path / "runs"), "--name", "g")
    assert code == 1 and "23 episode(s) refused" in out
    assert _capped(err, 23)[0].startswith(f"error: {runs / 'episode_0' / 'interactions.json'}: malformed JSON")
