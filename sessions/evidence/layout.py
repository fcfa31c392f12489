"""The evidence folder's layout: every name in it, and what may appear where.

    <experiment>/
      manifest.yaml  prompts/  schemas/  conditions/<label>.yaml  scoring/  pricing/<sha256>.yaml
      blinding.json  schedule.json  run.jsonl  summary.json  SHA256SUMS
      trials/<label>-<NN>/    trial.json trace.jsonl responses.jsonl inputs.jsonl memory.jsonl
                              annotations.jsonl frames/frames.pack result.json
                              (provider-failure.json, client-transcript.jsonl: only where they apply)
      void-<n>/               void.json and the voided attempts, <label>-<NN>/ as above
      annotations/<annotator>/  annotations.jsonl SHA256SUMS   (its own sums: a layer beside the evidence)
      reports/                  report files and their own SHA256SUMS
      unblinded/                summary.json blinding.json SHA256SUMS  (`oakwatch unblind`, once labels are frozen)
      roots.jsonl               every root the folder has had (sessions.evidence.roots), beside the parts it records
      .lock .reserve            only while a run holds the folder

`verify` reports anything else as an unknown file, and a leftover temp file as such.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

SUMS = "SHA256SUMS"
MANIFEST = "manifest.yaml"
BLINDING = "blinding.json"
SCHEDULE = "schedule.json"
RUN_LOG = "run.jsonl"
SUMMARY = "summary.json"
LOCK = ".lock"
RESERVE = ".reserve"
TRIALS = "trials"
ANNOTATIONS = "annotations"
REPORTS = "reports"
UNBLINDED = "unblinded"
ROOTS_LOG = "roots.jsonl"  # sessions.evidence.roots: a record of the folder's roots, not a part of them
OPERATOR_ANNOTATOR = "operator"  # live tags made after their trial had ended

# Per trial
TRIAL = "trial.json"
TRACE = "trace.jsonl"
RESPONSES = "responses.jsonl"
INPUTS = "inputs.jsonl"
MEMORY = "memory.jsonl"
TRIAL_ANNOTATIONS = "annotations.jsonl"
FRAMES = "frames/frames.pack"
RESULT = "result.json"
PROVIDER_FAILURE = "provider-failure.json"  # only in a trial the provider ended
CLIENT_TRANSCRIPT = "client-transcript.jsonl"  # only in a policy-cli trial: what its client printed and logged
TRIAL_FILES = (TRIAL, TRACE, RESPONSES, INPUTS, MEMORY, TRIAL_ANNOTATIONS, FRAMES, RESULT, PROVIDER_FAILURE,
               CLIENT_TRANSCRIPT)
STREAMS = (TRACE, RESPONSES, INPUTS, MEMORY, TRIAL_ANNOTATIONS)

# A publishable package (`oakwatch report --package`, sessions.audit.package): the evidence as shipped
PACKAGE_MANIFEST = "manifest.redacted.yaml"
PACKAGE_INFO = "package.json"
EVIDENCE_SUMS = "evidence-SHA256SUMS"
GAME_COPY = "game/definition.yaml"  # the game definition, when the manifest's path was local (redacted)
REDACTED = "<local path redacted>"

TRIAL_KEY = r"[A-Z]-\d{2,}"
_LABEL = r"[A-Z]"
_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
LAYER_NAME = re.compile(_NAME)  # an annotation layer's folder name
_TRIAL_FILE = "(?:" + "|".join(re.escape(f) for f in TRIAL_FILES) + ")"

# Files the experiment's own SHA256SUMS covers.
EVIDENCE_PATTERNS = [re.compile(p) for p in (
    re.escape(MANIFEST), re.escape(BLINDING), re.escape(SCHEDULE), re.escape(RUN_LOG), re.escape(SUMMARY),
    r"prompts/(?:system\.txt|action-schema\.json)",
    r"schemas/[a-z-]+\.schema\.json",
    rf"conditions/{_LABEL}\.yaml",
    r"scoring/(?:milestones|memory-error-rubric)\.yaml",
    r"pricing/[0-9a-f]{64}\.yaml",  # the price schedules conditions name, by their SHA-256
    rf"trials/{TRIAL_KEY}/{_TRIAL_FILE}",
    r"void-\d+/void\.json",
    rf"void-\d+/{TRIAL_KEY}/{_TRIAL_FILE}",
)]
# Layers with their own sums, beside the evidence.
LAYER_PATTERNS = [re.compile(p) for p in (
    rf"{ANNOTATIONS}/{_NAME}/(?:annotations\.jsonl|{SUMS})",
    rf"{REPORTS}/{_NAME}",
    rf"{UNBLINDED}/(?:summary\.json|blinding\.json|{SUMS})",
)]
RUN_ONLY = (LOCK, RESERVE, "control.sock", ".control")  # present only while a run holds the folder


def trial_dir(key: str) -> str:
    return f"{TRIALS}/{key}"


def void_dir(n: int) -> str:
    return f"void-{n}"


def classify_path(rel: str) -> str:
    """'evidence', 'layer', 'sums', 'roots', 'run-only', 'temp' or 'unknown' for a path relative to the folder."""
    if rel == SUMS:
        return "sums"
    if rel == ROOTS_LOG:
        return "roots"
    if rel in RUN_ONLY:
        return "run-only"
    if PurePosixPath(rel).name.endswith(".tmp"):
        return "temp"
    if any(p.fullmatch(rel) for p in EVIDENCE_PATTERNS):
        return "evidence"
    if any(p.fullmatch(rel) for p in LAYER_PATTERNS):
        return "layer"
    return "unknown"
