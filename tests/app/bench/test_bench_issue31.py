"""Issue 31's speed table in `oakwatch bench`: each row's arithmetic on synthetic figures, the
machine's load read from /proc-shaped text, and every row listed in the tally with its definition."""

from __future__ import annotations

import pytest

from app.bench.bench import decisions_per_second
from app.bench.bench_load import LoadWatch, cpu_jiffies, load_line, loadavg_1min, steal_percent
from app.bench.bench_mcp import beyond_ping_and_press
from app.bench.bench_pair import share, speedup, split
from app.bench.bench_steady import sizes_problem, steady_ratio
from app.bench.bench_tally import issue_rows, tally_lines, targets
from app.cli import main

STAT = """cpu  1000 50 200 5000 10 0 5 40 0 0
cpu0 500 25 100 2500 5 0 2 20 0 0
intr 12345
"""
STAT_LATER = """cpu  1600 50 300 5500 10 0 5 90 0 0
"""


def _trial(actions: int, ours_cpu: float, raw_cpu: float, ours_wall: float, raw_wall: float) -> dict:
    return {"actions": actions, "oakwatch_cpu_s": ours_cpu, "raw_cpu_s": raw_cpu, "oakwatch_wall_s": ours_wall,
            "raw_wall_s": raw_wall}


def test_the_steady_state_is_the_big_trial_minus_the_small_one_so_start_up_cancels():
    # start-up 2.0 s for oakwatch, 0.3 s raw; then 600 µs vs 500 µs per action
    small = _trial(10_000, 2.0 + 6.0, 0.3 + 5.0, 9.0, 6.0)
    big = _trial(20_000, 2.0 + 12.0, 0.3 + 10.0, 16.0, 11.5)
    got = steady_ratio(big, small)
    assert got["extra_actions"] == 10_000
    assert got["oakwatch_cpu_us_per_action"] == pytest.approx(600.0)
    assert got["raw_cpu_us_per_action"] == pytest.approx(500.0)
    assert got["cpu_ratio"] == pytest.approx(1.2) and got["target_met"] is False  # the whole trial said 1.34x
    assert got["wall_ratio"] == pytest.approx(7.0 / 5.5)
    cheaper = steady_ratio(_trial(20_000, 13.0, 10.3, 1, 1), small)
    assert cheaper["cpu_ratio"] == pytest.approx(1.0) and cheaper["target_met"] is True


def test_a_steady_state_without_extra_actions_is_not_measured():
    same = _trial(100, 1.0, 1.0, 1.0, 1.0)
    got = steady_ratio(same, same)
    assert got["cpu_ratio"] is None and got["target_met"] is None and got["oakwatch_cpu_us_per_action"] is None
    (row,) = [t for t in issue_rows({"steady": got}) if t.name.startswith("1. ")]
    assert row.verdict == "not measured"


def test_report_decisions_at_or_under_the_small_walk_are_refused_before_the_bench_runs(capsys):
    from app.bench.bench import run_bench

    assert run_bench(1, 0, 0, False, report_decisions=10_000) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--report-decisions 10000" in err


