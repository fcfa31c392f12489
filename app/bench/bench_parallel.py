"""`oakwatch bench --parallel-models`: issue 11's figures for model trials run in parallel.

(1) `model_workers_figures`: 16 trials of 50 decisions of `policy: model` (provider
    openai-compatible) against a local server that answers every call after a fixed 200 ms
    (app.servers.chat_server), run one at a time and then with 8 worker processes; whole-run wall time
    each (trial start-up and sealing included). Target: the 8-worker run in <= 1/6 of the serial
    wall time.
(2) `attach_figures`: the same 16-trial, 8-worker run in a background thread while the attached
    console (app.review.attach.AttachApp, App.run_test, 160x50) follows its folder. Enter drills into a
    running trial; over a few seconds the frame pane's paints per second are counted (FrameView's
    `frames_painted`), next to how many new frames the followed trial produced (its decisions:
    attach shows the decision-boundary frame, read from the evidence folder); then, for the pane's
    own ceiling under the same load, frames are pushed into the followed trial's sink every ~4 ms
    and counted the same way. Key latency: from
    `pilot.press("p")` to the run's control socket reporting the trial paused
    (`ControlClient(root).status()["paused_trials"]`, polled by a watcher thread), then p again to
    resume. Targets: >= 15 fps, < 100 ms.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from pathlib import Path

import yaml

from app.bench.bench_console import press_latency_ms
from app.servers.chat_server import ChatServer
from sessions.evidence import layout
from sessions.evidence.folder import EvidenceFolder
from sessions.execute.runner import ExperimentRunner
from sessions.preflight.assets import DEFAULT_MANIFEST
from sessions.preflight.experiment import create_folder, prepare

RATIO_TARGET = 1 / 6  # the parallel run's wall time at most this fraction of the serial one's
FPS_TARGET = 15.0
LATENCY_TARGET_MS = 100.0
SIZE = (160, 50)


def model_manifest(tmp: Path, base_url: str, trials: int, decisions: int, name: str = "parallel-models") -> Path:
    """The dry-run with two model conditions (openai-compatible, at `base_url`), `trials` trials in
    all, each ending at `decisions` model decisions (no other budget, no loop ending)."""
    data = yaml.safe_load(DEFAULT_MANIFEST.read_text(encoding="utf-8"))
    data["experiment_id"] = name
    request = {"timeout_seconds": 30, "max_attempts": 3, "backoff_seconds": 0.05, "backoff_cap_seconds": 1}
    data["conditions"] = [
        {"id": f"model-{tag}", "policy": "model", "provider": "openai-compatible", "model": f"bench-model-{tag}",
         "base_url": base_url, "request": request}
        for tag in ("a", "b")]
    data["budgets"] = {"accepted_actions": None, "model_decisions": decisions, "wall_time_minutes": None,
                       "total_cost_usd": None, "tokens": None, "unrecoverable_loop_repeats": None}
    data["trials"] = {"per_condition": max(1, trials // 2), "order": "counterbalanced", "blinding_seed": 1}
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _results(root: Path) -> list[dict]:
    """The sealed trials' result.json under trials/, by key, as plain data."""
    folder = EvidenceFolder(root)
    return [folder.json(f"{t.rel}/{layout.RESULT}") for t in folder.trials(voided=False) if t.sealed()]


def _run(manifest: Path, out: Path, workers: int) -> tuple[float, list[dict]]:
    prepared = prepare(manifest, None)
    folder = create_folder(prepared, out)
    t0 = time.perf_counter()
    ExperimentRunner(prepared, folder, workers=workers).run()
    return time.perf_counter() - t0, _results(out)


def _check(results: list[dict], trials: int, decisions: int, what: str) -> dict:
    """What the run did: trials sealed, their outcomes and model calls (so a fast run that did
    nothing is not taken for a fast run)."""
    outcomes: dict[str, int] = {}
    calls = 0
    for r in results:
        outcomes[r.get("outcome", "?")] = outcomes.get(r.get("outcome", "?"), 0) + 1
        calls += int((r.get("telemetry") or {}).get("model_calls") or 0)
    got = {"trials_sealed": len(results), "outcomes": outcomes, "model_calls": calls}
    if len(results) != trials or calls < trials * decisions:
        print(f"  WARNING {what}: {len(results)}/{trials} trials sealed, {calls}/{trials * decisions} model calls "
              f"({outcomes})", flush=True)
    return got


