"""Commands: the modules behind `oakwatch`'s subcommands (app.cli parses and dispatches), and the
exit statuses and bad-input line they share.
"""

from __future__ import annotations

import gc
import sys

EXIT_OK, EXIT_PROBLEMS, EXIT_BAD_INPUT = 0, 1, 2


def fail(message: str) -> int:
    """Bad input: one line on standard error, exit status 2."""
    print(f"oakwatch: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


# -- garbage collection while the process starts (issue 31, row 2) ------------------------------------
# Start-up (imports, ~120 pydantic model classes, preflight) makes ~90,000 tracked objects that live as long as the
# process, and the cyclic collector would scan them again and again as they are made (145 collections,
# ~40-65 ms of CPU in the bundled dry-run, one whole-heap pass among them) for ~2,300 unreachable
# objects. So it is held off until the start is over, and what start-up made is then frozen: kept out
# of every later collection (gc.freeze), which also keeps the trial's own collections short.
_gc_held = _gc_froze = False


def hold_gc() -> None:
    """At the start of `main`: no cyclic collection until release_gc (only if it was on)."""
    global _gc_held
    if gc.isenabled() and not _gc_held:
        gc.disable()
        _gc_held = True


def release_gc() -> None:
    """Start-up is over (the command's real work begins): freeze what it made, collect again."""
    global _gc_held, _gc_froze
    if _gc_held:
        _gc_held, _gc_froze = False, True
        gc.freeze()
        gc.enable()


def end_gc(*, process_ends: bool) -> None:
    """At the end of `main`: collection on again. When the process ends with it (the `oakwatch`
    program), what start-up made stays frozen: the interpreter's last collection at exit then skips
    it (~60 ms of wall time in the dry-run; nothing is promised of objects alive at exit, and evidence
    never waits on a finalizer: every file is written, fsynced and closed by then). A caller that runs
    `main` in its own process (tests) gets them back among the collected ones."""
    global _gc_froze
    release_gc()
    if _gc_froze and not process_ends:
        _gc_froze = False
        gc.unfreeze()
