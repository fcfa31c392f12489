"""The closing tally of `oakwatch bench`: one line per target (what it is, what this run measured,
the target, met / NOT met / not measured), a count line, and the exit status they give.

Issue 31's speed table comes first, every row always listed (a row whose phase was skipped or not
asked for shows "not measured"), each with the issue's definition on the line below it and the
issue's target: (1) per accepted action, CPU, steady state (app.bench.bench_steady), (2) the whole
`oakwatch run --headless` with bytecode cached against the plain script, (3) verify's decisions per
second and its memory, big trial against small, (4) 2 workers against 1 as a share of the raw PyBoy
pair's speed-up (app.bench.bench_pair; `--workers-phase`), (5) an MCP press_keys call beyond the
SDK's bare ping plus the raw press (app.bench.bench_mcp), and item 8's `oakwatch report` memory.
The header says the machine's load over the run (app.bench.bench_load).

The figures come from the bench's report (the dict `--json FILE` writes), so the tally and the
exit rule can be checked on synthetic figures without running a bench. The default phases' targets
are always listed (a phase skipped by its option, or one that broke, shows "not measured"); an
optional phase's (`--workers-phase`, `--parallel-models`, `--console`) only when it was asked for.

Exit status: 1 when a target was not met, or when the bench failed (a phase broke, or verify found
problems in the bench's own fresh trials: that is a defect, not a missed speed); 0 otherwise. With
`report_only`, a missed target does not change the exit status; a failed bench still exits 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.bench.bench_load import load_line

MET, NOT_MET, NOT_MEASURED = "met", "NOT met", "not measured"


@dataclass(frozen=True)
class Target:
    name: str
    measured: str | None  # None: not measured
    target: str
    met: bool | None  # None: not measured
    definition: str | None = None  # issue 31's rows: what exactly is measured

    @property
    def verdict(self) -> str:
        return NOT_MEASURED if self.met is None else MET if self.met else NOT_MET


def _get(report: dict, *path: str) -> Any:
    node: Any = report
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _target(name: str, target: str, value: Any, fmt: str, met: Any) -> Target:
    """A target whose figure is `value` (None or not a number: not measured), shown with `fmt`."""
    number = _num(value)
    if number is None or not isinstance(met, bool):
        return Target(name, None, target, None)
    return Target(name, fmt.format(number), target, met)


def _row(name: str, definition: str, target: str, measured: str | None, met: Any) -> Target:
    """One of issue 31's rows (measured None, or met not a bool: not measured)."""
    if measured is None or not isinstance(met, bool):
        return Target(name, None, target, None, definition)
    return Target(name, measured, target, met, definition)


def _steady_row(report: dict) -> Target:
    s = _get(report, "steady") or {}
    sizes = s.get("sizes") or [20_000, 10_000]
    ratio, ours, raw = _num(s.get("cpu_ratio")), _num(s.get("oakwatch_cpu_us_per_action")), \
        _num(s.get("raw_cpu_us_per_action"))
    measured = None if ratio is None else f"{ratio:.2f}x ({ours:.0f} / {raw:.0f} µs)" if ours and raw else \
        f"{ratio:.2f}x"
    return _row("1. per accepted action, CPU, steady state",
                f"a {sizes[0]:,}-action random trial minus a {sizes[1]:,}-action one (issue: 20k minus 10k), every "
                "helper process counted, against raw PyBoy + frame hash on the same inputs, measured the same way",
                "<= 1.15x", measured, s.get("target_met"))


def _process_row(report: dict) -> Target:
    p = _get(report, "process") or {}
    variant = "bytecode cached" if isinstance(p.get("bytecode cached"), dict) else "as configured"
    ratio = _num(_get(p, variant, "ratio"))
    how = ("bytecode cached in a private PYTHONPYCACHEPREFIX" if variant == "bytecode cached" else
           "as configured (this environment lets Python cache bytecode)")
    return _row("2. whole `oakwatch run --headless`, bytecode cached",
                f"process wall time, spawn to exit, {how}, against a plain PyBoy script on the same inputs "
                "(SDL2 hidden in both, SHA-256 per frame)", "<= 1.20x",
                None if ratio is None else f"{ratio:.2f}x the plain script", _get(p, variant, "target_met"))


def _verify_rows(report: dict) -> list[Target]:
    v = _get(report, "verify") or {}
    n, small = _num(v.get("decisions")), _num(v.get("small_decisions"))
    rate, growth = _num(v.get("decisions_per_second")), _num(v.get("rss_growth_mb"))
    sizes = f"{n:,.0f}-decision" if n else "100k-decision"
    return [
        _row("3. verify, decisions per second", f"`verify` (not deep) of the {sizes} random trial (issue: 100k), "
             "imports excluded, in a fresh process", ">= 100,000/s",
             None if rate is None else f"{rate:,.0f}/s", v.get("time_target_met")),
        _row("3. verify, memory flat", f"peak RSS of that verify against the {small or 10_000:,.0f}-decision "
             "trial's", "<= +16 MB", None if growth is None else f"{growth:+.1f} MB", v.get("flat_target_met")),
    ]