def model_workers_figures(tmp: Path, trials: int = 16, decisions: int = 50, workers: int = 8,
                          delay: float = 0.2) -> dict:
    """Wall time of `trials` model trials of `decisions` decisions against a server answering after
    `delay` s, serial and with `workers` workers, and their ratio next to the 1/6 target."""
    tmp.mkdir(parents=True, exist_ok=True)
    figures: dict = {"trials": 2 * max(1, trials // 2), "decisions_per_trial": decisions, "workers": workers,
                     "server_delay_seconds": delay}
    trials = figures["trials"]
    floor = trials * decisions * delay
    print(f"parallel models: {trials} model trials of {decisions} decisions, server delay {delay * 1000:.0f} ms "
          f"(serial floor {floor:.0f} s of waiting alone) …", flush=True)
    with ChatServer(delay=delay) as server:
        manifest = model_manifest(tmp, server.base_url, trials, decisions)
        for n in (1, workers):
            print(f"  {trials} trials with {n} worker(s) …", flush=True)
            before = server.requests
            seconds, results = _run(manifest, tmp / f"models-{n}", n)
            figures[f"seconds_{n}"] = round(seconds, 2)
            figures[f"run_{n}"] = {**_check(results, trials, decisions, f"{n} worker(s)"),
                                   "server_requests": server.requests - before}
            print(f"  {n} worker(s): {seconds:.1f} s", flush=True)
    serial, parallel = figures["seconds_1"], figures[f"seconds_{workers}"]
    ratio = parallel / serial
    figures["ratio"] = round(ratio, 4)
    figures["speedup"] = round(serial / parallel, 2)
    figures["target_ratio"] = round(RATIO_TARGET, 4)
    figures["meets_target"] = ratio <= RATIO_TARGET
    print(f"target {trials} model trials of {decisions} decisions (server delay {delay * 1000:.0f} ms) with {workers} "
          f"workers in <= 1/6 of the serial wall time: serial {serial:.1f} s, {workers} workers {parallel:.1f} s = "
          f"{ratio:.3f} of serial ({serial / parallel:.2f}x; target <= {RATIO_TARGET:.3f}) "
          f"{'ok' if figures['meets_target'] else 'BELOW TARGET'}", flush=True)
    return figures


# -- the attached console ---------------------------------------------------------------------------

async def _wait(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


def _paused(client, key: str) -> bool:
    reply = client.status()
    return bool(reply.get("ok")) and key in (reply.get("paused_trials") or [])


class _Skip(Exception):
    """The attached run cannot be measured (reported as the figures' error)."""


async def _drill(app, pilot, run_done: threading.Event):
    """Back to the overview, select the running trial with the most still to play, enter: its screen."""
    from app.review.attach import TrialScreen
    from panes.overview import OverviewPane

    if isinstance(app.screen, TrialScreen):
        await pilot.press("escape")
        await _wait(lambda: not isinstance(app.screen, TrialScreen), 5)

    def running_rows():
        return [r for r in app.folder.rows() if r.status == "running" and r.decisions >= 2]

    if not await _wait(lambda: bool(running_rows()) or run_done.is_set(), 120):
        raise _Skip("no trial was running within 120 s")
    rows = running_rows()
    if not rows:
        raise _Skip("the run ended before the console could drill into a trial")
    target = min(rows, key=lambda r: r.decisions)
    keys = [r.key for r in app.folder.rows()]
    overview = app.query_one(OverviewPane)
    overview.focus()
    overview.move_cursor(row=keys.index(target.key))
    await pilot.pause(0.05)
    await pilot.press("enter")
    if not await _wait(lambda: isinstance(app.screen, TrialScreen), 10):
        raise _Skip(f"enter did not open trial {target.key}")
    return app.screen


async def _attach(root: Path, run_done: threading.Event, seconds: float, presses: int, decisions: int) -> dict:
    from app.review.attach import AttachApp
    from sessions.execute.control_socket import ControlClient

    app = AttachApp(root, theme="gameboy")
    probe = ControlClient(root, timeout=2.0)  # the watcher's own client: the console's is its own
    out: dict = {"seconds_measured": seconds}
    async with app.run_test(size=SIZE) as pilot:
        try:
            await _measure(app, pilot, probe, run_done, seconds, presses, decisions, out)
        except _Skip as exc:
            out["error"] = str(exc)
        await pilot.press("escape")
        await pilot.press("q")
    return out


async def _measure(app, pilot, probe, run_done: threading.Event, seconds: float, presses: int, decisions: int,
                   out: dict) -> None:
    from panes.trial.frame import FramePane, FrameView

    # (1) frames from the run's evidence, as the operator sees them
    screen = await _drill(app, pilot, run_done)
    out["trial"] = screen.key
    view = screen.query_one(FramePane).view
    if not isinstance(view, FrameView):
        raise _Skip(f"the frame pane draws with {type(view).__name__}, not half blocks")
    sink = screen.follower.sink
    await asyncio.sleep(0.5)  # the first frame decoded and painted
    shown0, painted0, d0, t0 = view.frames_shown, view.frames_painted, sink.status().decisions, time.perf_counter()
    await asyncio.sleep(seconds)
    shown1, painted1, d1, t1 = view.frames_shown, view.frames_painted, sink.status().decisions, time.perf_counter()
    span = t1 - t0
    out.update({"painted_fps": (painted1 - painted0) / span, "shown_fps": (shown1 - shown0) / span,
                "trial_decisions_per_second": (d1 - d0) / span})
    screen = await _measure_pause_key(app, pilot, probe, run_done, screen, presses, decisions, out)
    await _measure_fed_ceiling(app, screen, run_done, seconds, out)


async def _measure_pause_key(app, pilot, probe, run_done: threading.Event, screen, presses: int, decisions: int,
                             out: dict):
    """(2) the pause key, on a trial still running (drilled into afresh when the last one ended); returns
    the screen of the trial last pressed on."""
    samples: list[float] = []
    misses = 0
    keys: list[str] = []
    for _ in range(presses):
        if run_done.is_set():
            break
        if screen.follower.result is not None or screen.follower.decisions > decisions - 5:  # ended, or about to
            screen = await _drill(app, pilot, run_done)
        key = screen.key
        ms = await press_latency_ms(pilot, "p", lambda key=key: _paused(probe, key), 3)
        if ms is None:
            misses += 1  # the trial ended between choosing it and the press
            continue
        samples.append(ms)
        keys.append(key)
        await asyncio.sleep(0.1)
        await pilot.press("p")  # resume
        if not await _wait(lambda key=key: not _paused(probe, key), 3):
            probe.resume(key)  # never leave the run paused
        await asyncio.sleep(0.3)
    out["key_latency_ms"] = [round(s, 1) for s in samples]
    out["key_latency_trials"] = keys
    out["key_latency_misses"] = misses
    return screen


async def _measure_fed_ceiling(app, screen, run_done: threading.Event, seconds: float, out: dict) -> None:
    """(3) the pane's own ceiling under the same load: frames pushed into the followed trial's sink
    (as the follower feeds it) every ~4 ms, so the source never limits the rate."""
    from app.bench.bench_console import _frames
    from engine.loop.events import FrameCaptured
    from panes.trial.frame import FramePane

    if run_done.is_set():
        raise _Skip("the run ended before the pane's ceiling could be measured under it")
    view = screen.query_one(FramePane).view
    sink = screen.follower.sink
    frames, stop_feed = _frames(), threading.Event()

    def feed() -> None:
        i = 0
        while not stop_feed.is_set():
            sink.handle(FrameCaptured(i, frames[i % len(frames)], f"{i:064x}", i))
            i += 1
            time.sleep(0.004)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    await asyncio.sleep(0.5)
    shown0, painted0, t0 = view.frames_shown, view.frames_painted, time.perf_counter()
    await asyncio.sleep(seconds)
    shown1, painted1, t1 = view.frames_shown, view.frames_painted, time.perf_counter()
    stop_feed.set()
    feeder.join()
    out.update({"fed_painted_fps": (painted1 - painted0) / (t1 - t0), "fed_shown_fps": (shown1 - shown0) / (t1 - t0),
                "fed_run_still_going": not run_done.is_set(), "polls": app.polls})


def attach_figures(tmp: Path, trials: int = 16, decisions: int = 50, workers: int = 8, delay: float = 0.2,
                   seconds: float = 5.0, presses: int = 5) -> dict:
    """The attached console over the `trials`-trial, `workers`-worker model run while it plays:
    frame-pane paints per second and key (pause) latency, next to the targets."""
    tmp.mkdir(parents=True, exist_ok=True)
    print(f"attach: the console attached to {trials} model trials with {workers} workers (frame pane fps over "
          f"{seconds:.0f} s, pause-key latency over {presses} presses) …", flush=True)
    with ChatServer(delay=delay) as server:
        manifest = model_manifest(tmp, server.base_url, trials, decisions, name="attach-models")
        prepared = prepare(manifest, None)
        root = tmp / "attach-run"
        folder = create_folder(prepared, root)
        runner = ExperimentRunner(prepared, folder, workers=workers)
        done = threading.Event()
        failure: list[BaseException] = []

        def play() -> None:
            try:
                runner.run()
            except BaseException as exc:  # reported below
                failure.append(exc)
            finally:
                done.set()

        thread = threading.Thread(target=play, name="bench-attach-run", daemon=True)
        thread.start()
        try:
            figures = asyncio.run(_attach(root, done, seconds, presses, decisions))
        finally:
            thread.join()
    figures["trials"], figures["workers"], figures["server_delay_seconds"] = trials, workers, delay
    figures["run"] = _check(_results(root), trials, decisions, "attached run")
    if failure:
        figures["run_error"] = f"{type(failure[0]).__name__}: {failure[0]}"
    if "error" in figures:
        print(f"attach: FAILED to measure: {figures['error']}", flush=True)
        figures["fps_target_met"] = figures["fed_fps_target_met"] = figures["latency_target_met"] = False
        return figures
    fps, latency = figures["painted_fps"], figures["key_latency_ms"]
    figures["fps_target_met"] = fps >= FPS_TARGET
    worst = max(latency) if latency else None
    figures["key_latency_ms_median"] = round(statistics.median(latency), 1) if latency else None
    figures["key_latency_ms_max"] = worst
    figures["latency_target_met"] = worst is not None and worst < LATENCY_TARGET_MS
    figures["fed_fps_target_met"] = figures["fed_painted_fps"] >= FPS_TARGET
    print(f"target attached frame pane >= {FPS_TARGET:.0f} fps: painted {fps:.1f} fps from the run's evidence "
          f"(converted {figures['shown_fps']:.1f}/s; the followed trial made "
          f"{figures['trial_decisions_per_second']:.1f} decisions/s, and attach shows at most one frame per "
          f"decision, once the frame store has written it) "
          f"{'ok' if figures['fps_target_met'] else 'BELOW TARGET'}", flush=True)
    print(f"  the same pane fed a new frame every ~4 ms under the same run (its ceiling): painted "
          f"{figures['fed_painted_fps']:.1f} fps (converted {figures['fed_shown_fps']:.1f}/s) "
          f"{'ok' if figures['fed_fps_target_met'] else 'BELOW TARGET'}", flush=True)
    print(f"target attached key (pause) latency < {LATENCY_TARGET_MS:.0f} ms: "
          + (f"median {figures['key_latency_ms_median']} ms, max {worst} ms over {len(latency)} presses"
             if latency else "no press measured")
          + f" {'ok' if figures['latency_target_met'] else 'BELOW TARGET'}", flush=True)
    return figures
