"""verify: a sealed trial's result.json against its genesis, its trace's tally and the game."""

from __future__ import annotations

from dataclasses import dataclass

from engine.games.ladder import FINAL, FINAL_SKIPPED, deciding, deepest, final_ending, skipped_required
from engine.loop.outcomes import ENDINGS, VALID_OUTCOMES, ending
from engine.loop.records import TraceLine, TrialGenesis, TrialResult
from engine.loop.tally import TraceTally
from sessions.audit.verify_context import Context, Report, _trial_game
from sessions.evidence import layout


@dataclass(frozen=True, slots=True)
class _ResultCase:
    """What a trial's result.json is checked against: its genesis, its trace's tally and last decision."""

    r: TrialResult
    g: TrialGenesis
    genesis_sha: str
    head: str
    tally: TraceTally
    last: TraceLine | None
    where: str
    ctx: Context
    report: Report


def _check_result_seal(c: _ResultCase) -> None:
    """The chain it was sealed with, and the trial it names."""
    r, g, where, add, chain = c.r, c.g, c.where, c.report.add, c.r.chain
    if chain.genesis_sha256 != c.genesis_sha:
        add(f"{where}: chain.genesis_sha256 is not the hash of {layout.TRIAL}")
    if chain.trace_head != c.head or chain.trace_lines != c.tally.decisions:
        add(f"{where}: sealed {chain.trace_lines} decisions ending {chain.trace_head[:12]}…, but the trace has "
            f"{c.tally.decisions} ending {c.head[:12]}… (the trace was cut or changed)")
    if r.last_decision != c.tally.decisions:
        add(f"{where}: last_decision {r.last_decision}, the trace has {c.tally.decisions}")
    for name in ("trial_key", "position", "attempt", "experiment_id"):
        if getattr(r, name) != getattr(g, name):
            add(f"{where}: {name} differs from {layout.TRIAL}")
    if (r.condition, r.trial) != (g.condition, g.trial):
        add(f"{where}: condition or trial number differs from {layout.TRIAL}")


def _check_result_ending(c: _ResultCase) -> None:
    """The outcome follows from the termination reason, which the last decision recorded."""
    r, where, add = c.r, c.where, c.report.add
    if r.termination_reason not in ENDINGS:
        add(f"{where}: unknown termination_reason {r.termination_reason!r}")
        return
    e = ending(r.termination_reason)
    if r.outcome != e.outcome:
        add(f"{where}: outcome {r.outcome} does not follow from termination_reason "
            f"{r.termination_reason} ({e.outcome})")
    if (r.outcome in VALID_OUTCOMES) != (r.invalid_cause is None):
        add(f"{where}: invalid_cause {r.invalid_cause!r} does not fit outcome {r.outcome}")
    recorded = c.last.termination_reason if c.last else None
    # A trial whose evidence failed after its last decision ended it keeps that reason as detail.
    if recorded is not None and recorded != r.termination_reason and not (
            r.termination_reason in ("evidence-failure", "process-died") and r.termination_detail == recorded):
        add(f"{where}: termination_reason {r.termination_reason}, but the last decision recorded "
            f"{recorded}")
    if e.at_decision and recorded != r.termination_reason:
        add(f"{where}: {r.termination_reason} must be recorded by the decision that ended the trial, "
            f"and the last decision records {recorded}")


def _check_result_budgets(c: _ResultCase) -> None:
    """A budget ending spent its budget; the final rung or the goal as the game defines them."""
    r, where, add, tally, m = c.r, c.where, c.report.add, c.tally, c.ctx.manifest
    if r.termination_reason not in ENDINGS:
        return
    if m is not None and r.termination_reason == "budget:accepted_actions" \
            and tally.accepted_actions != m.budgets.accepted_actions:
        add(f"{where}: ended on the action budget after {tally.accepted_actions} actions, the budget is "
            f"{m.budgets.accepted_actions}")
    if m is not None and r.termination_reason == "budget:model_decisions" \
            and (m.budgets.model_decisions is None or tally.model_calls < m.budgets.model_decisions):
        add(f"{where}: ended on the decision budget after {tally.model_calls} calls")
    goal_id = m.game.goal if m is not None else None
    if c.ctx.game is not None and goal_id is None:
        _check_final(r, tally, where, c.ctx.game, c.report)
    if m is not None:
        _check_goal(r, tally, where, goal_id, c.ctx.game, c.report)


def _check_result_telemetry(c: _ResultCase) -> None:
    """Every telemetry figure is the one the trace gives."""
    t = c.r.telemetry
    if t is None:
        return
    from engine.loop.tally import LOOP_ONLY

    recomputed = c.tally.telemetry().model_dump(exclude=set(LOOP_ONLY))
    for name, actual in recomputed.items():
        if getattr(t, name) != actual:
            c.report.add(f"{c.where}: telemetry.{name} is {getattr(t, name)}, the trace gives {actual}")


