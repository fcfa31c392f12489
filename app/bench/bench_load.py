"""The machine's load over an `oakwatch bench` run, printed in the tally's header and in `--json`.

Issue 31 asks for every speed figure to be read beside the load it was taken under: on a shared
2-core machine a busy neighbour, or the host stealing the virtual CPUs, slows both sides of a
ratio, but not always equally. Recorded: the 1-minute load average (/proc/loadavg) at the start
and at the end of the run, and the share of CPU time stolen by the host over the run (the `steal`
column of /proc/stat's `cpu` line, as a share of every column's jiffies, between start and end).
A value that cannot be read is None (null in JSON), never 0.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

LOADAVG = Path("/proc/loadavg")
STAT = Path("/proc/stat")


def loadavg_1min(text: str) -> float | None:
    """The 1-minute load average from /proc/loadavg's text."""
    try:
        return float(text.split()[0])
    except (IndexError, ValueError):
        return None


def cpu_jiffies(text: str) -> tuple[int, int] | None:
    """(steal, total) jiffies from /proc/stat's aggregate `cpu` line (steal is its 8th column).
    total is user..steal: guest time is already counted in user and nice."""
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            try:
                values = [int(v) for v in fields[1:9]]
            except ValueError:
                return None
            if len(values) < 8:
                return None
            return values[7], sum(values)
    return None


def steal_percent(start: tuple[int, int] | None, end: tuple[int, int] | None) -> float | None:
    """The stolen share of CPU time between two (steal, total) samples, in percent."""
    if start is None or end is None or end[1] <= start[1]:
        return None
    return 100.0 * (end[0] - start[0]) / (end[1] - start[1])


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="ascii")
    except OSError:
        return ""


@dataclass
class LoadWatch:
    """Started with the bench; `finish()` gives the figures for the report's "load" entry."""

    loadavg: Path = LOADAVG
    stat: Path = STAT

    def __post_init__(self) -> None:
        self.start_load = loadavg_1min(_read(self.loadavg))
        self.start_jiffies = cpu_jiffies(_read(self.stat))

    def finish(self) -> dict:
        end_load = loadavg_1min(_read(self.loadavg))
        end_jiffies = cpu_jiffies(_read(self.stat))
        steal = steal_percent(self.start_jiffies, end_jiffies)
        return {"loadavg_1min_start": self.start_load, "loadavg_1min_end": end_load,
                "steal_percent": None if steal is None else round(steal, 2), "cores": os.cpu_count()}


def load_line(load: dict | None) -> str:
    """The tally header's line: the load the figures were taken under."""
    load = load or {}

    def show(value, fmt: str) -> str:
        return "unknown" if not isinstance(value, int | float) else fmt.format(value)

    return (f"machine load: 1-min load average {show(load.get('loadavg_1min_start'), '{:.2f}')} at the start, "
            f"{show(load.get('loadavg_1min_end'), '{:.2f}')} at the end; steal "
            f"{show(load.get('steal_percent'), '{:.2f} %')} over the run; "
            f"{show(load.get('cores'), '{:d}')} cores")
