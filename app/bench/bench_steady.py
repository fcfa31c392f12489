"""Issue 31's first row: per accepted action, CPU, steady state.

A random-policy trial of `big` actions (default 20,000) and one of `small` (default 10,000), each
through the runner's own timed slot path (app.bench.bench._harness_trial: genesis, recorder,
trial loop, probe, frame store, seal), and raw PyBoy + the harness's frame capture and SHA-256
on exactly each trial's accepted inputs (read back from its inputs.jsonl). CPU time is this
process's every thread (the frame store's and any mirror's run in-process) plus RUSAGE_CHILDREN
(any helper process the trial waited for; a one-worker local run starts none: the runner only
spawns workers for workers > 1 or ray, sessions/execute/runner.py). The figure is the big trial minus the small one, per
extra action, on both sides, so whatever each pays once (start-up, the first frames, sealing)
cancels:

    oakwatch = (cpu(big) - cpu(small)) / (n(big) - n(small))    raw likewise
    ratio    = oakwatch / raw                                    target <= 1.15x

Each of the four CPU figures is the median over min(--runs, 3) rounds (each round plays all
four). Wall time is printed beside, not judged.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

TARGET = 1.15
DEFAULT_SIZES = (20_000, 10_000)


def steady_ratio(big: dict, small: dict) -> dict:
    """The steady-state figures from two measured trials, each {"actions", "oakwatch_cpu_s",
    "raw_cpu_s", "oakwatch_wall_s", "raw_wall_s"}: per extra action on each side (µs) and the
    ratios. None where the difference cannot be divided (no extra action, or no extra raw time)."""
    extra = big["actions"] - small["actions"]
    out: dict = {"extra_actions": extra}
    for clock in ("cpu", "wall"):
        ours = big[f"oakwatch_{clock}_s"] - small[f"oakwatch_{clock}_s"]
        raw = big[f"raw_{clock}_s"] - small[f"raw_{clock}_s"]
        ok = extra > 0 and raw > 0
        out[f"oakwatch_{clock}_us_per_action"] = ours / extra * 1e6 if extra > 0 else None
        out[f"raw_{clock}_us_per_action"] = raw / extra * 1e6 if extra > 0 else None
        out[f"{clock}_ratio"] = ours / raw if ok else None
    out["target"] = TARGET
    out["target_met"] = None if out["cpu_ratio"] is None else out["cpu_ratio"] <= TARGET
    return out


def sizes_problem(sizes: tuple[int, int]) -> str | None:
    """Why `--steady-actions BIG SMALL` cannot be measured (0 0 skips the row), or None."""
    big, small = sizes
    if big == 0 and small == 0:
        return None
    if small < 1 or big <= small:
        return f"--steady-actions {big} {small}: needs BIG > SMALL >= 1 (or 0 0 to skip)"
    return None


def _median_trial(samples: list[dict]) -> dict:
    keys = ("oakwatch_cpu_s", "raw_cpu_s", "oakwatch_wall_s", "raw_wall_s")
    return {"actions": samples[0]["actions"], **{k: statistics.median(s[k] for s in samples) for k in keys}}


def _one(prepared, manifest: Path, out: Path) -> dict:
    """One trial through the timed slot path and raw PyBoy + frame hash on its accepted inputs."""
    from app.bench.bench import BenchFailure, _harness_trial, _raw
    from engine.emulators.emulator import Timing
    from sessions.evidence import layout

    (wall, cpu), trial, result = _harness_trial(manifest, out)
    if result.outcome not in ("success", "game-failure"):
        raise BenchFailure(f"{out}: the steady-state trial is invalid ({result.termination_reason}: {result.error})")
    with (trial / layout.INPUTS).open("rb") as f:
        inputs = [json.loads(line)["action"] for line in f]
    m = prepared.manifest
    timing = Timing(m.emulator.press_frames, m.emulator.settle_frames)
    raw_wall, raw_cpu = _raw(prepared.rom_path, prepared.start_state, inputs, timing, hashing=True, png=False)
    return {"actions": len(inputs), "oakwatch_cpu_s": cpu, "raw_cpu_s": raw_cpu, "oakwatch_wall_s": wall,
            "raw_wall_s": raw_wall}


def steady_figures(prepared, sizes: tuple[int, int], runs: int, tmp: Path) -> dict:
    """Issue 31 row 1 on this machine: `sizes` = (big, small) accepted actions."""
    from app.bench.bench import _random_manifest

    big, small = sizes
    if big <= small or small < 1:
        raise ValueError(f"the steady-state trials need big > small >= 1, got {big} and {small}")
    rounds = max(1, min(runs, 3))
    print(f"steady state: per accepted action, CPU: a {big:,}-action random trial minus a {small:,}-action one "
          f"against raw PyBoy + frame SHA-256 on the same inputs, median of {rounds} round(s)", flush=True)
    manifests = {n: _random_manifest(tmp, f"steady-{n}", n) for n in (big, small)}
    samples: dict[int, list[dict]] = {big: [], small: []}
    for i in range(rounds):
        for n in (small, big):
            samples[n].append(_one(prepared, manifests[n], tmp / f"steady-{n}-{i}"))
        print(f"  round {i + 1}/{rounds} done", flush=True)
    med_big, med_small = _median_trial(samples[big]), _median_trial(samples[small])
    figures = {"sizes": [big, small], "rounds": rounds, "big": med_big, "small": med_small,
               "samples": {str(n): s for n, s in samples.items()}, **steady_ratio(med_big, med_small)}
    ratio = figures["cpu_ratio"]
    shown = "not measurable" if ratio is None else f"{ratio:.2f}x"
    print(f"target per accepted action, CPU, steady state <= {TARGET:.2f}x raw + frame hash: oakwatch "
          f"{_us(figures['oakwatch_cpu_us_per_action'])} vs raw {_us(figures['raw_cpu_us_per_action'])} per extra "
          f"action = {shown} -> {_verdict(figures['target_met'])}; wall "
          f"{_us(figures['oakwatch_wall_us_per_action'])} vs {_us(figures['raw_wall_us_per_action'])}", flush=True)
    return figures


def steady_report(prepared, sizes: tuple[int, int], runs: int, tmp: Path) -> dict:
    """{"steady": figures} for the bench's report, or {} when `sizes` is 0 0 (skipped)."""
    if not sizes[0]:
        print("steady state: skipped (--steady-actions 0 0)", flush=True)
        return {}
    return {"steady": steady_figures(prepared, sizes, runs, tmp)}


def _us(value: float | None) -> str:
    return "?" if value is None else f"{value:.0f} µs"


def _verdict(met: bool | None) -> str:
    return "not measured" if met is None else "met" if met else "NOT met"
