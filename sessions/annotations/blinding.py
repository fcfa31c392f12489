"""Keeping annotators blind, and lifting the blind once every label is frozen.

`export_for_annotators(root, out)` writes a blinded copy for annotators: each trial's trace,
responses, inputs, memory, frames and result, with every model id masked ("[masked]") in the copy
only (the evidence keeps its exact ids, as the protocol requires); no conditions/<label>.yaml, no
blinding.json, no trial.json (its condition hash), no provider-failure.json and no labels of other
annotators; the manifest's conditions reduced to their labels. A README in the copy says what was
masked and left out.

`unblind(root)` refuses until every trial's labels are frozen (`unblind_problems`): at least one
annotator layer exists, every layer that labels any trial is frozen, and the adjudication layer,
if present, is frozen. Then it writes unblinded/summary.json (the run's summary with each
label's condition id beside it), unblinded/blinding.json (a byte copy of the key) and their own
SHA256SUMS. The run's summary.json, which names labels only, and the evidence's sums never change.
unblinded/summary.json records what it was made from (`roots`: the folder's root, every part's root
and each frozen layer's state, sessions.evidence.roots.cited), so verify holds the layers to it later.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import yaml

from sessions.annotations.annotation_layer import ADJUDICATION, OPERATOR, AnnotationLayer, LayerError, layer_names
from sessions.evidence import layout, roots
from sessions.evidence.checksums import file_sha256, render_sums
from sessions.evidence.durable import EvidenceError, fsync_dir, write_atomic
from sessions.evidence.folder import EvidenceFolder
from sessions.evidence.reader import FormatProblem, parse
from sessions.evidence.records import BlindingFile, Summary

MASK = "[masked]"
MIN_SCRUB = 3  # an id shorter than this is masked in its own fields only, not inside other text
EXPORTED_FILES = (layout.TRACE, layout.RESPONSES, layout.INPUTS, layout.MEMORY, layout.RESULT)
KEPT_PROVENANCE = ("emulator", "memory_rules")


class BlindingError(ValueError):
    """Refused or bad input; the message is one line."""


# -- unblinding -----------------------------------------------------------------------------------

def unblind_problems(root: Path) -> list[str]:
    """Why the folder cannot be unblinded yet (empty: it can). Names unfrozen layers and unlabelled trials."""
    try:
        layers = {name: AnnotationLayer(root, name) for name in layer_names(root)}
        records = {name: layer.records() for name, layer in layers.items()}
    except LayerError as exc:
        return [f"a layer cannot be read: {exc}"]
    annotators = [n for n in records if n not in (OPERATOR, ADJUDICATION)]
    problems = []
    if not annotators:
        problems.append("no annotator layer yet (`oakwatch annotate add DIR --annotator NAME ...`)")
    unfrozen = _unfrozen(records)
    if unfrozen:
        problems.append(f"layers not frozen: {', '.join(unfrozen)} (`oakwatch annotate freeze DIR --annotator NAME`)")
    if problems:
        missing = _unlabelled_trials(root, records, annotators)
        if missing:
            problems.append(f"trials without labels: {', '.join(missing)}")
    return problems


def _unfrozen(records: dict[str, list]) -> list[str]:
    """Layers holding labels (and the adjudication layer, if any) whose last line is not a freeze."""
    def frozen(rs: list) -> bool:
        return bool(rs) and rs[-1].kind == "freeze"

    labelling = [n for n, rs in records.items() if n != ADJUDICATION and any(r.kind != "freeze" for r in rs)]
    unfrozen = [n for n in labelling if not frozen(records[n])]
    if ADJUDICATION in records and not frozen(records[ADJUDICATION]):
        unfrozen.append(ADJUDICATION)
    return unfrozen


def _unlabelled_trials(root: Path, records: dict[str, list], annotators: list[str]) -> list[str]:
    """Trial keys of the folder that no annotator labelled (sorted)."""
    labelled = {r.trial_key for n in annotators for r in records[n]
                if r.kind in ("memory-error", "route", "reviewed", "milestone")}
    return [t.key for t in EvidenceFolder(root).trials(voided=False) if t.key not in labelled]


def unblind(root: Path) -> Path:
    """Write unblinded/ (summary with condition ids, the key, their sums); raises BlindingError if refused."""
    if not root.is_dir():
        raise BlindingError(f"{root}: not a folder")
    target = root / layout.UNBLINDED
    if target.exists():
        raise BlindingError(f"{target} already exists: the folder is unblinded")
    problems = unblind_problems(root)
    if problems:
        raise BlindingError("labels not frozen, so the folder stays blind: " + "; ".join(problems))
    try:
        key_bytes = (root / layout.BLINDING).read_bytes()
        blinding = parse(BlindingFile, key_bytes, layout.BLINDING)
        summary = parse(Summary, (root / layout.SUMMARY).read_bytes(), layout.SUMMARY)
    except OSError as exc:
        raise BlindingError(f"{exc.filename}: cannot read it ({exc.strerror})") from None
    except FormatProblem as exc:
        raise BlindingError(str(exc)) from None
    labels = dict(blinding.labels)
    data = summary.model_dump(mode="json")
    data["unblinded"] = True
    data["conditions"] = labels
    data["per_condition"] = {label: {"condition_id": labels.get(label), **figures}
                             for label, figures in data["per_condition"].items()}
    data["trials"] = [{**t, "condition_id": labels.get(t["trial_key"].split("-", 1)[0])} for t in data["trials"]]
    data["frozen_layers"] = {name: AnnotationLayer(root, name).frozen_sha256() for name in layer_names(root)}
    data["roots"] = roots.cited(root)  # the evidence and the frozen layers these condition ids are read with
    body = (json.dumps(data, indent=2) + "\n").encode()
    tmp = root / (layout.UNBLINDED + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        write_atomic(tmp / layout.SUMMARY, body)
        write_atomic(tmp / layout.BLINDING, key_bytes)
        sums = {name: file_sha256(tmp / name) for name in (layout.SUMMARY, layout.BLINDING)}
        write_atomic(tmp / layout.SUMS, render_sums(sums).encode())
        os.rename(tmp, target)
        fsync_dir(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        roots.record(root, f"{layout.UNBLINDED}/ written")
    except EvidenceError as exc:
        raise BlindingError(f"{target} was written, but {layout.ROOTS_LOG} was not ({exc})") from None
    return target


def unblinded_labels(root: Path) -> dict[str, str] | None:
    """label -> condition id once `oakwatch unblind` has run, else None (still blind)."""
    try:
        return dict(parse(BlindingFile, (root / layout.UNBLINDED / layout.BLINDING).read_bytes(),
                          f"{layout.UNBLINDED}/{layout.BLINDING}").labels)
    except (OSError, FormatProblem):
        return None


# -- the blinded copy -----------------------------------------------------------------------------

def _jsonl(path: Path) -> list:
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def _collect(value, keys: tuple[str, ...], into: set[str]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            if k in keys and isinstance(v, str):
                into.add(v)
            _collect(v, keys, into)
    elif isinstance(value, list):
        for v in value:
            _collect(v, keys, into)


MODEL_KEYS = ("model", "model_id", "model_asked", "model_version")


def model_ids(root: Path) -> set[str]:
    """Every model id the folder names: the manifest's conditions, each reply's model, the provenance."""
    ids: set[str] = set()
    try:
        _collect(yaml.safe_load((root / layout.MANIFEST).read_text(encoding="utf-8")), MODEL_KEYS, ids)
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        pass
    for cond in sorted((root / "conditions").glob("*.yaml")):
        try:
            _collect(yaml.safe_load(cond.read_text(encoding="utf-8")), MODEL_KEYS, ids)
        except (OSError, yaml.YAMLError, UnicodeDecodeError):
            pass
    for folder in _trial_folders(root):
        for name in (*EXPORTED_FILES, layout.PROVIDER_FAILURE):
            path = folder / name
            if path.is_file():
                try:
                    rows = _jsonl(path) if name.endswith(".jsonl") else [json.loads(path.read_bytes())]
                except ValueError:
                    continue
                _collect(rows, MODEL_KEYS, ids)
    return {i for i in ids if i and i != MASK}


def _trial_folders(root: Path) -> list[Path]:
    """trials/ by key, then each void-<n>/ attempt in void order (EvidenceFolder.trials)."""
    return [t.path for t in EvidenceFolder(root).trials()]


def _scrub(value, ids: list[str]):
    """Every model id inside any string (keys too) replaced by the mask."""
    if isinstance(value, str):
        for i in ids:
            if i in value:
                value = value.replace(i, MASK)
        return value
    if isinstance(value, dict):
        return {_scrub(k, ids): _scrub(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, ids) for v in value]
    return value


def _mask_fields(record: dict, fields: tuple[str, ...]) -> None:
    for name in fields:
        if record.get(name) is not None:
            record[name] = MASK


def _mask(name: str, record: dict) -> dict:
    if name == layout.TRACE:
        _mask_fields(record, ("model_id", "response_id"))
    elif name == layout.RESPONSES:
        for attempt in record.get("attempts") or []:
            if isinstance(attempt, dict):
                _mask_fields(attempt, ("model_id", "response_id", "stop_reason"))
                for kind in ("identity", "reply"):  # the provider's own ids and reply body
                    if attempt.get(kind) is not None:
                        attempt[kind] = {"masked": MASK}
    elif name == layout.RESULT:
        provenance = record.get("provenance")
        if isinstance(provenance, dict):
            record["provenance"] = {**{k: provenance[k] for k in KEPT_PROVENANCE if k in provenance},
                                    "masked": MASK}
    return record


README = """# Blinded copy for annotators

