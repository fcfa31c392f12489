"""One-line text for run events, shared by the trace pane and the headless printer.

Plain strings only, no Textual: the headless path imports this and must stay Textual-free.
"""

from __future__ import annotations


def milestone_line(award: dict) -> str:
    """An award record (engine.ladder.Award.as_record())."""
    return (f"{award['id']} {award['name']} +{award['points']} at decision {award['decision_id']}, "
            f"frame {award['frame_index']} {award['frame_sha256'][:12]}")


def trial_started_line(trial_key: str, number: int, total: int, frame_sha256: str) -> str:
    return f"trial {trial_key} ({number}/{total}) started, first frame {frame_sha256[:12]}"


def trial_ended_line(result: dict) -> str:
    """A result.json record."""
    error = f" — {result['error']}" if result.get("error") else ""
    return f"trial {result.get('trial_key')} ended: {result.get('outcome')} ({result.get('termination_reason')}){error}"