def _workers_row(report: dict) -> Target:
    w = _get(report, "workers") or {}
    value, ours, raw = _num(w.get("share_of_raw_pair")), _num(w.get("speedup")), _num(_get(w, "raw_pair", "speedup"))
    measured = None if value is None else f"{value:.0%} ({ours:.2f}x beside {raw:.2f}x)"
    with_startup = _num(w.get("share_with_startup"))
    if measured is not None and with_startup is not None:
        measured += f"; {with_startup:.0%} with the workers' start-up"
    return _row("4. 2 workers against 1, share of the raw pair's",
                "oakwatch's 2-worker speed-up over 1 worker (random trials) divided by raw PyBoy + frame hash's "
                "on the same work, 1 process then 2 at once, in the same run (--workers-phase); process "
                "start-up left out on both sides (the raw pair's before its go file, oakwatch's worker pool "
                "before its clock)", ">= 95%",
                measured, w.get("meets_target"))


def _mcp_row(report: dict) -> Target:
    t = _get(report, "mcp") or {}
    beyond = _num(t.get("beyond_ms"))
    return _row("5. MCP press_keys beyond ping + raw press",
                "median press_keys call - median SDK bare ping - median raw press (stdio, one call after another)",
                "<= 0.15 ms", None if beyond is None else f"{beyond:.3f} ms", t.get("target_met"))


def _report_parts(report: dict) -> list[tuple[str, Any]]:
    """Row 8's measured parts, each (text, met): the big trial against the small one (no replay), the
    rows with the replay, and `--report-decisions N`'s walk against 10,000 (app.bench.bench_report)."""
    parts: list[tuple[str, Any]] = []
    r = _get(report, "verify", "report") or {}
    growth = _num(r.get("rss_growth_mb"))
    if growth is not None:
        parts.append((f"{growth:+.1f} MB", r.get("flat_target_met")))
        replay = r.get("replay") if isinstance(r.get("replay"), dict) else {}
        replay_growth = _num(replay.get("rss_growth_mb"))
        if replay_growth is not None:  # both must be flat (bench.py:_replay_memory)
            parts.append((f"with replay {replay_growth:+.1f} MB (rows, <= +{replay.get('allowed_mb', 0):.1f} MB)",
                          replay.get("flat_target_met")))
    scale = _get(report, "report_scale") or {}
    scale_growth = _num(scale.get("rss_growth_mb"))
    if scale_growth is not None:
        parts.append((f"{scale.get('small_decisions', 0):,} -> {scale.get('decisions', 0):,} decisions "
                      f"{scale_growth:+.1f} MB", scale.get("flat_target_met")))
    return parts


def _report_row(report: dict) -> Target:
    parts = _report_parts(report)
    measured = "; ".join(text for text, _ in parts) or None
    met = all(ok is True for _, ok in parts) if all(isinstance(ok, bool) for _, ok in parts) else None
    return _row("8. `oakwatch report` memory flat",
                "peak RSS of `oakwatch report` (no replay), the verify phase's big trial against its small one; "
                "with the replay, its rows on the small trial against a tenth of it, at the same slope; with "
                "--report-decisions N, a directions-only walk of N decisions against 10,000 "
                "(issue: flat from 10k to 1M decisions)", "<= +16 MB", measured, met)


def issue_rows(report: dict) -> list[Target]:
    """Issue 31's speed table (items 5 and 8), every row always listed, in the issue's order."""
    return [_steady_row(report), _process_row(report), *_verify_rows(report), _workers_row(report),
            _mcp_row(report), _report_row(report)]


def _dry_run(report: dict) -> list[Target]:
    d = _get(report, "dry_run") or {}
    fast = d.get("regime") == "fast"
    bound = _num(d.get("c_target_seconds"))
    c_goal = f"<= (b){' / 1.5' if fast else ''}" + (f" = {bound:.3f} s" if bound is not None else "")
    return [
        _target("(c) headless dry-run against the naive floor (b)", c_goal,
                _get(d, "median_seconds", "c"), "{:.3f} s", d.get("c_target_met")),
        _target("(d) replay against raw PyBoy + frame hash (a+)", ">= 0.90x (a+)",
                d.get("d_vs_a_plus"), "{:.2f}x (a+)", d.get("d_target_met")),
    ]


