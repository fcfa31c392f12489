"""`oakwatch replay`: re-run a trial's recorded inputs from the recorded start state.

No policy and no model: the emulator gets exactly the logged button presses with the
manifest's timing, and every decision's frame hashes and milestones must match the trace.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from engine.emulator import Timing, frame_sha256
from engine.ladder import Ladder
from engine.probe import Probe
from engine.pyboy_backend import PyBoyEmulator
from sessions.assets import resolve
from sessions.experiment import PreflightError, sha256_file
from sessions.gamedefs import GameDefinitionError, load_game_definition
from sessions.manifest import ManifestError, load_manifest


class Divergence(RuntimeError):
    """The replay differs from the record; the message names where."""


def load_trial(trial_dir: Path, rom: Path | None = None):
    if not (trial_dir / "trace.jsonl").is_file():
        raise PreflightError(f"{trial_dir}: no trace.jsonl here; give a trial folder (<exp>/trials/<label>-<NN>)")
    folder = trial_dir.resolve().parent.parent
    try:
        manifest = load_manifest(folder / "manifest.yaml")
    except ManifestError as exc:
        raise PreflightError(str(exc)) from None
    g = manifest.game
    rom_path = rom or resolve(g.rom, folder)
    _, rom_sha = sha256_file(rom_path, "ROM")
    if rom_sha != g.rom_sha256:
        raise PreflightError(f"ROM {rom_path} has SHA-256 {rom_sha}, the experiment used {g.rom_sha256}")
    state, state_sha = sha256_file(resolve(g.initial_state, folder), "initial state")
    if state_sha != g.initial_state_sha256:
        raise PreflightError(f"initial state has SHA-256 {state_sha}, the experiment used "
                             f"{g.initial_state_sha256}")
    try:
        game = load_game_definition(resolve(g.definition, folder))
    except GameDefinitionError as exc:
        raise PreflightError(str(exc)) from None
    trace = [json.loads(x) for x in (trial_dir / "trace.jsonl").read_text(encoding="utf-8").splitlines()]
    inputs: dict[int, list[dict]] = defaultdict(list)
    for line in (trial_dir / "inputs.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        inputs[row["decision_id"]].append(row)
    timing = Timing(manifest.emulator.press_frames, manifest.emulator.settle_frames)
    return rom_path, state, game, trace, inputs, timing


def replay_trial(trial_dir: Path, rom: Path | None = None, progress=None) -> dict:
    """Replay and check; return counts. Raise Divergence at the first mismatch."""
    rom_path, state, game, trace, inputs, timing = load_trial(trial_dir, rom)
    emulator = PyBoyEmulator(rom_path)
    try:
        return replay_records(emulator, state, game, trace, inputs, timing, progress)
    finally:
        emulator.close()


def replay_records(emulator, state, game, trace, inputs, timing, progress=None) -> dict:
    probe = Probe(game)
    emulator.restore(state)
    first = frame_sha256(emulator.frame())
    if trace and trace[0]["frame_sha256"] != first:
        raise Divergence(f"start state: first frame is {first}, the trace recorded {trace[0]['frame_sha256']}")
    ladder = Ladder(game, probe(emulator.read_range))
    actions = 0
    for t in trace:
        did = t["decision_id"]
        for row in sorted(inputs.get(did, []), key=lambda r: r["index"]):
            step = emulator.step(row["action"], timing, probe)
            actions += 1
            if step.frame_sha256 != row["frame_sha256"]:
                raise Divergence(f"decision {did}, action {row['index']} ({row['action']}): frame "
                                 f"{step.frame_sha256[:16]}… differs from the recorded "
                                 f"{row['frame_sha256'][:16]}… at frame {step.frame_index}")
            ladder.update(step.ram_before_last, step.ram_last, decision_id=did,
                          frame_index=step.frame_index, frame_sha256=step.frame_sha256)
        if ladder.reached != t["milestones_after"]:
            raise Divergence(f"decision {did}: milestones {ladder.reached} differ from the recorded "
                             f"{t['milestones_after']}")
        if progress:
            progress(did, len(trace))
    return {"decisions": len(trace), "actions": actions, "milestones": ladder.reached}
