"""verify: a decision's response line against its trace line (attempts, latencies, the reply cap)."""

from __future__ import annotations

from engine.loop.records import Attempt, ResponseLine, TraceLine
from engine.loop.trial import decision_latency
from sessions.audit.verify_context import Report


def _plain_response(r: ResponseLine, t: TraceLine, n: int) -> bool:
    """The common case, in which `_check_response` finds nothing: one valid answer, no latency measured
    (a policy that is not a model). Checked here so the hot loop builds no string for it."""
    attempts = r.attempts
    if r.decision_id != n or len(attempts) != 1 or t.attempts != 1:
        return False
    a = attempts[0]
    return (a.valid and a.latency_ms is None and a.usage is None and not t.paid_calls
            and not t.invalid_output and not t.aborted and t.latency_ms is None and t.latency_total_ms is None)


def _check_response(r: ResponseLine, t: TraceLine, n: int, where: str, report: Report,
                    cap: int | None = None) -> None:
    """`cap`: the manifest's agent.max_reply_bytes when the line is longer than it (a shorter line
    cannot hold a reply over it)."""
    attempts = r.attempts
    _check_latency(attempts, t, where, report)
    if (r.decision_id == n and len(attempts) == t.attempts == 1 and not t.invalid_output and not t.aborted
            and attempts[0].valid and t.paid_calls == (attempts[0].usage is not None) and cap is None):
        return  # the common case: one valid answer
    for i, a in enumerate(attempts, 1):
        problems = _oversize_problems(a, cap) if a.oversize is not None else _stored_problems(a, cap)
        for problem in problems:
            report.add(f"{where}: attempt {i}: {problem}")
    if r.decision_id != n:
        report.add(f"{where}: decision_id {r.decision_id}, expected {n}")
    if len(r.attempts) != t.attempts:
        report.add(f"{where}: holds {len(r.attempts)} attempts, the trace says {t.attempts}")
    for problem, disagrees in _ATTEMPT_FIGURES:
        if disagrees(r.attempts, t):
            report.add(f"{where}: {problem}")


# The trace's figures that follow from the attempts: (the problem, when it disagrees), in report order.
_ATTEMPT_FIGURES = (
    ("invalid_output in the trace disagrees with the attempts",
     lambda attempts, t: t.invalid_output != any(not a.valid for a in attempts)),
    ("aborted in the trace disagrees with the attempts",
     lambda attempts, t: t.aborted != bool(attempts and attempts[-1].aborted)),
    ("paid_calls in the trace disagrees with the attempts",
     lambda attempts, t: t.paid_calls != sum(a.usage is not None for a in attempts)),
    ("actions were parsed, but no attempt was valid",
     lambda attempts, t: bool(t.parsed_actions) and not (attempts and attempts[-1].valid)),
)


def _check_latency(attempts: list[Attempt], t: TraceLine, where: str, report: Report) -> None:
    """The trace's latencies are the attempts': latency_ms the accepted one's, latency_total_ms
    their sum (a line from before latency_total_ms held the sum in latency_ms)."""
    want = decision_latency(attempts)
    if "latency_total_ms" not in t.model_fields_set:
        if t.latency_ms != want["latency_total_ms"]:
            report.add(f"{where}: latency_ms {t.latency_ms} in the trace, the attempts sum to "
                       f"{want['latency_total_ms']}")
        return
    for name, value in want.items():
        if getattr(t, name) != value:
            report.add(f"{where}: {name} {getattr(t, name)} in the trace, the attempts give {value}")


def _stored_problems(a: Attempt, cap: int | None) -> list[str]:
    """A stored reply, or the response taken from it, longer than the reply cap allows."""
    if cap is None:
        return []
    import pydantic_core

    return [f"stores {what} of {size:,} bytes, over the manifest's agent.max_reply_bytes ({cap:,})"
            for what, value in (("a reply", a.reply), ("a response", a.raw)) if value is not None
            and (size := len(pydantic_core.to_json(value))) > cap]


def _oversize_problems(a: Attempt, cap: int | None) -> list[str]:
    """An oversized reply's record, checked against itself and the manifest (its bytes are not
    kept: the digest cannot be checked)."""
    o = a.oversize
    out = []
    if a.valid or a.raw is not None or a.reply is not None or a.failure is not None:
        out.append("an oversized reply must be an invalid output that keeps no text, no reply body and no failure")
    if cap is not None and o.cap_bytes != cap:
        out.append(f"an oversized reply judged by a cap of {o.cap_bytes:,} bytes, not the manifest's {cap:,}")
    if not _sizes_hold(o):
        out.append(f"an oversized reply's sizes do not hold together (received {o.received_bytes}, size "
                   f"{o.size_bytes}, source {o.size_source}, cap {o.cap_bytes})")
    if o.size_source != "stored" and _read_figures(a):  # a body cut at the cap was never parsed: nothing is known
        out.append("an oversized reply that was never read records a model, a response id, a stop reason or usage")
    return out


def _sizes_hold(o) -> bool:
    """The sizes fit how the size is known (engine.loop.records.ReplyOversize)."""
    received, size, limit = o.received_bytes, o.size_bytes, o.cap_bytes
    consistent = {
        "received": size == received and received > limit,
        "content-length": size is not None and size > received > limit,
        "stored": size is not None and received <= limit < size,
        None: size is None and received > limit,
    }[o.size_source]
    return consistent and received >= 0


def _read_figures(a: Attempt) -> bool:
    """Anything only a reply that was read can give."""
    if a.model_id is not None or a.response_id is not None or a.stop_reason is not None:
        return True
    return a.usage is not None and any(v is not None for v in a.usage.model_dump().values())