def _per_action(report: dict) -> list[Target]:
    memory = _get(report, "per_action", "memory") or {}
    return [
        _target("memory growth over the random trial", "<= 50 MB", memory.get("growth_mb"), "{:.1f} MB",
                memory.get("target_met")),
    ]


def _verify(report: dict) -> list[Target]:
    v = _get(report, "verify") or {}
    problems = _get(v, "big", "problems"), _get(v, "small", "problems")
    count = sum(len(p) for p in problems) if all(isinstance(p, list) for p in problems) else None
    return [_target("verify finds zero problems", "0 problems", count, "{:.0f} problems", v.get("zero_problems"))]


def _optional(report: dict, asked: set[str]) -> list[Target]:
    out: list[Target] = []
    if "gba" in report:  # `--gba-actions N` (on by default): the open GBA cartridge on mGBA (app.bench.bench_gba)
        g = _get(report, "gba") or {}
        out.append(_target("per accepted action on the GBA cartridge, wall time",
                           f"<= {g.get('target', 1.3):.2f}x raw mGBA + hash", g.get("ratio"), "{:.2f}x raw",
                           g.get("target_met")))
    if "parallel_models" in asked:
        m = _get(report, "parallel_models") or {}
        out.append(_target("16 model trials, 8 workers against serial", "<= 0.167 of serial", m.get("ratio"),
                           "{:.3f} of serial", m.get("meets_target")))
        a = _get(report, "attach") or {}
        broken = "error" in a
        out.append(_target("attached console, frame pane", ">= 15 fps", None if broken else a.get("painted_fps"),
                           "{:.1f} fps", a.get("fps_target_met")))
        out.append(_target("attached console, key latency (worst)", "< 100 ms",
                           None if broken else a.get("key_latency_ms_max"), "{:.0f} ms", a.get("latency_target_met")))
    if "console" in asked:
        c = _get(report, "console") or {}
        out.append(_target("console against headless, dry-run wall time", "<= 1.25x",
                           c.get("console_vs_headless_ratio"), "{:.2f}x", c.get("ratio_target_met (<= 1.25)")))
        out.append(_target("console frame pane", ">= 15 fps", c.get("frame_pane_fps_painted"), "{:.1f} fps",
                           c.get("fps_target_met (>= 15)")))
        out.append(_target("console key latency (worst)", "< 100 ms", c.get("key_latency_ms_max"), "{:.0f} ms",
                           c.get("latency_target_met (< 100 ms)")))
    return out


def targets(report: dict, asked: set[str] | frozenset[str] = frozenset()) -> list[Target]:
    """Every target of the phases run (and of the optional phases in `asked`: workers,
    parallel_models, console), in the order the bench runs them."""
    return [*issue_rows(report), *_dry_run(report), *_per_action(report), *_verify(report),
            *_optional(report, set(asked))]


def _table(found: list[Target]) -> list[str]:
    """The column header and one line per target; an issue row's definition on the line below it."""
    width = max([len("target"), *(len(t.name) for t in found)])
    measured_width = max([len("measured"), *(len(t.measured or "-") for t in found)])
    goal_width = max([len("goal"), *(len(t.target) for t in found)])
    lines = [f"  {'target':{width}}  {'measured':{measured_width}}  {'goal':{goal_width}}  verdict"]
    for t in found:
        lines.append(f"  {t.name:{width}}  {t.measured or '-':{measured_width}}  {t.target:{goal_width}}  {t.verdict}")
        if t.definition:
            lines.append(f"      = {t.definition}")
    return lines


def tally_lines(found: list[Target], *, failed: bool = False, report_only: bool = False,
                json_path: str | None = None, load: dict | None = None) -> list[str]:
    """The closing tally: a header with the machine's load, one line per target (issue 31's rows
    with their definition below), the count line last."""
    lines = ["", "oakwatch bench: targets", f"  {load_line(load)}", *_table(found)]
    counts = {v: sum(t.verdict == v for t in found) for v in (MET, NOT_MET, NOT_MEASURED)}
    status = exit_status(found, failed=failed, report_only=report_only)
    why = ("the bench FAILED (see above)" if failed else
           "--report-only" if report_only and counts[NOT_MET] else
           "a target was not met" if counts[NOT_MET] else "every measured target met")
    lines.append(f"oakwatch bench: {counts[MET]} met, {counts[NOT_MET]} NOT met, {counts[NOT_MEASURED]} not measured "
                 f"(of {len(found)} targets){'; figures in ' + json_path if json_path else ''}; "
                 f"exit status {status} ({why})")
    return lines


def exit_status(found: list[Target], *, failed: bool = False, report_only: bool = False) -> int:
    if failed:
        return 1
    if report_only:
        return 0
    return 1 if any(t.met is False for t in found) else 0
