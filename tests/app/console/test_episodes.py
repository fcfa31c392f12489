"""The console over an episodic trial: a new episode shows in the trace pane, and the frame pane gets
the restored start frame."""

from __future__ import annotations

from app.console.console_state import ConsoleSink
from panes.trial.trace import format_item
from sessions.tasks.task_batch import TASK_FILES
from sessions.tasks.tasks import TASKS_DIR, PolicyChoice, load_task, write_task_inputs
from tests.conftest import run_experiment


def test_a_new_episode_shows_in_the_trace_pane(tmp_path):
    task = load_task(TASKS_DIR / "rival-battle.yaml")
    manifest = write_task_inputs(task, PolicyChoice("scripted"), tmp_path / TASK_FILES / task.id, 1, None, None)
    sink = ConsoleSink("rival-battle", clock=lambda: 0.0)
    _, _, results = run_experiment(manifest, tmp_path / "runs" / task.id, sinks=[sink])
    assert results[0].outcome == "success" and len(results[0].episodes) == 2
    items = sink.drain_trace()
    kinds = [k for k, _ in items]
    assert kinds.count("episode") == 1
    at = kinds.index("episode")
    decisions_before = sum(1 for k in kinds[:at] if k == "decision")
    assert decisions_before == results[0].episodes[0].last_decision  # after episode 1's last decision
    line = format_item(*items[at])
    assert line.startswith("↻ episode 2/5: start state restored (the previous episode ended: failure)")
    assert not sink.handle_errors
    # the restored start frame is what the frame pane holds right after the episode began
    started = next(p for k, p in items if k == "trial")
    assert items[at][1]["frame_sha256"] == started["frame_sha256"]
