"""One-line text for run events, shared by the trace pane and the headless printer.

Plain strings only, no Textual: the headless path imports this and must stay Textual-free.
Unknown figures (None) read "unknown", never 0 or $0.
"""

from __future__ import annotations


def usd(value: float | None) -> str:
    """A cost: "$0.0123"; a known cost under a hundredth of a cent keeps its digits ("$0.000042")."""
    if value is None:
        return "unknown"
    if 0 < abs(value) < 0.0001:
        return f"${value:.6f}"
    return f"${value:.4f}"


def count(value: int | float | None) -> str:
    """A token count with thousands separators, or "unknown"."""
    return "unknown" if value is None else f"{int(value):,}"


def milestone_line(award: dict) -> str:
    """An award record (engine.records.MilestoneAward as a dict)."""
    return (f"{award['id']} {award['name']} +{award['points']} at decision {award['decision_id']}, "
            f"frame {award['frame_index']} {award['frame_sha256'][:12]}")


def trial_started_line(trial_key: str, index: int, total: int, frame_sha256: str) -> str:
    """`index` of `total`: this trial's place in the whole schedule, across conditions."""
    return f"trial {trial_key} ({index}/{total}) started, first frame {frame_sha256[:12]}"


def spend(telemetry: dict | None) -> str:
    """A trial's cost and tokens from its telemetry; a recovered trial without one has them unknown."""
    t = telemetry or {}
    return f"cost {usd(t.get('cost_usd'))}, tokens {count(t.get('tokens'))}"


def trial_ended_line(result: dict) -> str:
    """A result.json record as a dict."""
    why = result.get("termination_reason")
    if result.get("termination_detail"):
        why = f"{why}: {result['termination_detail']}"
    cause = f", invalid: {result['invalid_cause']}" if result.get("invalid_cause") else ""
    error = f" — {result['error']}" if result.get("error") else ""
    return (f"trial {result.get('trial_key')} ended: {result.get('outcome')} ({why}{cause}), "
            f"{spend(result.get('telemetry'))}{error}")
