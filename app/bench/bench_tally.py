"""The closing tally of `oakwatch bench`: one line per target (what it is, what this run measured,
the target, met / NOT met / not measured), a count line, and the exit status they give.

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

MET, NOT_MET, NOT_MEASURED = "met", "NOT met", "not measured"


@dataclass(frozen=True)
class Target:
    name: str
    measured: str | None  # None: not measured
    target: str
    met: bool | None  # None: not measured

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
    p = _get(report, "per_action") or {}
    memory = _get(report, "per_action", "memory") or {}
    return [
        _target("per accepted action, wall time", "<= 1.50x raw", p.get("wall_ratio"), "{:.2f}x raw",
                p.get("wall_target_met")),
        _target("per accepted action, CPU time", "<= 1.50x raw", p.get("cpu_ratio"), "{:.2f}x raw",
                p.get("cpu_target_met")),
        _target("memory growth over the random trial", "<= 50 MB", memory.get("growth_mb"), "{:.1f} MB",
                memory.get("target_met")),
    ]


def _process(report: dict) -> list[Target]:
    p = _get(report, "process") or {}
    variants = [name for name, v in p.items() if isinstance(v, dict) and "ratio" in v] or ["as configured"]
    return [_target(f"whole `oakwatch run --headless` ({name})", "<= 1.50x the plain script",
                    _get(p, name, "ratio"), "{:.2f}x the plain script", _get(p, name, "target_met"))
            for name in variants]


def _verify(report: dict) -> list[Target]:
    v = _get(report, "verify") or {}
    problems = _get(v, "big", "problems"), _get(v, "small", "problems")
    count = sum(len(p) for p in problems) if all(isinstance(p, list) for p in problems) else None
    return [
        _target("verify of the big trial, time", "<= 3 s", _get(v, "big", "audit_seconds"), "{:.2f} s",
                v.get("time_target_met")),
        _target("verify memory, big against small trial", "<= +16 MB peak RSS", v.get("rss_growth_mb"),
                "{:+.1f} MB", v.get("flat_target_met")),
        _target("verify finds zero problems", "0 problems", count, "{:.0f} problems", v.get("zero_problems")),
    ]


def _optional(report: dict, asked: set[str]) -> list[Target]:
    out: list[Target] = []
    if "mcp" in report:  # `--mcp-calls N` (on by default): the tool server's per-call overhead (app.bench.bench_mcp)
        t = _get(report, "mcp") or {}
        out.append(_target("MCP press_keys call over the raw press", f"<= {t.get('target_ms', 2.0):g} ms",
                           t.get("overhead_ms"), "{:.3f} ms", t.get("target_met")))
    if "gba" in report:  # `--gba-actions N` (on by default): the open GBA cartridge on mGBA (app.bench.bench_gba)
        g = _get(report, "gba") or {}
        out.append(_target("per accepted action on the GBA cartridge, wall time",
                           f"<= {g.get('target', 1.3):.2f}x raw mGBA + hash", g.get("ratio"), "{:.2f}x raw",
                           g.get("target_met")))
    if "workers" in asked:
        w = _get(report, "workers") or {}
        out.append(_target("2 workers against 1, random trials", f">= {w.get('target', 1.8)}x", w.get("speedup"),
                           "{:.2f}x", w.get("meets_target")))
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
    return [*_dry_run(report), *_per_action(report), *_process(report), *_verify(report),
            *_optional(report, set(asked))]


def tally_lines(found: list[Target], *, failed: bool = False, report_only: bool = False,
                json_path: str | None = None) -> list[str]:
    """The closing tally: a header, one line per target, the count line last."""
    width = max([len("target"), *(len(t.name) for t in found)])
    measured_width = max([len("measured"), *(len(t.measured or "-") for t in found)])
    goal_width = max([len("goal"), *(len(t.target) for t in found)])
    lines = ["", "oakwatch bench: targets",
             f"  {'target':{width}}  {'measured':{measured_width}}  {'goal':{goal_width}}  verdict"]
    lines += [f"  {t.name:{width}}  {t.measured or '-':{measured_width}}  {t.target:{goal_width}}  {t.verdict}"
              for t in found]
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
