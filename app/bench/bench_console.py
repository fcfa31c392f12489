"""`oakwatch bench --console`: what the console costs the run, how fast it draws, how fast it obeys.

(1) the bundled dry-run at maximum speed with the console open (App.run_test, headless,
    160x50) vs the same dry-run headless through ExperimentRunner: trial wall time, from the
    restored start state to the trial's end; ratio target <= 1.25. (At maximum pace the console
    refreshes 5 times a second; paced runs get 30 fps frames and a 10 Hz trace.)
(2) the frame pane's sustained rate with a 160x144 frame changing continuously (a producer
    thread publishing a new frame every ~4 ms): frames converted and frames painted per
    second; target >= 15.
(3) key handling latency while a run is going: from pilot.press("p") being sent to the
    control being paused (timestamped by a watcher thread), during a long random-policy run
    at maximum speed (the busiest case) and during the dry-run at 1×; target < 100 ms.
Each figure is the median over `runs` repetitions (latency: over every press).
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from engine.loop.display import Display
from engine.loop.events import FrameCaptured, TrialEnded, TrialStarted
from sessions.execute.runner import ExperimentRunner
from sessions.execute.start import create_folder
from sessions.preflight.assets import DEFAULT_MANIFEST
from sessions.preflight.experiment import prepare

SIZE = (160, 50)
SHADES = np.array([[0x0F, 0x38, 0x0F], [0x30, 0x62, 0x30], [0x8B, 0xAC, 0x0F], [0x9B, 0xBC, 0x0F]], np.uint8)


class _Stopwatch(Display):
    def __init__(self):
        self.start = self.end = None

    def handle(self, event) -> None:
        if isinstance(event, TrialStarted):
            self.start = time.perf_counter()
        elif isinstance(event, TrialEnded):
            self.end = time.perf_counter()


def _headless(out: Path) -> float:
    prepared = prepare(DEFAULT_MANIFEST, out)
    folder = create_folder(prepared, out)
    watch = _Stopwatch()
    ExperimentRunner(prepared, folder, sinks=[watch]).run()
    return watch.end - watch.start


async def press_latency_ms(pilot, key: str, happened, timeout: float, poll: float = 0.002) -> float | None:
    """Milliseconds from pressing `key` to `happened()` turning true (seen by a watcher thread that
    polls every `poll` seconds, so the app's own loop is not what times it); None if it never did."""
    seen: list[float] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if happened():
                seen.append(time.perf_counter())
                return
            time.sleep(poll)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    t0 = time.perf_counter()
    await pilot.press(key)
    await _wait(pilot, lambda: bool(seen), timeout)
    done.set()
    watcher.join()
    return (seen[0] - t0) * 1000 if seen else None


async def _wait(pilot, condition, timeout: float = 60.0) -> bool:
    # asyncio.sleep, not pilot.pause: pilot.pause forces a screen update each time, which would
    # charge the harness's own polling to the console.
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


async def _console(out: Path) -> float:
    from app.console.console import OakwatchConsole

    prepared = prepare(DEFAULT_MANIFEST, out, allow_human=True)
    folder = create_folder(prepared, out)
    app = OakwatchConsole(prepared, folder, speed=None, theme="gameboy")
    watch = _Stopwatch()
    app.runner.sinks.append(watch)
    async with app.run_test(size=SIZE) as pilot:
        await _wait(pilot, lambda: app.run_done, 300)
        await pilot.press("q")
    return watch.end - watch.start


def _frames(count: int = 64) -> list[np.ndarray]:
    """Tile-like GB frames, each scrolled one pixel further: every row changes every frame."""
    y, x = np.mgrid[0:144, 0:160]
    out = []
    for shift in range(count):
        shade = ((x + shift) // 8 + (y + shift) // 8) % 2 + 2 * (((x + y + 2 * shift) // 24) % 2)
        out.append(SHADES[shade])
    return out


async def _frame_rate(seconds: float = 3.0) -> dict:
    from app.console.console import OakwatchConsole
    from app.console.console_state import ConsoleSink
    from panes.trial.frame import FrameView

    sink = ConsoleSink("bench")
    frames = _frames()
    stop = threading.Event()

    def produce() -> None:
        i = 0
        while not stop.is_set():
            sink.handle(FrameCaptured(i, frames[i % len(frames)], f"{i:064x}", i))
            i += 1
            time.sleep(0.004)

    app = OakwatchConsole(sink=sink, theme="gameboy")
    producer = threading.Thread(target=produce, daemon=True)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(FrameView)
        producer.start()
        await pilot.pause(0.5)
        shown0, painted0, t0 = view.frames_shown, view.frames_painted, time.perf_counter()
        await pilot.pause(seconds)
        shown1, painted1, t1 = view.frames_shown, view.frames_painted, time.perf_counter()
        stop.set()
    producer.join()
    return {"shown_fps": (shown1 - shown0) / (t1 - t0), "painted_fps": (painted1 - painted0) / (t1 - t0)}


def _soak_manifest(tmp: Path, actions: int = 20_000) -> Path:
    """The dry-run with a random policy and a large budget: a run that keeps the CPU busy."""
    import yaml

    data = yaml.safe_load(DEFAULT_MANIFEST.read_text(encoding="utf-8"))
    data["experiment_id"] = "console-latency"
    data["conditions"] = [{"id": "random", "policy": "random", "seed": 7}]
    data["budgets"] = {"accepted_actions": actions, "model_decisions": None, "wall_time_minutes": None,
                       "unrecoverable_loop_repeats": None}
    data["trials"] = {"per_condition": 1}
    path = tmp / "latency.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


async def _latency(manifest: Path, out: Path, speed: float | None, presses: int = 10) -> list[float]:
    """Milliseconds from a key press being sent to the control being paused, per press."""
    from app.console.console import OakwatchConsole

    prepared = prepare(manifest, out, allow_human=True)
    folder = create_folder(prepared, out)
    app = OakwatchConsole(prepared, folder, speed=speed, theme="gameboy")
    samples: list[float] = []
    async with app.run_test(size=SIZE) as pilot:
        await _wait(pilot, lambda: app.sink.status().decisions >= 5)
        for _ in range(presses):
            if app.run_done:
                break
            control = app.control
            ms = await press_latency_ms(pilot, "p", lambda control=control: control.paused, 5, poll=0.0005)
            if ms is not None:
                samples.append(ms)
            await pilot.pause(0.05)
            await pilot.press("p")  # resume: the next press lands on a busy loop again
            await pilot.pause(0.15)
        await pilot.press("q")
        await _wait(pilot, lambda: app.run_done, 60)
    return samples


def bench_console(runs: int) -> dict:
    runs = max(1, runs)
    headless, console, shown, painted, latency, paced = [], [], [], [], [], []
    with tempfile.TemporaryDirectory(prefix="oakwatch-bench-console-") as tmp:
        tmp_path = Path(tmp)
        soak = _soak_manifest(tmp_path)
        # One unmeasured pair first (imports, first renders, caches), then alternate the two,
        # collecting garbage before each so neither pays for the other's leftovers.
        _headless(tmp_path / "warm-headless")
        asyncio.run(_console(tmp_path / "warm-console"))
        for i in range(runs):
            gc.collect()
            headless.append(_headless(tmp_path / f"headless-{i}"))
            gc.collect()
            console.append(asyncio.run(_console(tmp_path / f"console-{i}")))
        for i in range(runs):
            rate = asyncio.run(_frame_rate())
            shown.append(rate["shown_fps"])
            painted.append(rate["painted_fps"])
            latency += asyncio.run(_latency(soak, tmp_path / f"latency-{i}", None))
            paced += asyncio.run(_latency(DEFAULT_MANIFEST, tmp_path / f"latency-paced-{i}", 1.0, 5))
    h, c = statistics.median(headless), statistics.median(console)
    ratio = c / h
    fps = statistics.median(painted)
    lat_median = statistics.median(latency) if latency else None
    lat_max = max(latency) if latency else None
    return {
        "runs": runs,
        "dry_run_headless_seconds": round(h, 3),
        "dry_run_console_seconds": round(c, 3),
        "console_vs_headless_ratio": round(ratio, 3),
        "ratio_target_met (<= 1.25)": ratio <= 1.25,
        "frame_pane_fps_painted": round(fps, 1),
        "frame_pane_fps_converted": round(statistics.median(shown), 1),
        "fps_target_met (>= 15)": fps >= 15,
        "key_latency_ms_median": None if lat_median is None else round(lat_median, 1),
        "key_latency_ms_max": None if lat_max is None else round(lat_max, 1),
        "key_latency_presses": len(latency),
        "key_latency_ms_median_at_1x": round(statistics.median(paced), 1) if paced else None,
        "latency_target_met (< 100 ms)": lat_max is not None and lat_max < 100,
    }


if __name__ == "__main__":
    import sys

    for key, value in bench_console(int(sys.argv[1]) if len(sys.argv) > 1 else 1).items():
        print(f"{key}: {value}")