def _check_result_milestones(c: _ResultCase) -> None:
    """The milestones reached, their awards and stamps, and the points they are worth."""
    r, where, add, tally, game = c.r, c.where, c.report.add, c.tally, c.ctx.game
    if r.milestones_reached != tally.milestones_reached:
        add(f"{where}: milestones_reached {r.milestones_reached}, the trace reached "
            f"{tally.milestones_reached}")
    # A recovered trial lists no awards (their probe samples died with the process).
    if [m.id for m in r.milestones] != r.milestones_reached and not (r.recovered and not r.milestones):
        add(f"{where}: the milestone awards do not match milestones_reached")
    for m in r.milestones:
        if not 1 <= m.decision_id <= tally.decisions:
            add(f"{where}: {m.id} awarded at decision {m.decision_id}, which was never recorded")
    _check_active_stamps(r, where, c.report)
    if game is not None:
        points = sum(m.points for m in game.milestones if m.id in r.milestones_reached)
    else:
        points = sum(m.points for m in r.milestones)
    if points != r.progress_points:
        add(f"{where}: progress_points {r.progress_points}, the milestones reached are worth {points}")


def _check_result_game_figures(c: _ResultCase) -> None:
    """The ladder and path figures, against the game the trial played."""
    game = c.ctx.game
    if game is not None:
        _check_ladder_figures(c.r, c.where, game, c.report)
        _check_path_figures(c.r, c.tally, c.where, _trial_game(c.ctx, c.r.trial), c.g.rom_sha256, c.report)


# A sealed result's checks, in the order their problems are reported.
RESULT_CHECKS = (_check_result_seal, _check_result_ending, _check_result_budgets, _check_result_telemetry,
                 _check_result_milestones, _check_result_game_figures)


def _check_result(r: TrialResult, g: TrialGenesis, genesis_sha: str, head: str, tally: TraceTally,
                  last: TraceLine | None, rel: str, ctx: Context, report: Report) -> None:
    where = f"{rel}/{layout.RESULT}"
    if r.chain is None:
        report.add(f"{where}: no chain (not sealed by the recorder)")
        return
    case = _ResultCase(r, g, genesis_sha, head, tally, last, where, ctx, report)
    for check in RESULT_CHECKS:
        check(case)


def _check_active_stamps(r: TrialResult, where: str, report: Report) -> None:
    """The awards' active-time stamps (docs/metrics.md, "Active time") run forward in the order the rungs
    were reached and end within the trial's active total, which is its wall time less its policy time.
    A result from before the stamps has none of them and is not checked; one with some is checked whole."""
    stamped = [m for m in r.milestones if m.active_seconds is not None]
    t = r.telemetry
    total = t.active_seconds if t is not None else None
    if not stamped and total is None:
        return
    _check_stamps_forward(r, stamped, where, report)
    if total is None:
        report.add(f"{where}: the awards carry active-time stamps but telemetry.active_seconds is null")
        return
    late = [m.id for m in stamped if m.active_seconds > total]
    if late:
        report.add(f"{where}: {', '.join(late)} stamped after the trial's active time ({total} s)")
    if t.wall_time_seconds is not None and t.policy_seconds is not None \
            and abs(t.wall_time_seconds - t.policy_seconds - total) > 0.002:  # each figure rounded to 1 ms
        report.add(f"{where}: telemetry.active_seconds {total} is not wall_time_seconds {t.wall_time_seconds} "
                   f"less policy_seconds {t.policy_seconds}")


def _check_stamps_forward(r: TrialResult, stamped: list, where: str, report: Report) -> None:
    """Every award is stamped, none negative, and the stamps run forward in the order the rungs were reached."""
    for m in r.milestones:
        if m.active_seconds is None:
            report.add(f"{where}: {m.id} has no active_seconds stamp, though the trial records active time")
        elif m.active_seconds < 0:
            report.add(f"{where}: {m.id} active_seconds {m.active_seconds} is negative")
    previous = None
    for m in sorted(stamped, key=lambda m: (m.decision_id, m.frame_index)):
        if previous is not None and m.active_seconds < previous.active_seconds:
            report.add(f"{where}: {m.id} reached after {previous.id} at active_seconds {m.active_seconds}, earlier "
                       f"than {previous.id}'s {previous.active_seconds}")
        previous = m


def _check_path_figures(r: TrialResult, tally: TraceTally, where: str, game, rom_sha256: str,
                        report: Report) -> None:
    """Path efficiency from the game's optimal presses and the input that reached the deepest rung.
    (A result written before path efficiency existed has none of its keys and is not checked.)"""
    from engine.loop.trial import PATH_KEYS, path_figures

    if not any(k in r.derived for k in PATH_KEYS):
        return
    award = next((m for m in r.milestones if m.id == r.deepest_milestone), None)
    used = tally.award_actions.get((award.frame_index, award.frame_sha256)) if award else None
    expected = path_figures(game, r.deepest_milestone if award else None, used, rom_sha256) if not r.recovered \
        else path_figures(None, None, None)
    for key, value in expected.items():
        if r.derived.get(key) != value:
            report.add(f"{where}: derived.{key} is {r.derived.get(key)}, the trace and the game definition give "
                       f"{value}")


