#!/usr/bin/env python3
"""Play walkthrough.txt on Parcel Quest Advance in mGBA and print, after each line of the script, the
rung the FireRed definition's ladder has reached (read with the project's own probe).

    uv run python assets/gba-cartridge/tools/walk.py [--rom ROM] [--script FILE] [--definition YAML] [--verbose]
    (the Emerald build: --emerald, shorthand for its ROM, walkthrough-emerald.txt and the Emerald definition)

Exit 0 when the final rung (M8) is reached, 1 otherwise. Timing is the GB cartridge's (press 4
frames, settle 12), boot 120 frames with no input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent.parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO))

from engine.emulators.emulator import Timing  # noqa: E402
from engine.emulators.mgba_backend import MGBAEmulator  # noqa: E402
from engine.games.gamedef import GameDefinition  # noqa: E402
from engine.games.ladder import Ladder  # noqa: E402
from engine.games.probe import Probe  # noqa: E402
from engine.loop.script import parse_script  # noqa: E402

DEFINITION = REPO / "assets" / "games" / "pokemon-firered-leafgreen-en.yaml"
BOOT_FRAMES = 120
TIMING = Timing(press_frames=4, settle_frames=12)


def script_lines(text: str) -> list[tuple[str, list[str]]]:
    """(the line as written, its actions) for each line that has actions."""
    out = []
    for raw in text.splitlines():
        body = raw.split("#", 1)[0].strip()
        if body:
            out.append((raw.strip(), parse_script(body)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rom", type=Path, default=HERE / "parcel-quest-advance.gba")
    ap.add_argument("--script", type=Path, default=HERE / "walkthrough.txt")
    ap.add_argument("--definition", type=Path, default=DEFINITION)
    ap.add_argument("--emerald", action="store_true", help="the Emerald build, its walkthrough and definition")
    ap.add_argument("--verbose", action="store_true", help="print the probe sample after every line")
    args = ap.parse_args()
    if args.emerald:
        args.rom = HERE / "parcel-quest-advance-emerald.gba"
        args.script = HERE / "walkthrough-emerald.txt"
        args.definition = REPO / "assets" / "games" / "pokemon-emerald-en.yaml"
    game = GameDefinition.model_validate(yaml.safe_load(args.definition.read_text(encoding="utf-8")))
    probe = Probe(game)
    emu = MGBAEmulator(args.rom.read_bytes(), name=args.rom.name, platform="gba")
    emu.boot(BOOT_FRAMES)
    start = probe(emu.read_range)
    ladder = Ladder(game, start)
    print(f"start: ready={game.is_ready(start)} sb1={start['sb1']:#x} sb2={start['sb2']:#x} "
          f"map={start['map']:#06x} options={start['options']:#06x}")
    from engine.games.ladder import skipped_required
    presses = 0
    decision = 0
    for line, actions in script_lines(args.script.read_text(encoding="utf-8")):
        for action in actions:
            decision += 1
            presses += action != "NOOP"
            r = emu.step(action, TIMING, probe)
            ladder.update(r.ram_before_last, r.ram_last, decision_id=decision, frame_index=r.frame_index,
                          frame_sha256=r.frame_sha256)
        s = r.ram_last
        print(f"{presses:4d} {str(ladder.deepest):4s} map={s['map']:#06x} x={s['x']} y={s['y']} "
              f"sb1={s['sb1']:#x} | {line}")
        if args.verbose:
            print("      ", {k: v for k, v in s.items() if not isinstance(v, list)})
    final = game.final_id
    print(f"reached {ladder.reached} in {presses} presses; final {final}: {final in ladder.reached}; "
          f"required rungs skipped: {skipped_required(game, ladder.awards, ladder.pre_satisfied)}")
    return 0 if final in ladder.reached else 1


if __name__ == "__main__":
    raise SystemExit(main())
