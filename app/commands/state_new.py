"""`oakwatch state new --rom PATH --game ID --output DIR [--inputs FILE]`."""

from __future__ import annotations

import sys
from pathlib import Path

from app.commands import fail as _fail
from sessions.preflight.statemaker import StateMakerError, load_template, play_prefix, read_prefix, setup, write_outputs

MAX_BOOT_FRAMES = 1_000_000


def state_new(rom: Path, game: str, output: Path, *, inputs: Path | None = None, emulator: str | None = None,
              boot_frames: int = 0, force: bool = False, experiment: str | None = None) -> int:
    """Exit status: 0 written; 1 the operator quit without saving; 2 bad input (nothing written)."""
    if not 0 <= boot_frames <= MAX_BOOT_FRAMES:
        return _fail(f"--boot-frames must be between 0 and {MAX_BOOT_FRAMES:,}")
    try:
        s = setup(rom, game, output, emulator=emulator, force=force)
        template, timing = load_template(experiment, s)
        if inputs is not None:
            actions = read_prefix(inputs)
        elif sys.stdout.isatty():
            from app.console.state_console import StateConsole

            actions = StateConsole(s, boot_frames, timing).run()
            if actions is None:
                print("oakwatch state new: quit without saving; nothing written")
                return 1
        else:
            return _fail("no --inputs and no terminal to play in: give --inputs FILE (an input script) "
                         "or run it in a terminal")
        print(f"oakwatch state new: playing {len(actions)} action(s) after {boot_frames} boot frame(s) "
              f"on {s.emulator} {s.emulator_version}…", flush=True)
        state, first, frame_index = play_prefix(
            s, boot_frames, actions, timing, progress=lambda n: print(f"  {n:,}/{len(actions):,} actions", flush=True))
        record = write_outputs(s, boot_frames, actions, state, first, frame_index, template, timing)
    except StateMakerError as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot write {output} ({exc})")
    ident = record["rom_identity"]
    print(f"ROM: {s.identity.label(s.game.title)} · SHA-1 {ident['sha1']}")
    if not record["definition_verified"]:
        print(f"note: game definition {record['game']} says verified: false (no real-ROM test has passed on it yet; "
              "runs record that)")
    for key in ("state", "state_sha256", "first_frame_sha256", "frame_index"):
        print(f"{key}: {record[key]}")
    print(f"wrote {s.output}/ (state, inputs.txt, start.json, manifest.yaml); try: "
          f"oakwatch run {s.output}/manifest.yaml --headless")
    return 0


