import json
import os
import shutil
import signal
from pathlib import Path

import pytest
import yaml

# Before any import of the loop: every record the loop builds without validation (engine.loop.records.trusted)
# is validated strictly as well and compared, in this process and in every oakwatch it starts.
os.environ["OAKWATCH_CHECK_TRUSTED"] = "1"

from sessions.execute.runner import ExperimentRunner  # noqa: E402
from sessions.execute.start import create_folder
from sessions.preflight.assets import DEFAULT_MANIFEST
from sessions.preflight.experiment import prepare


def pytest_configure(config):
    # Started in the background by a shell (`pytest &`), the test process inherits SIGINT ignored, and
    # so would every oakwatch it starts: the signal tests' Ctrl-C would be lost. Give it a handler, so
    # each child starts with the default disposition a terminal gives.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@pytest.fixture(autouse=True)
def stop_signals_as_they_were():
    """A test that calls `main([...])` in-process ends the way the command does: its stop signals
    ignored from then on (app.commands.signals restore). Put them back, or every oakwatch a later test starts
    inherits SIGINT ignored and a signal test's Ctrl-C is lost."""
    before = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    yield
    for sig, handler in before.items():
        if signal.getsignal(sig) != handler and handler is not None:
            signal.signal(sig, handler)


def run_experiment(manifest: Path | None, out: Path, sinks=None):
    """Run in-process: (the folder's path, the Summary, the sealed TrialResults in run order)."""
    prepared = prepare(manifest, out)
    folder = create_folder(prepared, out)
    runner = ExperimentRunner(prepared, folder, sinks=sinks or [])
    summary = runner.run()
    return out, summary, runner.results


def write_manifest(tmp: Path, **changes) -> Path:
    """The bundled dry-run manifest with top-level sections replaced."""
    data = yaml.safe_load(DEFAULT_MANIFEST.read_text())
    data.update(changes)
    path = tmp / "manifest.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="session")
def dry_run(tmp_path_factory):
    """One bundled dry-run, shared read-only; copy it before changing anything."""
    out = tmp_path_factory.mktemp("dry") / "exp"
    folder, summary, results = run_experiment(None, out)
    return folder, summary, results


@pytest.fixture
def dry_run_copy(dry_run, tmp_path):
    dst = tmp_path / "copy"
    shutil.copytree(dry_run[0], dst)
    return dst


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def find_trial(root: Path, key: str) -> Path:
    """A trial's folder, in trials/ or, once its block was voided, in void-<n>/ (the latest attempt)."""
    direct = root / "trials" / key
    if direct.is_dir():
        return direct
    voided = sorted(root.glob(f"void-*/{key}"), key=lambda p: int(p.parent.name.split("-")[1]))
    if not voided:
        raise AssertionError(f"no folder for trial {key} under {root}")
    return voided[-1]


@pytest.fixture(scope="session")
def client_install(tmp_path_factory) -> Path:
    """The fake coding agents installed as a real client is: outside oakwatch's tree (the client runs
    out of its reach), with the MCP SDK's client and what it needs copied beside them, and the
    walkthrough's presses as a plain list (the fake then needs no oakwatch code)."""
    import importlib.metadata as md

    from packaging.markers import Marker
    from packaging.requirements import Requirement

    from tests.fakes.mcp_agent import walkthrough

    root = tmp_path_factory.mktemp("client-install")
    site = root / "site"
    seen: set[str] = set()
    todo = ["mcp"]
    while todo:
        name = todo.pop()
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        if dist.metadata["Name"].lower() in seen:
            continue
        seen.add(dist.metadata["Name"].lower())
        for req in map(Requirement, dist.requires or []):
            if req.marker is None or Marker(str(req.marker)).evaluate({"extra": ""}):
                todo.append(req.name)
        for f in dist.files or []:
            if f.parts[0] != ".." and Path(f.locate()).is_file():
                (site / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f.locate(), site / f)
    fakes = Path(__file__).resolve().parent / "fakes"
    for fake in (fakes / "mcp_agent.py", fakes / "leaky_client.py"):
        shutil.copy2(fake, root / fake.name)
    (root / "walkthrough.json").write_text(json.dumps(walkthrough()))
    return root
