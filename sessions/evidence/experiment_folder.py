"""The experiment folder as a whole: its frozen header, its lock, its run log, voids and sums.

One ExperimentFolder holds a folder for the length of a run (a fresh run, a --resume, or a
recover). It takes `.lock` (an exclusive flock: a live run and `oakwatch recover` can never
both hold it; the file names the holder's PID), keeps `.reserve` (a small preallocated file
released when the disk fills, so the final records still fit), appends the hash-chained run
log, moves the attempts of a voided block under void-<n>/, and keeps SHA256SUMS current from
the digests it has already computed: each sealed trial extends it, nothing rehashes the tree.
At the run's end the folder's root goes into roots.jsonl (sessions.evidence.roots).
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import yaml

from engine.loop.contract import response_json_schema
from engine.loop.records import TrialGenesis, TrialResult
from engine.loop.trial import utc_now
from sessions.evidence import layout, roots
from sessions.evidence.checksums import file_sha256, parse_sums, render_sums
from sessions.evidence.durable import (
    AppendLog,
    EvidenceError,
    error_from,
    fsync_dir,
    fsync_dirs,
    write_atomic,
    write_new_files,
)
from sessions.evidence.recorder import TrialRecorder, sha256_hex
from sessions.evidence.records import BlindingFile, RunEvent, ScheduleFile, Summary, VoidRecord
from sessions.evidence.schemas import published as published_schemas
from sessions.preflight.assets import ASSETS

RESERVE_BYTES = 1 << 20  # room for result.json, summary.json, SHA256SUMS and the run log's last lines


class FolderBusy(RuntimeError):
    """Another live process holds the folder."""


def _yaml(data) -> bytes:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode()


def _json(model_or_data) -> bytes:
    if hasattr(model_or_data, "model_dump_json"):
        return (model_or_data.model_dump_json(indent=2) + "\n").encode()
    return (json.dumps(model_or_data, indent=2) + "\n").encode()


def header_files(prepared) -> dict[str, bytes]:
    """Every file of the frozen experiment, by relative path (written once, before any trial)."""
    m = prepared.manifest
    files: dict[str, bytes] = {layout.MANIFEST: m.to_yaml().encode()}
    files["prompts/system.txt"] = prepared.system_prompt.encode("utf-8")  # exactly what models are sent
    notebook = m.agent.context.notebook_chars if m.agent.context else None  # bounded context's notebook key
    files["prompts/action-schema.json"] = _json(response_json_schema(m.agent.max_actions_per_decision, notebook,
                                                                           tuple(m.agent.shortcuts) or None))
    for c in m.conditions:
        label = prepared.labels[c.id]
        files[f"conditions/{label}.yaml"] = _yaml({"label": label, **c.model_dump(mode="json", exclude={"id"})})
    ladder = [{"id": ms.id, "name": ms.name, "points": ms.points,
               "verification": [cond.model_dump(exclude_none=True) for cond in ms.all]}
              for ms in prepared.game.milestones]
    files["scoring/milestones.yaml"] = _yaml({"game": prepared.game.id, "rules": {
        "award_once": True, "consecutive_frames": 2, "never_if_true_at_start": True}, "milestones": ladder})
    files["scoring/memory-error-rubric.yaml"] = (ASSETS / "prompts" / "memory-error-rubric.yaml").read_bytes()
    for name, data in published_schemas().items():
        files[f"schemas/{name}"] = data
    files.update(prepared.price_schedules)  # derived cost can be rebuilt from the folder alone
    # The unblinding key sits apart from conditions/ and trials/, which annotators work from.
    blinding = BlindingFile(nonce=secrets.token_hex(16),
                            labels={lab: cid for cid, lab in sorted(prepared.labels.items(), key=lambda x: x[1])})
    frozen = {rel: sha256_hex(data) for rel, data in sorted(files.items()) if rel != layout.MANIFEST}
    files[layout.BLINDING] = _json(blinding)
    schedule = ScheduleFile(experiment_id=m.experiment_id, manifest_sha256=m.sha256(),
                            blinding_sha256=sha256_hex(files[layout.BLINDING]), block_size=len(m.conditions),
                            order=[f"{lab}-{n:02d}" for lab, n in prepared.schedule], frozen_files=frozen)
    files[layout.SCHEDULE] = _json(schedule)
    return files


class ExperimentFolder:
    def __init__(self, root: Path):
        self.root = root
        self._lock_fd: int | None = None
        self.sums: dict[str, str] = {}
        self._log: AppendLog | None = None
        self.run_head = ""
        self.run_seq = 0
        self._event_lock = threading.Lock()  # the control socket's thread logs refusals too
        self.schedule: ScheduleFile | None = None
        self.schedule_sha256 = ""
        self.manifest_sha256 = ""
        self.finished = False  # summary and sums written: the folder is whole

    # -- opening --------------------------------------------------------------------------------
    @classmethod
    def create(cls, prepared, root: Path) -> ExperimentFolder:
        """Lay out a new folder (refusing an existing one). It is built under a temporary name
        and renamed into place, so a crash or a refusal never leaves a half-made folder at `root`."""
        if root.exists():
            raise FileExistsError(f"output folder already exists: {root} (choose a new one)")
        try:
            root.parent.mkdir(parents=True, exist_ok=True)
            building = root.parent / f".{root.name}.creating-{secrets.token_hex(4)}"
            building.mkdir()
        except OSError as exc:
            raise error_from(exc, f"the output folder {root}") from None
        folder = cls(building)
        try:
            folder._take_lock()
            folder._reserve()
            # Each file is fsynced; each folder once, not once per file (the rename below is what makes
            # the folder appear whole, so no file needs its own temp name and rename).
            # All files are written first and then fsynced together, then all folders together: the
            # journal commits waits that overlap at once (durable.write_new_files).
            folders, files = {building}, {}
            for rel, data in header_files(prepared).items():
                (building / rel).parent.mkdir(parents=True, exist_ok=True)
                folders.update(p for p in (building / rel).parents if p.is_relative_to(building))
                files[building / rel] = data
                folder.sums[rel] = sha256_hex(data)
            write_new_files(files)
            fsync_dirs(folders)
            (building / layout.TRIALS).mkdir()
            folder._load_schedule()
            folder._open_log(new=True)
            folder.event("run-started", resume=False)
            folder.write_sums()
            if root.exists():
                raise FileExistsError(f"output folder already exists: {root} (choose a new one)")
            os.rename(building, root)  # the lock and the open run log move with it
            fsync_dir(root.parent)
            folder.root = root
        except BaseException:
            folder._unlock()
            if folder._log is not None:
                folder._log.close()
            shutil.rmtree(building, ignore_errors=True)
            raise
        return folder

    @classmethod
    def open(cls, root: Path, vet: Callable[[ExperimentFolder], None] | None = None) -> ExperimentFolder:
        """Take an existing folder for --resume or recover. Raises FolderBusy if a live run holds it.

        Nothing is written until the folder is ours: the lock is taken first, then `vet` (checks
        under the lock) runs, and only then are the holder's PID and the reserve written. If
        anything before that fails, the folder is given back as it was found: a lock file this
        call created is removed and the folder's times are put back."""
        folder = cls(root)
        before = os.stat(root)
        created = folder._flock()
        try:
            sums_path = root / layout.SUMS
            if sums_path.is_file():
                folder.sums = parse_sums(sums_path.read_text(encoding="utf-8"))
            folder._load_schedule()
            if vet is not None:
                vet(folder)
            folder._name_holder()
            folder._reserve()  # a full disk fails here: the folder is still given back without a new lock
        except BaseException:
            folder._unlock()
            if created:
                (root / layout.LOCK).unlink(missing_ok=True)
                os.utime(root, ns=(before.st_atime_ns, before.st_mtime_ns))
            raise
        return folder

    def _take_lock(self) -> None:
        self._flock()
        self._name_holder()

    def _flock(self) -> bool:
        """Hold `.lock` (an exclusive flock); True if this call created the file. Writes nothing."""
        path = self.root / layout.LOCK
        while True:  # (a finishing run may remove its lock file between the two opens)
            try:
                fd, created = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644), True
                break
            except FileExistsError:
                try:
                    fd, created = os.open(path, os.O_RDWR | os.O_CLOEXEC), False
                    break
                except FileNotFoundError:
                    continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(path)
            os.close(fd)
            raise FolderBusy(busy_message(self.root, holder)) from None
        self._lock_fd = fd
        return created

    def _name_holder(self) -> None:
        fd = self._lock_fd
        try:
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                     "since_utc": utc_now()}).encode() + b"\n")
        except OSError as exc:
            raise error_from(exc, "the lock file") from None

    def _reserve(self) -> None:
        path = self.root / layout.RESERVE
        if path.exists():
            return
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                os.posix_fallocate(fd, 0, RESERVE_BYTES)
            finally:
                os.close(fd)
        except OSError as exc:
            try:
                path.unlink()
            except OSError:
                pass
            raise error_from(exc, "the disk reserve") from None

    def release_reserve(self) -> None:
        """The disk is full: give back the reserve so the final records can be written."""
        try:
            (self.root / layout.RESERVE).unlink()
        except FileNotFoundError:
            pass

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _load_schedule(self) -> None:
        data = (self.root / layout.SCHEDULE).read_bytes()
        self.schedule = ScheduleFile.model_validate_json(data)
        self.schedule_sha256 = sha256_hex(data)
        self.manifest_sha256 = self.schedule.manifest_sha256

    # -- the run log ----------------------------------------------------------------------------
    def _open_log(self, *, new: bool) -> None:
        path = self.root / layout.RUN_LOG
        if new:
            self.run_head = self.schedule_sha256
        else:
            from sessions.evidence.reader import read_run_log

            events, good_bytes, _problems = read_run_log(self.root)
            if path.exists() and path.stat().st_size > good_bytes:
                os.truncate(path, good_bytes)  # a torn last line from a killed run
            self.run_head = sha256_hex(_last_line(path)) if events else self.schedule_sha256
            self.run_seq = events[-1].seq if events else 0
        self._log = AppendLog(path, what=layout.RUN_LOG, exclusive=new)

    def reopen_log(self) -> None:
        self._open_log(new=False)

    def event(self, kind: str, **fields) -> RunEvent:
        with self._event_lock:
            return self._event(kind, **fields)

    def _event(self, kind: str, **fields) -> RunEvent:
        self.run_seq += 1
        event = RunEvent(seq=self.run_seq, event=kind, timestamp_utc=utc_now(), pid=os.getpid(),
                         prev_sha256=self.run_head, **fields)
        line = (event.model_dump_json(exclude_none=True) + "\n").encode()
        self._log.append(line)
        self._log.sync()
        self.run_head = sha256_hex(line)
        self.sums[layout.RUN_LOG] = file_sha256(self.root / layout.RUN_LOG)
        return event

    # -- trials ---------------------------------------------------------------------------------
    def trial_path(self, key: str) -> Path:
        return self.root / layout.trial_dir(key)

    def trial_recorder(self, genesis: TrialGenesis, secrets: tuple[str, ...] = (),
                       encode_aside: bool = False) -> TrialRecorder:
        return TrialRecorder(self.trial_path(genesis.trial_key), genesis, on_disk_full=self.release_reserve,
                             secrets=secrets, encode_aside=encode_aside)

    def seal_trial(self, recorder: TrialRecorder, result: TrialResult) -> None:
        """Log the sealed trial and extend SHA256SUMS with its files."""
        key = result.trial_key
        self.event("trial-sealed", trial_key=key, position=result.position, attempt=result.attempt,
                   outcome=result.outcome, result_sha256=recorder.result_sha256,
                   trace_head=result.chain.trace_head if result.chain else None)
        self.add_trial_sums(layout.trial_dir(key))
        self.write_sums()

    def add_trial_sums(self, rel_dir: str) -> None:
        base = self.root / rel_dir
        for path in sorted(p for p in base.rglob("*") if p.is_file()):
            self.sums[path.relative_to(self.root).as_posix()] = file_sha256(path)

    def void_block(self, positions: list[int], trigger: TrialResult) -> VoidRecord:
        """Move the block's attempts under void-<n>/ so the positions can be rerun (--resume).

        void.json is written first, naming what is to move: a kill at any point leaves either an
        empty void-<n>/ without it, or one whose record says what `finish_void` still has to do."""
        n = 1 + max((int(p.name.split("-")[1]) for p in self.root.glob("void-*") if p.is_dir()), default=0)
        vdir = self.root / layout.void_dir(n)
        keys = [self.schedule.order[p] for p in positions if self.trial_path(self.schedule.order[p]).is_dir()]
        vdir.mkdir()
        record = VoidRecord(void=n, positions=positions, trial_keys=keys, trigger=trigger.trial_key,
                            outcome=trigger.outcome, cause=trigger.invalid_cause, timestamp_utc=utc_now())
        data = _json(record)
        try:
            write_atomic(vdir / "void.json", data)
        except EvidenceError:
            vdir.rmdir()  # nothing moved yet: no half-made void is left (and a full disk gets its inode back)
            raise
        self.sums[f"{layout.void_dir(n)}/void.json"] = sha256_hex(data)
        self.finish_void(record, logged=False)
        return record

    def finish_void(self, record: VoidRecord, *, logged: bool) -> None:
        """Move what the void's record names and is still in trials/, log it unless `logged`, write the sums."""
        n = record.void
        vdir = self.root / layout.void_dir(n)
        for key in record.trial_keys:
            src = self.trial_path(key)
            if src.is_dir() and not (vdir / key).exists():
                os.replace(src, vdir / key)
            old, new = layout.trial_dir(key) + "/", f"{layout.void_dir(n)}/{key}/"
            for rel in [r for r in self.sums if r.startswith(old)]:
                if not (self.root / rel).exists() and (self.root / new / rel[len(old):]).is_file():
                    self.sums[new + rel[len(old):]] = self.sums.pop(rel)
        fsync_dir(self.root / layout.TRIALS)
        fsync_dir(vdir)
        if not logged:
            self.event("voided", void=n, positions=record.positions, trial_keys=record.trial_keys,
                       cause=record.cause)
        self.write_sums()

    def block_of(self, position: int) -> list[int]:
        size = self.schedule.block_size
        start = position - position % size
        return list(range(start, min(start + size, len(self.schedule.order))))

    # -- the end --------------------------------------------------------------------------------
    def write_sums(self) -> None:
        write_atomic(self.root / layout.SUMS, render_sums(self.sums).encode())

    def finish(self, stopped_early: bool, stop_reason: str | None,
               make_summary: Callable[[str], Summary]) -> Summary:
        """Log the end, then write summary.json (carrying the run log's head) and SHA256SUMS."""
        self.event("run-finished", stopped_early=stopped_early, stop_reason=stop_reason)
        summary = make_summary(self.run_head)
        data = _json(summary)
        write_atomic(self.root / layout.SUMMARY, data)
        self.sums[layout.SUMMARY] = sha256_hex(data)
        self.write_sums()
        self.finished = True
        try:  # a record of the folder's root, not part of it: failing to write it leaves the run finished
            roots.record(self.root, "the run's end (SHA256SUMS written)")
        except EvidenceError:
            pass
        return summary

    def leave_as_found(self) -> None:
        """Give back a folder opened for a resume that did not start (it was whole before)."""
        self.finished = True
        self.close()

    def close(self) -> None:
        """Release the folder. A finished folder keeps neither reserve nor lock file; one whose
        finish failed keeps its lock file, which marks it for `oakwatch recover`."""
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.finished:
            self.release_reserve()
        if self._lock_fd is not None:
            if self.finished:  # the lock last; a killed run's control socket and pointer go too
                for name in (*(n for n in layout.RUN_ONLY if n not in (layout.LOCK, layout.RESERVE)), layout.LOCK):
                    try:
                        (self.root / name).unlink()
                    except FileNotFoundError:
                        pass
            self._unlock()


def root_hash(folder: Path) -> str | None:
    """The one hash that pins the folder: the evidence and every layer beside it (sessions.evidence.roots)."""
    return roots.folder_root(folder)


def holder_alive(root: Path) -> tuple[bool, str]:
    """Whether a live process holds the folder's lock, and who the lock file names."""
    path = root / layout.LOCK
    who = _read_holder(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False, who
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True, who
    finally:
        os.close(fd)
    return False, who


def busy_message(root: Path, holder: str) -> str:
    return f"{root} is held by a live oakwatch process{holder}; wait for it to finish or stop it first"


def _read_holder(path: Path) -> str:
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
        return f" (pid {info['pid']} on {info['host']})"
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def _last_line(path: Path) -> bytes:
    with path.open("rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        back = min(size, 1 << 16)
        f.seek(size - back)
        chunk = f.read()
    lines = chunk.splitlines(keepends=True)
    return lines[-1] if lines else b""