Exported by `oakwatch export --for-annotators` from the evidence folder of experiment
`{experiment}`. Label trials here without knowing which model or condition played them.

What is here: `trials/<label>-<NN>/` (and `void-<n>/<label>-<NN>/` for voided attempts) with
trace.jsonl, responses.jsonl, inputs.jsonl, memory.jsonl, frames/frames.pack and result.json;
`manifest.yaml` with its conditions reduced to their labels ({labels}); `prompts/` and `scoring/`
(the memory-error rubric).

What was masked, in this copy only ("{mask}"): every model id (the trace's and each response's
`model_id`, and the id wherever any text quotes it), response ids, the provider's stop reasons,
request identities and reply bodies, and the result's provenance except the emulator and memory
rules.

What was left out: `conditions/<label>.yaml`, `blinding.json` (the key from labels to
conditions), `schedule.json`, `summary.json`, `run.jsonl`, each trial's `trial.json` and
`provider-failure.json`, the operator's live tags and every annotation layer.

The original folder keeps the exact model ids. Masking changes bytes, so the hash chains and sums
of this copy do not verify: verify the original (`oakwatch verify`), and write labels to the
original with `oakwatch annotate add ORIGINAL_DIR --annotator NAME ...` (or `oakwatch review`).
Labels are unblinded only after every layer is frozen (`oakwatch unblind`).
"""


def export_for_annotators(root: Path, out: Path) -> dict:
    """Write the blinded copy; returns {"trials": n, "masked_ids": n}. Raises BlindingError for bad input."""
    labels, manifest = _key_and_manifest(root, out)
    condition_ids = {str(c.get("id")) for c in manifest.get("conditions") or [] if isinstance(c, dict)}
    ids = sorted(model_ids(root), key=len, reverse=True)
    scrub = [i for i in ids if len(i) >= MIN_SCRUB]
    tmp = out.with_name(out.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        trials = 0
        for folder in _trial_folders(root):
            _export_trial(root, folder, tmp, scrub)
            trials += 1
        _export_shared(root, tmp, manifest, labels, scrub)
        leaked = _leaks(tmp, [i for i in ids if len(i) >= MIN_SCRUB])
        if leaked:  # never expected: every text file was scrubbed; refuse rather than leak
            raise BlindingError(f"a model id survived masking in {leaked}; nothing was written")
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"trials": trials, "masked_ids": len(ids), "conditions_hidden": len(condition_ids)}


def _key_and_manifest(root: Path, out: Path) -> tuple[list[str], dict]:
    """The blinding key's labels (sorted) and the manifest, read from `root`; refuses an `out` that exists."""
    if not root.is_dir() or not (root / layout.MANIFEST).is_file():
        raise BlindingError(f"{root}: not an evidence folder (no {layout.MANIFEST})")
    if out.exists():
        raise BlindingError(f"{out} already exists: give a new folder")
    try:
        labels = sorted(parse(BlindingFile, (root / layout.BLINDING).read_bytes(), layout.BLINDING).labels)
        manifest = yaml.safe_load((root / layout.MANIFEST).read_text(encoding="utf-8"))
    except (OSError, FormatProblem, yaml.YAMLError, UnicodeDecodeError) as exc:
        raise BlindingError(f"{root}: cannot read its manifest or blinding key ({exc})") from None
    if not isinstance(manifest, dict):
        raise BlindingError(f"{root / layout.MANIFEST}: not a manifest")
    return labels, manifest


