"""The headless dry-run's process loads only what it uses (issue 31, row 2: the whole process's start).

A run with no model, no console and no cluster must never pay for Textual, a provider SDK, Ray or the
mGBA binding at start: each is imported where it is used. This runs the real command in a fresh
interpreter with `-X importtime` and reads which modules it imported, so a module-level import that
drags one of them back in fails here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]

# Top-level packages the bundled headless dry-run has no use for (it plays PyBoy, scripted, no console).
NOT_ON_THE_HEADLESS_PATH = {"textual", "rich", "anthropic", "openai", "ray", "mgba", "mcp", "hypothesis"}


def _imported_packages(importtime_stderr: str) -> set[str]:
    """Top-level package names from `-X importtime` lines (`import time: self | cumulative | name`)."""
    names = set()
    for line in importtime_stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            if name and name != "imported package":
                names.add(name.split(".")[0])
    return names


def test_the_headless_dry_run_imports_no_console_sdk_cluster_or_mgba(tmp_path):
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "app.cli", "run", "--headless",
                           "--output", str(out)], cwd=PROJECT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (out / "summary.json").is_file()  # the run really ran to its end
    imported = _imported_packages(done.stderr)
    assert {"pyboy", "pydantic", "sessions", "engine"} <= imported  # the parse reads real lines
    assert imported & NOT_ON_THE_HEADLESS_PATH == set()


def test_version_still_names_every_backend():
    """`--version` is built only when asked, and still lists each backend and Textual."""
    done = subprocess.run([sys.executable, "-m", "app.cli", "--version"], cwd=PROJECT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip()
    assert line.startswith("oakwatch ") and "pyboy " in line and "mgba " in line and "textual " in line


# Runs the headless dry-run with importlib.metadata.entry_points watched (pydantic's plugin loader
# imports it by name when the first model is built, so the watch is in place before it).
_WATCH_ENTRY_POINTS = """
import importlib.metadata, sys
real, asked = importlib.metadata.entry_points, []
def watched(**kw):
    asked.append(kw.get("group"))
    return real(**kw)
importlib.metadata.entry_points = watched
from app.cli import main
status = main(["run", "--headless", "--output", sys.argv[1]])
print("GROUPS", sorted(map(str, asked)))
sys.exit(status)
"""


def test_the_headless_dry_run_never_scans_for_pydantic_plugins(tmp_path):
    """pydantic's plugin discovery scans every installed distribution (PYDANTIC_DISABLE_PLUGINS skips it)."""
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    done = subprocess.run([sys.executable, "-c", _WATCH_ENTRY_POINTS, str(tmp_path / "run")], cwd=PROJECT,
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "run" / "summary.json").is_file()
    groups = next(line for line in done.stdout.splitlines() if line.startswith("GROUPS"))
    assert "'pydantic'" not in groups


def test_a_plugin_setting_the_user_gave_is_kept(monkeypatch):
    from app.cli import _no_pydantic_plugins

    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "some_plugin")
    _no_pydantic_plugins()
    assert os.environ["PYDANTIC_DISABLE_PLUGINS"] == "some_plugin"
    monkeypatch.delenv("PYDANTIC_DISABLE_PLUGINS")
    _no_pydantic_plugins()
    assert os.environ["PYDANTIC_DISABLE_PLUGINS"] == "__all__"


# Runs the headless dry-run counting the cyclic collector's passes before the trial starts, and what the
# collector looks like when it does.
_WATCH_GC = """
import gc, sys
passes = []
gc.callbacks.append(lambda phase, info: phase == "start" and passes.append(info["generation"]))
import app.commands
real_release = app.commands.release_gc
def release():
    print("BEFORE-RUN", len(passes), max(passes, default=-1))
    real_release()
    print("AT-RUN", gc.isenabled(), gc.get_freeze_count())
app.commands.release_gc = release  # before app.cli and run_cli take the name
from app.cli import main
status = main(["run", "--headless", "--output", sys.argv[1]])
print("AFTER", gc.isenabled(), gc.get_freeze_count())
sys.exit(status)
"""


def test_start_up_is_not_scanned_by_the_collector_and_the_run_collects_as_usual(tmp_path):
    done = subprocess.run([sys.executable, "-c", _WATCH_GC, str(tmp_path / "run")], cwd=PROJECT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    before = next(line for line in lines if line.startswith("BEFORE-RUN")).split()
    assert int(before[1]) < 20 and int(before[2]) < 2  # the interpreter's own; not ~145, one over the whole heap
    at_run = next(line for line in lines if line.startswith("AT-RUN")).split()
    assert at_run[1] == "True" and int(at_run[2]) > 50_000  # the trial collects, past what start-up made
    assert done.stdout.splitlines()[-1] == "AFTER True 0"  # main(argv) leaves the collector as it found it


def test_main_in_process_leaves_the_collector_as_it_found_it(tmp_path, capsys, monkeypatch):
    import gc

    from app.cli import main

    assert main(["verify", str(tmp_path / "missing")]) == 2
    assert gc.isenabled() and gc.get_freeze_count() == 0
    monkeypatch.setattr(sys, "argv", ["oakwatch", "verify", str(tmp_path / "missing")])
    try:
        assert main() == 2  # as the program: what start-up made stays frozen for the exit
        assert gc.isenabled() and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
    gc.disable()  # a caller that runs with collection off keeps it off
    try:
        main(["verify", str(tmp_path / "missing")])
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_numpy_starts_no_blas_threads_under_oakwatch():
    """OpenBLAS's threads (one per core, spinning ~100 ms of CPU at import) are of no use to oakwatch."""
    code = ("import os, sys\n"
            "from app.cli import main\n"
            "status = main(['verify', sys.argv[1]])\n"  # the parser imports numpy; the folder is missing
            "import numpy\n"
            "print('THREADS', len(os.listdir('/proc/self/task')), os.environ['OPENBLAS_NUM_THREADS'])\n")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    done = subprocess.run([sys.executable, "-c", code, "/nonexistent-oakwatch-folder"], cwd=PROJECT,
                          capture_output=True, text=True, timeout=120, env=env)
    assert "THREADS 1 1" in done.stdout, done.stdout + done.stderr[-2000:]


def test_oakwatch_run_builds_only_runs_parser(tmp_path):
    """The other commands' modules (and their parsers, ~22 ms) are not loaded for `oakwatch run`."""
    code = ("import sys\n"
            "from app.cli import main\n"
            "status = main(['run', '--headless', '--output', sys.argv[1]])\n"
            "print('MODULES', ' '.join(sorted(m for m in sys.modules if m.startswith('app.'))))\n"
            "sys.exit(status)\n")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "run")], cwd=PROJECT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    modules = set(next(line for line in done.stdout.splitlines() if line.startswith("MODULES")).split()[1:])
    assert "app.commands.run_cli" in modules
    others = {"app.commands.audit_cli", "app.commands.watch_cli", "app.commands.report_cli",
              "app.commands.mcp_cli", "app.commands.tasks_cli", "app.bench.bench_cli", "app.servers.demo_server"}
    assert modules & others == set()


def test_a_bad_run_argument_is_reported_by_the_whole_parser():
    """An error falls back to the whole parser: its usage line lists every command, as before."""
    done = subprocess.run([sys.executable, "-m", "app.cli", "run", "--no-such-option"], cwd=PROJECT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    usage, error = done.stderr.splitlines()[0], done.stderr.splitlines()[-1]
    assert usage.startswith("usage: oakwatch [-h] [--version]") and "verify" in done.stderr
    assert error == "oakwatch: error: unrecognized arguments: --no-such-option"