def test_steady_sizes_are_checked_before_the_bench_runs(capsys):
    assert sizes_problem((20_000, 10_000)) is None and sizes_problem((0, 0)) is None
    assert sizes_problem((100, 100)) and sizes_problem((100, 0))
    assert main(["bench", "--steady-actions", "10", "20"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--steady-actions 10 20" in err


def test_the_workers_share_is_their_speed_up_over_the_raw_pairs_on_the_same_work():
    assert split(8, 2) == [4, 4] and split(7, 2) == [4, 3] and split(8, 1) == [8]
    ours = speedup(80_000, 100.0, 60.0)
    raw = speedup(80_000, 50.0, 26.2)
    assert ours["speedup"] == pytest.approx(100.0 / 60.0)
    got = share(ours["speedup"], raw["speedup"])
    assert got["share_of_raw_pair"] == pytest.approx((100 / 60) / (50 / 26.2))  # 87 %
    assert got["meets_target"] is False
    assert share(1.85, 1.9)["meets_target"] is True  # 97 %
    assert share(None, 1.9)["meets_target"] is None and share(1.8, 0.0)["share_of_raw_pair"] is None


def test_the_two_worker_run_plays_on_a_pool_started_before_its_clock(tmp_path, monkeypatch):
    """Like the raw pair's processes (PyBoy imported before the go file), oakwatch's workers are
    started before the timed run; the run then plays every trial on that pool (no second one made)."""
    from app.bench import bench_pair
    from sessions.execute import workers

    made = []
    real = workers.make_pool
    monkeypatch.setattr(workers, "make_pool", lambda runner: made.append(runner) or real(runner))
    seconds, done, _prepared, startup = bench_pair._oakwatch_run(bench_pair._manifest(tmp_path, 2, 30),
                                                                 tmp_path / "w2", 2)
    assert done == 60 and seconds > 0 and startup > 0 and len(made) == 1
    assert bench_pair._oakwatch_run(bench_pair._manifest(tmp_path, 2, 30), tmp_path / "w1", 1)[3] == 0.0


def test_the_mcp_figure_is_the_call_beyond_the_ping_and_the_raw_press():
    got = beyond_ping_and_press(1.16, 0.43, 0.32)  # the issue's figures
    assert got["beyond_ms"] == pytest.approx(0.41) and got["target_met"] is False
    assert beyond_ping_and_press(0.9, 0.5, 0.3)["target_met"] is True


def test_the_load_is_read_from_proc_text(tmp_path):
    assert loadavg_1min("12.56 12.47 11.97 9/438 21195\n") == 12.56
    assert loadavg_1min("") is None and loadavg_1min("x") is None
    assert cpu_jiffies(STAT) == (40, 6305)  # user..steal: guest is already in user
    assert cpu_jiffies("intr 1\n") is None and cpu_jiffies("cpu 1 2 x\n") is None
    assert steal_percent(cpu_jiffies(STAT), cpu_jiffies(STAT_LATER)) == pytest.approx(100 * 50 / 1250)
    assert steal_percent(None, (1, 2)) is None and steal_percent((1, 5), (1, 5)) is None
    loadavg, stat = tmp_path / "loadavg", tmp_path / "stat"
    loadavg.write_text("3.50 1 1 1/1 1\n")
    stat.write_text(STAT)
    watch = LoadWatch(loadavg, stat)
    loadavg.write_text("4.25 1 1 1/1 1\n")
    stat.write_text(STAT_LATER)
    got = watch.finish()
    assert (got["loadavg_1min_start"], got["loadavg_1min_end"], got["steal_percent"]) == (3.5, 4.25, 4.0)
    assert load_line(got).startswith("machine load: 1-min load average 3.50 at the start, 4.25 at the end; "
                                     "steal 4.00 % over the run")
    missing = LoadWatch(tmp_path / "none", tmp_path / "none").finish()
    assert missing["loadavg_1min_start"] is None and missing["steal_percent"] is None  # unknown, never 0
    assert "1-min load average unknown" in load_line(missing) and "steal unknown" in load_line(None)


def test_every_row_of_the_issue_is_listed_with_its_definition_even_when_nothing_was_measured():
    rows = issue_rows({})
    assert [t.name.split(".")[0] for t in rows] == ["1", "2", "3", "3", "4", "5", "8"]
    assert [t.target for t in rows] == ["<= 1.15x", "<= 1.20x", ">= 100,000/s", "<= +16 MB", ">= 95%",
                                        "<= 0.15 ms", "<= +16 MB"]
    assert all(t.verdict == "not measured" and t.definition for t in rows)
    lines = tally_lines(targets({}), load={"loadavg_1min_start": 1.0, "loadavg_1min_end": 2.0, "steal_percent": 0.5,
                                           "cores": 2})
    assert lines[2].strip().startswith("machine load: 1-min load average 1.00 at the start, 2.00 at the end")
    first = next(i for i, line in enumerate(lines) if "1. per accepted action, CPU, steady state" in line)
    assert lines[first + 1].strip().startswith("= a 20,000-action random trial minus a 10,000-action one")


def test_the_process_row_reads_the_bytecode_cached_variant_when_there_is_one():
    process = {"as configured": {"ratio": 1.9, "target_met": False},
               "bytecode cached": {"ratio": 1.15, "target_met": True}}
    (row,) = [t for t in issue_rows({"process": process}) if t.name.startswith("2. ")]
    assert (row.measured, row.verdict) == ("1.15x the plain script", "met") and "PYTHONPYCACHEPREFIX" in row.definition
    (row,) = [t for t in issue_rows({"process": {"as configured": process["as configured"]}})
              if t.name.startswith("2. ")]
    assert (row.measured, row.verdict) == ("1.90x the plain script", "NOT met")


def test_the_verify_rows_read_decisions_per_second_and_memory():
    assert decisions_per_second(100_000, 1.8) == pytest.approx(55_555.6, abs=0.1)
    assert decisions_per_second(100_000, 0.0) is None
    verify = {"decisions": 100_000, "small_decisions": 10_000, "decisions_per_second": 55_000.0,
              "time_target_met": False, "rss_growth_mb": 3.2, "flat_target_met": True,
              "report": {"rss_growth_mb": 27.0, "flat_target_met": False}}
    rows = {t.name: t for t in issue_rows({"verify": verify})}
    rate = rows["3. verify, decisions per second"]
    assert (rate.measured, rate.verdict) == ("55,000/s", "NOT met") and "100,000-decision" in rate.definition
    assert (rows["3. verify, memory flat"].measured, rows["3. verify, memory flat"].verdict) == ("+3.2 MB", "met")
    report = rows["8. `oakwatch report` memory flat"]
    assert (report.measured, report.verdict) == ("+27.0 MB", "NOT met")


SDL2_LOADED = "import sys\nprint(any(m.split('.')[0] == 'sdl2' for m in sys.modules))\n"


def test_the_plain_script_imports_pyboy_without_sdl2_as_oakwatch_does(tmp_path):
    """Row 2 is like for like: neither side pays SDL2's import (issue 31 item 8)."""
    import subprocess
    import sys

    from app.bench import bench
    from engine.emulators.pyboy_backend import BUTTONS
    from sessions.preflight.assets import DEFAULT_MANIFEST, resolve
    from sessions.preflight.experiment import prepare

    prepared = prepare(DEFAULT_MANIFEST, None)
    m = prepared.manifest
    script = tmp_path / "plain.py"
    script.write_text(bench.PLAIN_SCRIPT.format(
        rom=str(prepared.rom_path), state=str(resolve(m.game.start_states["pyboy"].state, prepared.base)),
        press=m.emulator.press_frames, settle=m.emulator.settle_frames, buttons=BUTTONS, actions=["A", "NOOP"])
        + SDL2_LOADED, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["2", "False"]  # played both actions, no sdl2 module loaded
    ours = "from engine.emulators.pyboy_backend import _import_pyboy\n_import_pyboy()\n"
    check = subprocess.run([sys.executable, "-c", ours + SDL2_LOADED], capture_output=True, text=True, check=True,
                           cwd=bench.PROJECT)
    assert check.stdout.strip() == "False"
    # and the check itself sees SDL2 when it is imported (it is installed here, with PyBoy's extras)
    loaded = subprocess.run([sys.executable, "-c", "import sdl2\n" + SDL2_LOADED], capture_output=True, text=True)
    assert loaded.returncode != 0 or loaded.stdout.strip() == "True"


def test_row_8_reads_the_report_with_the_replay_too(tmp_path):
    """Row 8 is met only when the report is flat both ways; with the replay it is measured for real on
    two small generated trials (bench.py:_replay_memory), its target the no-replay row's slope."""
    from app.bench import bench

    figures = bench._replay_memory(tmp_path, bench._generate(tmp_path, "small", 60), 60, 600)
    assert (figures["decisions"], figures["tiny_decisions"]) == (60, 6)
    assert figures["small"]["peak_rss_mb"] > 20 and figures["tiny"]["peak_rss_mb"] > 20
    assert figures["allowed_mb"] == pytest.approx(16.0 * 54 / 540)
    assert figures["rss_growth_mb"] == pytest.approx(figures["small"]["peak_rss_mb"] - figures["tiny"]["peak_rss_mb"])
    flat = {"rss_growth_mb": 0.9, "flat_target_met": True}
    for replay, shown, verdict in ((None, "+0.9 MB", "met"),
                                   ({"rss_growth_mb": 0.4, "allowed_mb": 1.6, "flat_target_met": True},
                                    "+0.9 MB; with replay +0.4 MB (rows, <= +1.6 MB)", "met"),
                                   ({"rss_growth_mb": 7.0, "allowed_mb": 1.6, "flat_target_met": False},
                                    "+0.9 MB; with replay +7.0 MB (rows, <= +1.6 MB)", "NOT met")):
        verify = {"report": {**flat, **({"replay": replay} if replay else {})}}
        row = {t.name: t for t in issue_rows({"verify": verify})}["8. `oakwatch report` memory flat"]
        assert (row.measured, row.verdict) == (shown, verdict)


def test_the_report_at_scale_walks_only_directions_to_its_budget_and_is_tallied_in_row_8(tmp_path):
    """`--report-decisions N` (app.bench.bench_report): the walk cannot win without A, so it plays
    all N decisions; both reports are measured and their growth decides row 8 with the others."""
    import json as _json

    from app.bench.bench_report import WALK_ACTIONS, report_scale_figures

    figures = report_scale_figures(300, tmp_path, small=100)
    assert (figures["decisions"], figures["small_decisions"]) == (300, 100)
    assert figures["rss_growth_mb"] == pytest.approx(figures["peak_rss_mb"] - figures["small_peak_rss_mb"])
    for n in (100, 300):
        trial = next((tmp_path / f"walk-{n}" / "trials").iterdir())
        assert _json.loads((trial / "result.json").read_text())["telemetry"]["accepted_actions"] == n
        pressed = {_json.loads(line)["action"] for line in (trial / "inputs.jsonl").read_text().splitlines()}
        assert pressed <= set(WALK_ACTIONS) and len(pressed) > 1
    flat = {"verify": {"report": {"rss_growth_mb": 0.9, "flat_target_met": True}}}
    for scale, shown, verdict in (({"decisions": 1_000_000, "small_decisions": 10_000, "rss_growth_mb": 3.9,
                                    "flat_target_met": True}, "+0.9 MB; 10,000 -> 1,000,000 decisions +3.9 MB", "met"),
                                  ({"decisions": 1_000_000, "small_decisions": 10_000, "rss_growth_mb": 45.0,
                                    "flat_target_met": False}, "+0.9 MB; 10,000 -> 1,000,000 decisions +45.0 MB",
                                   "NOT met")):
        row = {t.name: t for t in issue_rows({**flat, "report_scale": scale})}["8. `oakwatch report` memory flat"]
        assert (row.measured, row.verdict) == (shown, verdict)
    alone = {t.name: t for t in issue_rows({"report_scale": scale})}["8. `oakwatch report` memory flat"]
    assert alone.verdict == "NOT met" and alone.measured.startswith("10,000 -> 1,000,000")