def _export_trial(root: Path, folder: Path, tmp: Path, scrub: list[str]) -> None:
    """One trial's exported files, masked and scrubbed, and its frames, copied under `tmp`."""
    rel = folder.relative_to(root)
    dst = tmp / rel
    (dst / "frames").mkdir(parents=True)
    for name in EXPORTED_FILES:
        src = folder / name
        if src.is_file():
            (dst / name).write_text(_blinded_text(src, f"{rel}/{name}", scrub), encoding="utf-8")
    if (folder / layout.FRAMES).is_file():
        shutil.copyfile(folder / layout.FRAMES, dst / layout.FRAMES)


def _blinded_text(src: Path, shown: str, scrub: list[str]) -> str:
    """A JSON or JSON-lines file's text with its records masked and model ids scrubbed."""
    name = src.name
    try:
        rows = _jsonl(src) if name.endswith(".jsonl") else [json.loads(src.read_bytes())]
    except ValueError as exc:
        raise BlindingError(f"{shown}: not JSON ({exc}); verify the folder first") from None
    rows = [_scrub(_mask(name, r) if isinstance(r, dict) else r, scrub) for r in rows]
    if name.endswith(".jsonl"):
        return "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in rows)
    return json.dumps(rows[0], ensure_ascii=False, indent=2) + "\n"


def _export_shared(root: Path, tmp: Path, manifest: dict, labels: list[str], scrub: list[str]) -> None:
    """The blinded manifest (conditions as labels only), prompts and scoring scrubbed, and the README."""
    blinded = {k: v for k, v in manifest.items() if k != "conditions"}
    blinded["conditions"] = [{"label": label} for label in labels]
    (tmp / layout.MANIFEST).write_text(yaml.safe_dump(_scrub(blinded, scrub), sort_keys=False), encoding="utf-8")
    for sub in ("prompts", "scoring"):
        for src in sorted((root / sub).glob("*")) if (root / sub).is_dir() else []:
            if src.is_file():
                (tmp / sub).mkdir(exist_ok=True)
                (tmp / sub / src.name).write_text(_scrub(src.read_text(encoding="utf-8"), scrub),
                                                  encoding="utf-8")
    (tmp / "README.md").write_text(README.format(experiment=_scrub(str(manifest.get("experiment_id")), scrub),
                                                 labels=", ".join(labels), mask=MASK), encoding="utf-8")


def _leaks(folder: Path, ids: list[str]) -> str | None:
    needles = [i.encode() for i in ids]
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            if any(n in data for n in needles):
                return path.relative_to(folder).as_posix()
    return None
