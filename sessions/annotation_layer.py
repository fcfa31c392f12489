"""An annotation layer: one annotator's labels beside the evidence, never inside it.

`annotations/<annotator>/annotations.jsonl` is append-only and hash-chained; the folder keeps
its own SHA256SUMS, so adding a label never touches the evidence's sums. Live operator tags
whose trial ended while the tag was being typed land in the `operator` layer.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from engine.control import TagForAnotherTrial
from engine.records import Annotation
from engine.trial import TagRefused, build_annotation, check_reference
from sessions import layout
from sessions.checksums import file_sha256, render_sums
from sessions.durable import AppendLog, write_atomic
from sessions.reader import FormatProblem, TrialReader, iter_lines

LAYER_FILE = "annotations.jsonl"


class AnnotationLayer:
    def __init__(self, root: Path, annotator: str):
        self.folder = root / layout.ANNOTATIONS / annotator
        self.path = self.folder / LAYER_FILE

    def head(self) -> str:
        head = hashlib.sha256(b"").hexdigest()
        if self.path.is_file():
            for _n, line in iter_lines(self.path, f"{layout.ANNOTATIONS}/{self.folder.name}/{LAYER_FILE}"):
                head = hashlib.sha256(line).hexdigest()
        return head

    def append(self, record: Annotation) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        record.prev_sha256 = self.head()
        log = AppendLog(self.path, what=f"{layout.ANNOTATIONS}/{self.folder.name}/{LAYER_FILE}", exclusive=False)
        try:
            log.append((record.model_dump_json() + "\n").encode())
            log.sync()
        finally:
            log.close()
        write_atomic(self.folder / layout.SUMS, render_sums({LAYER_FILE: file_sha256(self.path)}).encode())


def late_tagger(root: Path):
    """Tags for a trial that has already been sealed: checked against its evidence on disk."""

    def tag(annotation: dict, commit: bool) -> Annotation:
        key = annotation.get("trial_key")
        folder = root / layout.TRIALS / str(key)
        if not key or not (folder / layout.RESULT).is_file():
            raise TagForAnotherTrial(key)
        reader = TrialReader(folder)
        try:
            result, _ = reader.result()
            facts = {op.fact_id for op in reader.memory() if op.op == "write"}
        except FormatProblem as exc:
            raise TagRefused(f"trial {key} cannot be read back: {exc}") from None
        decision = annotation.get("decision_id", result.last_decision)
        if not isinstance(decision, int) or not 0 <= decision <= result.last_decision:
            raise TagRefused(f"decision {decision} is not a recorded decision of {key}")
        if annotation.get("refers_to") is not None:
            check_reference(annotation["refers_to"], decision, facts.__contains__)
        record = build_annotation(annotation, key, decision)
        if commit:
            AnnotationLayer(root, layout.OPERATOR_ANNOTATOR).append(record)
        return record

    return tag



