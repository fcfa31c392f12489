"""`oakwatch bench` still measures what it says: its phases run the harness's own code paths (a
changed runner signature once broke the timed dry-run without any test noticing), and it ends with
a tally of every target whose exit status says whether one was missed (app.bench.bench_tally)."""

from __future__ import annotations

import json

import pytest

from app.bench import bench
from app.bench.bench_tally import exit_status, tally_lines, targets
from app.cli import main
from sessions.preflight.assets import ASSETS

GBA_ROM = ASSETS / "gba-cartridge" / "parcel-quest-advance.gba"

DEFAULT_MEASURED = {"(c) headless dry-run against the naive floor (b)",
                    "(d) replay against raw PyBoy + frame hash (a+)",
                    "1. per accepted action, CPU, steady state",
                    "2. whole `oakwatch run --headless`, bytecode cached",
                    "5. MCP press_keys beyond ping + raw press"}


def test_the_bench_runs_its_default_phases(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # evidence goes under ./runs, removed at the end
    # One environment variant is enough to show phase 3 runs (the bytecode-cached one doubles its cost).
    monkeypatch.setattr(bench, "_process_variants", lambda tmp: {"as configured": None})
    status = main(["bench", "--runs", "1", "--memory-actions", "0", "--verify-decisions", "0",
                   "--steady-actions", "40", "20", "--mcp-calls", "20", "--gba-actions", "60",
                   "--json", "figures.json"])
    out = capsys.readouterr().out
    report = json.loads((tmp_path / "figures.json").read_text())
    assert report["dry_run"]["median_seconds"]["c"] > 0
    assert report["process"]["as configured"]["oakwatch_seconds"]
    assert report["steady"]["extra_actions"] == 20 and report["steady"]["raw_cpu_us_per_action"] > 0
    assert report["load"]["cores"] and "machine load: 1-min load average" in out
    found = targets(report)
    # The tally reads the real figures (not only the synthetic ones below): these are measured.
    gba = {"per accepted action on the GBA cartridge, wall time"} if GBA_ROM.is_file() else set()
    assert {t.name for t in found if t.met is not None} == DEFAULT_MEASURED | gba
    if gba:
        assert report["gba"]["actions"] == 60 and report["gba"]["raw_fps"] > 60
    tally = tally_lines(found, json_path="figures.json", load=report["load"])
    assert out.rstrip("\n").splitlines()[-len(tally) + 1:] == tally[1:]  # the tally is the last thing printed
    assert status == exit_status(found) and "json: " not in out
    assert not (tmp_path / "runs").exists()


# -- the tally and the exit status, on synthetic figures --------------------------------------------

def _figures(*, c_met: bool = True, process_ratio: float = 1.1, verify_problems: int = 0) -> dict:
    """A report shaped as run_bench writes it: every default phase measured (not the workers phase)."""
    return {
        "steady": {"sizes": [20_000, 10_000], "cpu_ratio": 1.1, "oakwatch_cpu_us_per_action": 550.0,
                   "raw_cpu_us_per_action": 500.0, "target_met": True},
        "mcp": {"beyond_ms": 0.12, "target_met": True},
        "load": {"loadavg_1min_start": 0.5, "loadavg_1min_end": 0.7, "steal_percent": 0.1, "cores": 2},
        "dry_run": {"median_seconds": {"c": 0.23}, "regime": "fast", "c_target_seconds": 0.25, "c_target_met": c_met,
                    "d_vs_a_plus": 1.01, "d_target_met": True},
        "per_action": {"wall_ratio": 1.2, "cpu_ratio": 1.3, "wall_target_met": True, "cpu_target_met": True,
                       "memory": {"growth_mb": 3.5, "target_met": True}},
        "process": {"runs": 1, "command": ["python", "oakwatch"],
                    "as configured": {"ratio": process_ratio, "target_met": process_ratio <= 1.2}},
        "verify": {"big": {"audit_seconds": 0.8, "problems": ["x"] * verify_problems}, "small": {"problems": []},
                   "decisions": 100_000, "small_decisions": 10_000, "decisions_per_second": 125_000.0,
                   "rss_growth_mb": 2.0, "time_target_met": True, "flat_target_met": True,
                   "zero_problems": verify_problems == 0,
                   "report": {"rss_growth_mb": 4.0, "flat_target_met": True}},
    }


def test_every_target_met_exits_0_and_a_missed_one_exits_1():
    met = targets(_figures())
    # every row but the workers' (its phase was not asked for: listed, not measured)
    assert [t.verdict for t in met] == ["met"] * 4 + ["not measured"] + ["met"] * 6 and exit_status(met) == 0
    missed = targets(_figures(process_ratio=1.74))
    (row,) = [t for t in missed if t.met is False]
    assert (row.measured, row.target) == ("1.74x the plain script", "<= 1.20x")
    assert exit_status(missed) == 1
    assert exit_status(missed, report_only=True) == 0
    assert exit_status(met, failed=True, report_only=True) == 1  # a bench that broke is not a missed target
    last = tally_lines(missed)[-1]
    assert "9 met, 1 NOT met, 1 not measured (of 11 targets)" in last and "exit status 1" in last
    assert "exit status 0 (--report-only)" in tally_lines(missed, report_only=True)[-1]


def test_a_skipped_phase_is_not_measured_and_does_not_fail_the_bench():
    figures = _figures()
    del figures["per_action"], figures["verify"]  # --memory-actions 0 --verify-decisions 0
    found = targets(figures)
    assert [t.verdict for t in found].count("not measured") == 6  # 3 verify, report, memory growth, workers
    assert exit_status(found) == 0
    lines = tally_lines(found)
    assert "memory growth over the random trial" in next(x for x in lines if "not measured" in x and "growth" in x)
    assert "5 met, 0 NOT met, 6 not measured" in lines[-1]


def test_optional_phases_appear_only_when_asked():
    figures = _figures()
    assert not any("console" in t.name for t in targets(figures))
    asked = targets(figures, {"workers", "console"})
    names = [t.name for t in asked]
    assert "console frame pane" in names
    assert all(t.verdict == "not measured" for t in asked[11:])  # asked for, but no figures (the phase broke)
    figures["workers"] = {"speedup": 1.5, "raw_pair": {"speedup": 1.9}, "share_of_raw_pair": 1.5 / 1.9,
                          "meets_target": False}
    (row,) = [t for t in targets(figures) if t.name.startswith("4. ")]
    assert (row.measured, row.verdict) == ("79% (1.50x beside 1.90x)", "NOT met")
    assert exit_status(targets(figures, {"workers"})) == 1


@pytest.fixture
def synthetic_bench(monkeypatch, tmp_path):
    """run_bench with its phases replaced by synthetic figures: the command's wiring, in milliseconds."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(bench, "prepare", lambda *a, **k: None)
    figures = _figures(process_ratio=1.74)
    monkeypatch.setattr(bench, "dry_run_figures", lambda *a: figures["dry_run"])
    monkeypatch.setattr(bench, "process_figures", lambda *a: figures["process"])
    return ["bench", "--memory-actions", "0", "--verify-decisions", "0", "--mcp-calls", "0", "--gba-actions", "0",
            "--steady-actions", "0", "0"]


def test_the_command_exits_1_on_a_missed_target_and_0_with_report_only(synthetic_bench, tmp_path, capsys):
    assert main(synthetic_bench) == 1
    out = capsys.readouterr().out.rstrip("\n").splitlines()
    assert out[-1].startswith("oakwatch bench: 2 met, 1 NOT met, 8 not measured") and "exit status 1" in out[-1]
    assert any("NOT met" in line and "plain script" in line for line in out[-30:])
    assert any(line.startswith("  machine load: 1-min load average") for line in out[-30:])
    assert main([*synthetic_bench, "--report-only", "--json", "f.json"]) == 0
    written = json.loads((tmp_path / "f.json").read_text())
    assert written["process"]["as configured"]["ratio"] == 1.74
    assert set(written["load"]) == {"loadavg_1min_start", "loadavg_1min_end", "steal_percent", "cores"}


def test_a_json_file_that_cannot_be_written_is_refused_before_the_bench_runs(synthetic_bench, tmp_path, capsys,
                                                                            monkeypatch):
    monkeypatch.setattr(bench, "dry_run_figures", lambda *a: pytest.fail("the bench ran"))
    assert main([*synthetic_bench, "--json", str(tmp_path / "no-such-folder" / "f.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no-such-folder" in err


def test_the_gba_row_is_tallied_when_the_phase_ran():
    report = _figures()
    assert not [t for t in targets(report) if "GBA" in t.name]  # --gba-actions 0
    report["gba"] = {"skipped": "no gba-dry-run.yaml"}
    (row,) = [t for t in targets(report) if "GBA" in t.name]
    assert row.verdict == "not measured" and exit_status(targets(report)) == 0
    report["gba"] = {"ratio": 1.42, "target": 1.3, "target_met": False, "raw_fps": 2400.0}
    (row,) = [t for t in targets(report) if "GBA" in t.name]
    assert (row.measured, row.target, row.verdict) == ("1.42x raw", "<= 1.30x raw mGBA + hash", "NOT met")
    assert exit_status(targets(report)) == 1


def test_the_tool_server_row_is_always_listed():
    report = _figures()
    del report["mcp"]  # --mcp-calls 0: the row is still listed
    (row,) = [t for t in targets(report) if t.name.startswith("5. MCP")]
    assert row.verdict == "not measured"
    report["mcp"] = {"beyond_ms": 0.41, "target_ms": 0.15, "target_met": False}
    (row,) = [t for t in targets(report) if t.name.startswith("5. MCP")]
    assert (row.measured, row.target, row.verdict) == ("0.410 ms", "<= 0.15 ms", "NOT met")
