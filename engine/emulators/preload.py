"""Imported by the forkserver before it forks any trial's process (sessions.execute.workers.PRELOAD): what
every trial needs, paid once per run rather than once per trial. PyBoy itself is imported only when
a trial opens its emulator (engine.emulators.pyboy_backend), which was ~0.14 s of a worker's ~0.3 s start-up
(profiled with cProfile in the worker, 2026-12-03); here it is imported ahead, as the trial would."""

from __future__ import annotations

from engine.emulators.pyboy_backend import _import_pyboy

try:
    _import_pyboy()
except ImportError:  # no PyBoy here: a trial that needs it reports that itself, in its own record
    pass