def _check_goal(r: TrialResult, tally: TraceTally, where: str, goal_id: str | None, game, report: Report) -> None:
    """The run's goal (manifest game.goal, engine.games.goals) against the result: recorded for every trial that
    played, met exactly when the trial ended goal-met, its evidence meeting the goal's predicate, on a frame
    the inputs captured in the trial's last decision. Without a goal, neither a goal nor goal-met."""
    from engine.games.goals import GOAL_MET, recheck

    reason, goal = r.termination_reason, r.goal
    if goal_id is None:
        _check_no_goal(r, where, report)
        return
    if reason in (FINAL, FINAL_SKIPPED):
        report.add(f"{where}: {reason}, but the run's goal {goal_id} decides success, not the ladder")
    if goal is None:
        if r.outcome in VALID_OUTCOMES and tally.decisions:
            report.add(f"{where}: the run's goal is {goal_id}, but the result records no goal")
        return
    if goal.id != goal_id:
        report.add(f"{where}: the result's goal is {goal.id}, the manifest's {goal_id}")
    if goal.met != (reason == GOAL_MET):
        report.add(f"{where}: goal {goal.id} " + ("met, but the trial ended " + reason if goal.met else
                                                  "not met, yet the trial ended goal-met"))
    if game is None or goal_id not in game.goals:
        if game is not None:
            report.add(f"{where}: the game definition defines no goal {goal_id}")
        return
    for problem in recheck(game.goals[goal_id], game, goal):
        report.add(f"{where}: goal {goal.id}: {problem}")
    if goal.met:
        _check_goal_met(goal, tally, where, report)


def _check_goal_met(goal, tally: TraceTally, where: str, report: Report) -> None:
    """A goal met ends the trial: in its last decision, on a frame an input captured."""
    if goal.decision_id != tally.decisions:
        report.add(f"{where}: goal {goal.id} met at decision {goal.decision_id}, the trial's last is "
                   f"{tally.decisions}")
    if (goal.frame_index, goal.frame_sha256) not in tally.award_actions:
        report.add(f"{where}: goal {goal.id} met on frame {goal.frame_index}, which no recorded input captured")


def _check_no_goal(r: TrialResult, where: str, report: Report) -> None:
    from engine.games.goals import GOAL_MET

    if r.goal is not None or r.termination_reason == GOAL_MET:
        report.add(f"{where}: records a goal ({r.goal.id if r.goal else r.termination_reason}), but the manifest "
                   f"chose none")


def _check_final(r: TrialResult, tally: TraceTally, where: str, game, report: Report) -> None:
    """The ending the ladder gives (engine.games.ladder) against the one recorded."""
    reason = r.termination_reason
    expected = final_ending(game, tally.milestones_reached, r.pre_satisfied)
    if reason == FINAL and expected != FINAL:
        missing = [m for m in deciding(game) if m not in tally.milestones_reached and m not in r.pre_satisfied]
        report.add(f"{where}: final-milestone, but the trace never reached {', '.join(missing)}")
    elif reason == FINAL_SKIPPED and expected != FINAL_SKIPPED:
        report.add(f"{where}: {FINAL_SKIPPED}, but the trace " + (
            "satisfied every required rung" if expected == FINAL else f"never reached {game.final_id}"))
    elif expected is not None and reason not in (FINAL, FINAL_SKIPPED) and r.outcome in VALID_OUTCOMES \
            and tally.decisions:
        report.add(f"{where}: the trace reached the end of the ladder ({expected}), but the trial ended with "
                   f"{reason}")


def _check_ladder_figures(r: TrialResult, where: str, game, report: Report) -> None:
    """pre_satisfied, skipped_required and deepest_milestone, by the ladder's rules (engine.games.ladder)."""
    ids = [m.id for m in game.milestones]
    unknown = sorted(set(r.pre_satisfied) - set(ids))
    if unknown:
        report.add(f"{where}: pre_satisfied names rungs the game does not have: {', '.join(unknown)}")
    both = sorted(set(r.pre_satisfied) & set(r.milestones_reached))
    if both:
        report.add(f"{where}: {', '.join(both)} held at the start and cannot be reached again")
    # A recovered result cannot know which rungs held at the start (see sessions.audit.recover): it claims none skipped.
    skipped = [] if r.recovered else skipped_required(game, r.milestones_reached, r.pre_satisfied)
    if skipped != r.skipped_required:
        report.add(f"{where}: skipped_required {r.skipped_required}, the rungs reached skip {skipped}")
    if deepest(game, r.milestones_reached, r.pre_satisfied) != r.deepest_milestone:
        report.add(f"{where}: deepest_milestone {r.deepest_milestone} does not follow from the awards")
