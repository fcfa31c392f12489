"""Issue 31 item 8 at the issue's own scale: `oakwatch report`'s peak RSS from 10,000 to N decisions
(`oakwatch bench --report-decisions N`, e.g. 1,000,000; 0, the default, skips it).

The verify phase's random walk cannot go that far: seed 1 finishes the game at decision 177,647. This
phase plays the same walk with only the four directions allowed: without A no dialogue opens, so the
game cannot be won and the trial runs to its budget. Each trial is reported (no replay) in a fresh
process by the verify phase's own child (`bench.py:_report_child`); the target is the verify phase's,
peak RSS growth within VERIFY_FLAT_MB. A million decisions take about 12 minutes to generate on the
2-core development machine and 2.1 GB of disk, which is why the phase is asked for, not run by default.
"""

from __future__ import annotations

from pathlib import Path

import yaml

SMALL_DECISIONS = 10_000  # the "from 10k"
WALK_ACTIONS = ["UP", "DOWN", "LEFT", "RIGHT"]  # no A: the walk cannot talk its way to the end


def decisions_problem(decisions: int) -> str | None:
    """Why `--report-decisions N` cannot be measured (0 skips it), or None."""
    if decisions and decisions <= SMALL_DECISIONS:
        return (f"--report-decisions {decisions}: needs more than {SMALL_DECISIONS:,} (it is measured against a "
                f"{SMALL_DECISIONS:,}-decision walk), or 0 to skip")
    return None


def walk_manifest(tmp: Path, name: str, decisions: int) -> Path:
    """The verify phase's random condition, allowed only the four directions."""
    from app.bench.bench import _random_manifest

    path = _random_manifest(tmp, name, decisions)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["agent"]["allowed_actions"] = WALK_ACTIONS
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def report_scale_figures(decisions: int, tmp: Path, small: int = SMALL_DECISIONS) -> dict:
    """Peak RSS of the report on a `small`-decision walk and a `decisions`-decision one, and the verdict."""
    from app.bench.bench import VERIFY_FLAT_MB, _generate, _report_child

    print(f"report at scale: generating {small:,}- and {decisions:,}-decision walks (directions only) …", flush=True)
    folders = {n: _generate(tmp, f"walk-{n}", n, walk_manifest(tmp, f"walk-{n}", n)) for n in (small, decisions)}
    peaks = {n: _report_child(folder, tmp / f"walk-report-{n}")["peak_rss_mb"] for n, folder in folders.items()}
    growth = peaks[decisions] - peaks[small]
    met = growth <= VERIFY_FLAT_MB
    print(f"target report memory flat from {small:,} to {decisions:,} decisions (peak RSS growth <= "
          f"{VERIFY_FLAT_MB:.0f} MB): measured {peaks[small]:.1f} MB -> {peaks[decisions]:.1f} MB, {growth:+.1f} MB "
          f"-> {'met' if met else 'NOT met'}", flush=True)
    return {"decisions": decisions, "small_decisions": small, "small_peak_rss_mb": peaks[small],
            "peak_rss_mb": peaks[decisions], "rss_growth_mb": growth, "flat_target_met": met}
