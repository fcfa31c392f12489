"""verify: the folder as files: SHA256SUMS, what the layout allows, the layers beside the evidence."""

from __future__ import annotations

import os
from pathlib import Path

from sessions.audit.verify_context import DEFERRED, Context, Report
from sessions.evidence import layout, roots
from sessions.evidence.checksums import SumsFormatError, file_sha256, parse_sums

# -- the folder as files -----------------------------------------------------------------------

def _check_files(ctx: Context, report: Report) -> None:
    root = ctx.root
    listed = ctx.sums = _read_sums(root, report)
    present, layers = _walk_files(root, report)
    # A run that did not finish leaves its last trial unsealed and its run log ahead of the sums:
    # that is an interruption (recover finishes it), not a tampering.
    unfinished = {f"{layout.trial_dir(p.name)}/" for p in (root / layout.TRIALS).glob("*")
                  if p.is_dir() and not (p / layout.RESULT).is_file()}
    interrupted = bool(unfinished) or (root / layout.LOCK).exists() or not (root / layout.SUMMARY).is_file()
    ctx.interrupted = interrupted
    if interrupted:  # a seal or a void as the disk filled: its sums never reached SHA256SUMS (recover lists them)
        unfinished |= _unlisted_seals(root, listed)
    _check_listed(ctx, present, report)
    for rel in sorted(present - set(listed)):
        if not (interrupted and (rel == layout.RUN_LOG or rel.startswith(tuple(unfinished))
                                 or rel.endswith("/" + layout.RESULT))):
            report.add(f"{rel}: present but not listed in {layout.SUMS}")
    for layer in sorted(layers):
        _check_layer(root / layer, layer, report)
    for problem in roots.check(root):  # layers against the states recorded outside them
        report.add(problem)


def _read_sums(root: Path, report: Report) -> dict[str, str]:
    sums_path = root / layout.SUMS
    if not sums_path.is_file():
        report.add(f"{layout.SUMS} is missing")
        return {}
    try:
        return parse_sums(sums_path.read_text(encoding="utf-8"))
    except (SumsFormatError, UnicodeDecodeError, OSError) as exc:
        report.add(str(exc) if isinstance(exc, SumsFormatError) else f"{layout.SUMS}: unreadable")
        return {}


def _walk_files(root: Path, report: Report) -> tuple[set[str], set[str]]:
    """Every file, classified by the layout: (the evidence files, the layers' folders); a temp, run-only
    or unknown file is reported as it is met."""
    present: set[str] = set()
    layers: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            rel = Path(dirpath, name).relative_to(root).as_posix()
            kind = layout.classify_path(rel)
            if kind == "evidence":
                present.add(rel)
            elif kind == "layer":
                layers.add(_layer_of(rel))
            elif kind in _STRAY:
                _STRAY[kind](root, rel, report)
    return present, layers


def _layer_of(rel: str) -> str:
    if rel.startswith(layout.ANNOTATIONS):
        return rel.rsplit("/", 1)[0]
    return layout.UNBLINDED if rel.startswith(layout.UNBLINDED + "/") else layout.REPORTS


# A file that is not evidence nor a layer: what verify says of it, by its kind (sessions.evidence.layout).
_STRAY = {
    "temp": lambda root, rel, report: report.add(f"{rel}: leftover temp file (a write was interrupted)"),
    "run-only": lambda root, rel, report: report.interrupted.append(_lock_note(root, rel)),
    "unknown": lambda root, rel, report: report.add(f"{rel}: unknown file (not part of an oakwatch evidence "
                                                     f"folder)"),
}


def _unlisted_seals(root: Path, listed: dict[str, str]) -> set[str]:
    """Folders (as prefixes) of sealed trials and voids whose sums never reached SHA256SUMS."""
    out = {f"{layout.trial_dir(p.name)}/" for p in (root / layout.TRIALS).glob("*")
           if (p / layout.RESULT).is_file() and f"{layout.trial_dir(p.name)}/{layout.RESULT}" not in listed}
    return out | {f"{p.name}/" for p in root.glob("void-*") if f"{p.name}/void.json" not in listed}


def _check_listed(ctx: Context, present: set[str], report: Report) -> None:
    """Every SHA256SUMS entry names an evidence file on disk with those bytes (big streams and the frame
    store are hashed while the trial checks read them: deferred)."""
    for rel, digest in ctx.sums.items():
        path = ctx.root / rel
        if rel not in present and layout.classify_path(rel) != "evidence":
            report.add(f"{layout.SUMS} lists {rel}, which is not an evidence file")
        elif not path.is_file():
            report.add(f"{rel}: listed in {layout.SUMS} but missing")
        elif rel.endswith(DEFERRED):
            ctx.deferred[rel] = digest
        elif file_sha256(path) != digest and not (ctx.interrupted and rel == layout.RUN_LOG):
            report.add(f"{rel}: content differs from its {layout.SUMS} entry")


def _lock_note(root: Path, rel: str) -> str:
    if rel == layout.LOCK:
        from sessions.evidence.experiment_folder import holder_alive

        alive, who = holder_alive(root)
        if alive:
            return f"{rel}: a run is still writing this folder{who}"
        return f"{rel}: the run that wrote this folder did not finish{who}; `oakwatch recover {root}` finishes it"
    return f"{rel}: left by a run that did not finish; `oakwatch recover {root}` finishes it"


def _check_layer(folder: Path, rel: str, report: Report) -> None:
    """annotations/<annotator>/ and reports/: their own SHA256SUMS over their own files."""
    from sessions.annotations.annotation_layer import check_layer

    annotations = rel.startswith(layout.ANNOTATIONS + "/")
    listed = _layer_sums(folder, rel, annotations, report)
    if listed is None:
        return
    files = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} - {layout.SUMS}
    for name in sorted(files - set(listed)):
        report.add(f"{rel}/{name}: present but not listed in {rel}/{layout.SUMS}")
    for name, digest in listed.items():
        path = folder / name
        if not path.is_file():
            report.add(f"{rel}/{name}: listed in {rel}/{layout.SUMS} but missing")
        elif file_sha256(path) != digest:
            report.add(f"{rel}/{name}: content differs from its {rel}/{layout.SUMS} entry")
    key, original = folder / layout.BLINDING, folder.parent / layout.BLINDING
    if rel == layout.UNBLINDED and key.is_file() and original.is_file() and file_sha256(key) != file_sha256(original):
        report.add(f"{rel}/{layout.BLINDING}: differs from the run's {layout.BLINDING}")
    if annotations:  # the layer's chain, freeze, ids and every label's references into the evidence
        for problem in check_layer(folder.parent.parent, folder.name):
            report.add(problem)


def _layer_sums(folder: Path, rel: str, annotations: bool, report: Report) -> dict[str, str] | None:
    """A layer's own SHA256SUMS (None, reported, when missing or malformed)."""
    from sessions.annotations.annotation_layer import split_sums

    sums = folder / layout.SUMS
    if not sums.is_file():
        report.add(f"{rel}/{layout.SUMS} is missing")
        return None
    try:
        text = sums.read_text(encoding="utf-8")
        # An annotation layer's sums end with `FROZEN <sha256>` once it is frozen.
        return split_sums(text)[0] if annotations else parse_sums(text)
    except (SumsFormatError, UnicodeDecodeError) as exc:
        report.add(f"{rel}/{exc}")
        return None
