"""One-line text for run events, shared by the trace pane and the headless printer.

Plain strings only, no Textual: the headless path imports this and must stay Textual-free.
"""

from __future__ import annotations


def milestone_line(award: dict) -> str:
    """An award record (engine.records.MilestoneAward as a dict)."""
    return (f"{award['id']} {award['name']} +{award['points']} at decision {award['decision_id']}, "
            f"frame {award['frame_index']} {award['frame_sha256'][:12]}")


def trial_started_line(trial_key: str, index: int, total: int, frame_sha256: str) -> str:
    """`index` of `total`: this trial's place in the whole schedule, across conditions."""
    return f"trial {trial_key} ({index}/{total}) started, first frame {frame_sha256[:12]}"


def trial_ended_line(result: dict) -> str:
    """A result.json record as a dict."""
    why = result.get("termination_reason")
    if result.get("termination_detail"):
        why = f"{why}: {result['termination_detail']}"
    cause = f", invalid: {result['invalid_cause']}" if result.get("invalid_cause") else ""
    error = f" — {result['error']}" if result.get("error") else ""
    return f"trial {result.get('trial_key')} ended: {result.get('outcome')} ({why}{cause}){error}"
