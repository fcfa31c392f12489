"""One-line text for run events, shared by the trace pane and the headless printer.

Plain strings only, no Textual: the headless path imports this and must stay Textual-free.
Figures are rendered by engine.figures (unknown reads "unknown", never 0 or $0).
"""

from __future__ import annotations

from engine.figures import money, tokens

usd, count = money, tokens  # the names earlier callers import: the same single rendering


def milestone_line(award: dict) -> str:
    """An award record (engine.loop.records.MilestoneAward as a dict)."""
    return (f"{award['id']} {award['name']} +{award['points']} at decision {award['decision_id']}, "
            f"frame {award['frame_index']} {award['frame_sha256'][:12]}")


def trial_started_line(trial_key: str, index: int, total: int, frame_sha256: str) -> str:
    """`index` of `total`: this trial's place in the whole schedule, across conditions."""
    return f"trial {trial_key} ({index}/{total}) started, first frame {frame_sha256[:12]}"


def spend(telemetry: dict | None) -> str:
    """A trial's cost and tokens from its telemetry; a recovered trial without one has them unknown."""
    t = telemetry or {}
    return f"cost {money(t.get('cost_usd'))}, tokens {tokens(t.get('tokens'))}"


def outcome_words(result: dict, *, detail: bool = True) -> str:
    """How a trial ended, in the words of its end line: "game-failure (budget:accepted_actions)",
    "harness-error (operator-abort: stuck, invalid: operator-abort)". `detail=False` leaves out
    the operator's or the error's own words (the overview's narrow column)."""
    why = result.get("termination_reason")
    if detail and result.get("termination_detail"):
        why = f"{why}: {result['termination_detail']}"
    cause = f", invalid: {result['invalid_cause']}" if result.get("invalid_cause") else ""
    return f"{result.get('outcome')} ({why}{cause})"


def trial_ended_line(result: dict) -> str:
    """A result.json record as a dict."""
    error = f" — {result['error']}" if result.get("error") else ""
    return f"trial {result.get('trial_key')} ended: {outcome_words(result)}, {spend(result.get('telemetry'))}{error}"
