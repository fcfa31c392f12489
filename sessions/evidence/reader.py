"""Reading evidence back: the one parser of a trial folder and of the experiment's own files.

Every line is validated against its record model; a bad one raises FormatProblem naming the
file and line, never a traceback. Streams are read line by line, so memory stays flat however
long the trial. `verify`, `replay`, `recover`, `--resume` and the replay policy all read
through here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from engine.loop.records import (
    Annotation,
    InputLine,
    MemoryOp,
    ReplyOversize,
    ResponseLine,
    TraceLine,
    TrialGenesis,
    TrialResult,
)
from sessions.evidence import layout
from sessions.evidence.records import RunEvent

M = TypeVar("M", bound=BaseModel)
MAX_LINE = 64 << 20  # a line longer than this is not one of ours


class FormatProblem(ValueError):
    """A file that is not what oakwatch writes; the message names the file and line."""


def short_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "(line)"
    # A field name comes from the file: a newline or control character in it would break the one-line message.
    loc = "".join(c if c.isprintable() else repr(c)[1:-1] for c in loc)
    more = len(exc.errors()) - 1
    return f"{loc}: {first['msg']}" + (f" (and {more} more)" if more else "")


def parse(model: type[M], data: bytes | str, where: str) -> M:
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        raise FormatProblem(f"{where}: {short_error(exc)}") from None


def iter_lines(path: Path, where: str) -> Iterator[tuple[int, bytes]]:
    """(line number, the line's bytes with its newline). A last line without one is torn."""
    with path.open("rb") as f:
        for n, line in enumerate(f, 1):
            if not line.endswith(b"\n"):
                raise FormatProblem(f"{where}:{n}: torn last line (no newline): the process died mid-write")
            if len(line) > MAX_LINE:
                raise FormatProblem(f"{where}:{n}: line too long")
            yield n, line


def whole_lines_length(path: Path) -> int:
    """Bytes up to the end of the last whole line (what `recover` keeps)."""
    size = 0
    with path.open("rb") as f:
        for line in f:
            if not line.endswith(b"\n"):
                break
            size += len(line)
    return size


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class TrialReader:
    def __init__(self, folder: Path, rel: str | None = None):
        self.folder = folder
        self.rel = rel or folder.name  # how problems name the folder

    def where(self, name: str) -> str:
        return f"{self.rel}/{name}"

    def exists(self, name: str) -> bool:
        return (self.folder / name).is_file()

    def _whole(self, name: str, model: type[M]) -> tuple[M, str]:
        path = self.folder / name
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise FormatProblem(f"{self.where(name)} is missing") from None
        except OSError as exc:
            raise FormatProblem(f"{self.where(name)}: unreadable ({exc.strerror})") from None
        return parse(model, data, self.where(name)), sha256_hex(data)

    def genesis(self) -> tuple[TrialGenesis, str]:
        return self._whole(layout.TRIAL, TrialGenesis)

    def result(self) -> tuple[TrialResult, str]:
        return self._whole(layout.RESULT, TrialResult)

    def lines(self, name: str) -> Iterator[tuple[int, bytes]]:
        path = self.folder / name
        if not path.is_file():
            raise FormatProblem(f"{self.where(name)} is missing")
        return iter_lines(path, self.where(name))

    def records(self, name: str, model: type[M]) -> Iterator[tuple[M, bytes]]:
        where = self.where(name)
        for n, line in self.lines(name):
            yield parse(model, line, f"{where}:{n}"), line

    def trace(self) -> Iterator[TraceLine]:
        return (r for r, _ in self.records(layout.TRACE, TraceLine))

    def inputs(self) -> Iterator[InputLine]:
        return (r for r, _ in self.records(layout.INPUTS, InputLine))

    def responses(self) -> Iterator[ResponseLine]:
        return (r for r, _ in self.records(layout.RESPONSES, ResponseLine))

    def memory(self) -> Iterator[MemoryOp]:
        return (r for r, _ in self.records(layout.MEMORY, MemoryOp))

    def annotations(self) -> Iterator[Annotation]:
        return (r for r, _ in self.records(layout.TRIAL_ANNOTATIONS, Annotation))

    def recorded_attempts(self) -> list[list[str | ReplyOversize]]:
        """Per decision, the raw text of every attempt that answered (for the replay policy); an
        answer over the reply cap, kept only by its size and digest, is that record."""
        out = []
        for n, response in enumerate(self.responses(), 1):
            if response.decision_id != n:
                raise FormatProblem(f"{self.where(layout.RESPONSES)}:{n}: decision {response.decision_id} "
                                    f"out of order")
            out.append([a.raw if a.oversize is None else a.oversize for a in response.attempts
                        if a.raw is not None or a.oversize is not None])
        return out

    def inputs_by_decision(self) -> Iterator[tuple[int, list[InputLine]]]:
        """Accepted inputs grouped by decision, in order (decisions with none are skipped)."""
        group: list[InputLine] = []
        for row in self.inputs():
            if group and row.decision_id != group[0].decision_id:
                yield group[0].decision_id, group
                group = []
            group.append(row)
        if group:
            yield group[0].decision_id, group


def read_run_log(root: Path) -> tuple[list[RunEvent], int, list[str]]:
    """The run log's whole events, the bytes they span, and problems (a torn tail among them)."""
    path = root / layout.RUN_LOG
    events: list[RunEvent] = []
    problems: list[str] = []
    good = 0
    if not path.is_file():
        return events, 0, [f"{layout.RUN_LOG} is missing"]
    try:
        for n, line in iter_lines(path, layout.RUN_LOG):
            events.append(parse(RunEvent, line, f"{layout.RUN_LOG}:{n}"))
            good += len(line)
    except FormatProblem as exc:
        problems.append(str(exc))
    return events, good, problems


def read_results(root: Path) -> dict[str, tuple[TrialResult, str]]:
    """Every trial in trials/ that has a readable result.json: key -> (result, its SHA-256)."""
    out = {}
    trials = root / layout.TRIALS
    if not trials.is_dir():
        return out
    for folder in sorted(p for p in trials.iterdir() if p.is_dir()):
        reader = TrialReader(folder, layout.trial_dir(folder.name))
        if reader.exists(layout.RESULT):
            try:
                out[folder.name] = reader.result()
            except FormatProblem:
                continue
    return out
