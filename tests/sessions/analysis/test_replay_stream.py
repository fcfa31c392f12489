"""The report's replayed state streamed (issue 31 item 8): the figures gathered as the replay runs
(`replay_figures`) equal those computed from every sample held (`replay_states`), on a real run of
the bundled cartridge, divergence included; and the Inspect export's streamed lookup answers as the
dict it replaces."""

from __future__ import annotations

import json
import shutil

import pytest

from sessions.analysis.inspect_export import _ByDecision, _ordered
from sessions.analysis.metrics import (
    _highest_level,
    action_figures,
    awards_of,
    compute_row,
    load_game,
    read_trial,
    replay_figures,
    replay_states,
)
from sessions.evidence.folder import EvidenceFolder


def _rows_both_ways(root, game):
    """Each trial's row from the held samples (the old path) and from the streamed figures."""
    out = []
    for trial in EvidenceFolder(root).trials():
        rec = read_trial(trial)
        states, note = replay_states(trial.path)
        replayed, streamed_note = replay_figures(trial.path, rec.first_frame, rec.input_count,
                                                 awards_of(rec.result), game)
        assert streamed_note == note
        held = compute_row(rec, game, None, states, note)
        streamed = compute_row(rec, game, None, None, streamed_note, replayed=replayed)
        out.append((trial, rec, states, replayed, held, streamed))
    return out


def _with_level(game):
    """The bundled definition with the long-horizon scorer reading a probed field that changes (x)."""
    data = game.model_dump(exclude_none=True)
    data["long_horizon"] = {"level_field": game.position.x, "level_full": 0, "level_zero": 500}
    return type(game).model_validate(data)


def test_streamed_figures_equal_the_held_samples_figures(dry_run):
    root = dry_run[0]
    game, _ = load_game(root)
    game = _with_level(game)
    checked = 0
    for _trial, rec, states, replayed, held, streamed in _rows_both_ways(root, game):
        assert states is not None and replayed is not None and replayed.acts is not None
        assert held == streamed and streamed["state_source"] == "replay"
        # the figures themselves, and the level the long-horizon scorer reads
        whole = action_figures(rec.first_frame, rec.inputs(), rec.input_count, awards_of(rec.result), game, states)
        assert replayed.acts == whole
        assert replayed.level == _highest_level(game, states) and replayed.level is not None
        assert replayed.level > states.start[game.position.x] or all(
            s[game.position.x] <= states.start[game.position.x] for s in states.after)
        checked += 1
    assert checked == len(dry_run[2])


def test_a_diverged_replay_falls_back_to_the_records_as_before(dry_run, tmp_path):
    root = tmp_path / "exp"
    shutil.copytree(dry_run[0], root)
    trial = sorted((root / "trials").iterdir())[0]
    lines = (trial / "inputs.jsonl").read_text().splitlines()
    row = json.loads(lines[2])
    row["frame_sha256"] = "0" * 64
    lines[2] = json.dumps(row, separators=(",", ":"))
    (trial / "inputs.jsonl").write_text("\n".join(lines) + "\n")
    game, _ = load_game(root)
    rows = {t.key: (replayed, held, streamed) for t, _, _, replayed, held, streamed in _rows_both_ways(root, game)}
    replayed, held, streamed = rows[trial.name]
    assert replayed is None and held == streamed
    assert streamed["state_source"] == "records"
    assert streamed["state_note"].startswith(f"replay diverged at decision {row['decision_id']}, action {row['index']}")
    assert all(s["state_source"] == "replay" for k, (_, _, s) in rows.items() if k != trial.name)


def test_a_replay_that_cannot_start_says_why_and_uses_the_records(tmp_path, dry_run):
    root = tmp_path / "exp"
    shutil.copytree(dry_run[0], root)
    trial = sorted((root / "trials").iterdir())[0]
    (trial / "trace.jsonl").unlink()  # not a trial any more: the replay refuses it
    replayed, note = replay_figures(trial, None, 1, {}, None)
    assert replayed is None and note.startswith("replay unavailable: ")
    assert replay_states(trial) == (None, note)


@pytest.mark.parametrize("pairs,asked", [
    ([(1, "a"), (2, "b"), (4, "d")], [1, 2, 3, 4, 5]),  # in order, one missing, past the end
    ([(1, "a"), (1, "a2"), (3, "c")], [1, 2, 3]),  # the last of equal ids wins
    ([(2, "b"), (1, "a"), (3, "c")], [1, 2, 3]),  # a stream out of order
    ([(1, "a"), (2, "b"), (3, "c")], [2, 1, 3, 3]),  # questions out of order, one asked twice
    ([(1, "a"), (2, "b"), (1, "z")], [1, 2]),  # an id that comes back later overrides
    ([], [1]),
])
def test_the_streamed_lookup_answers_as_the_dict(pairs, asked):
    ordered = _ordered(n for n, _ in pairs)  # what the export's check pass finds
    lookup = _ByDecision(lambda: iter(pairs), ordered)
    whole = dict(pairs)
    assert [lookup.get(n, "-") for n in asked] == [whole.get(n, "-") for n in asked]
