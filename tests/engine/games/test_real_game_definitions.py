"""The bundled real-game definitions: every address cites its source, dumps are listed for
identification, and a memory image that has not started a game satisfies no rung."""

from __future__ import annotations

import pytest

from engine.games.ladder import Ladder
from engine.games.probe import Probe
from sessions.preflight.assets import ASSETS
from sessions.preflight.gamedefs import load_game_definition

REAL = sorted(p for p in (ASSETS / "games").glob("pokemon-*.yaml"))


def test_the_three_games_are_bundled():
    assert [p.stem for p in REAL] == ["pokemon-emerald-en", "pokemon-firered-leafgreen-en", "pokemon-red-blue-en"]


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.stem)
def test_every_value_cites_its_source_and_dumps_are_listed(path):
    game = load_game_definition(path)
    assert game.verified is False  # until the opt-in real-ROM test (tests/realroms) passes on it
    unsourced = [f"field {n}" for n, f in game.fields.items() if not f.source]
    unsourced += [f"pointer {n}" for n, p in game.pointers.items() if not p.source]
    unsourced += [f"array {n}" for n, a in game.arrays.items() if not a.source]
    assert not unsourced
    assert all("pret/" in f.source or "pokered" in f.source or "poke" in f.source for f in game.fields.values())
    assert game.roms and len({r.sha1 for r in game.roms}) == len(game.roms)
    assert {r.code is None for r in game.roms} == {game.platform != "gba"}


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.stem)
def test_blank_memory_satisfies_no_rung(path):
    game = load_game_definition(path)
    probe = Probe(game)
    for fill in (0x00, 0xFF):
        sample = probe(lambda address, length, fill=fill: [fill] * length)
        ladder = Ladder(game, sample)
        awarded = ladder.update(sample, sample, decision_id=1, frame_index=1, frame_sha256="0" * 64)
        assert not awarded, f"memory of {fill:#04x} bytes awards {[a.id for a in awarded]}"


# -- what the definitions declare for the metrics and the long-horizon scorer (issue 22.3) -------------

def _game(stem):
    return load_game_definition(ASSETS / "games" / f"{stem}.yaml")


class Memory:
    """A sparse byte image with an emulator's read_range (unset bytes read 0)."""

    def __init__(self):
        self.bytes: dict[int, int] = {}

    def put(self, address: int, data) -> None:
        for i, b in enumerate(data):
            self.bytes[address + i] = b

    def u32(self, address: int, value: int) -> None:
        self.put(address, value.to_bytes(4, "little"))

    def read(self, address: int, length: int) -> list[int]:
        return [self.bytes.get(address + i, 0) for i in range(length)]


def _set_flag(mem: Memory, base: int, flag: int) -> None:
    at = base + flag // 8
    mem.put(at, [mem.bytes.get(at, 0) | 1 << flag % 8])


@pytest.mark.parametrize("stem", ["pokemon-red-blue-en", "pokemon-firered-leafgreen-en", "pokemon-emerald-en"])
def test_the_three_games_probe_the_partys_highest_level(stem):
    """level_field reads the highest level among the party in use: the records past the party count
    (a released Pokémon's leftovers) are ignored, and an empty party reads 0."""
    game = _game(stem)
    assert game.party_level_field == "party_level"
    party = game.arrays["party"]
    mem = Memory()
    offset = game.fields["party_level"].index
    for slot, level in enumerate([12, 31, 7, 99, 99, 99]):  # slots 3-5 hold stale 99s
        mem.put(party.address + slot * party.stride + offset, [level])
    count_at = game.fields["party_count"].address
    probe = Probe(game)
    for count, want in [(3, 31), (1, 12), (0, 0), (6, 99)]:
        mem.put(count_at, [count])
        assert probe(mem.read)["party_level"] == want, count


def test_firered_counts_battle_actions_apart_by_gmain_in_battle():
    game = _game("pokemon-firered-leafgreen-en")
    assert game.battle_field == "in_battle"
    mem, probe = Memory(), Probe(game)
    assert probe(mem.read)["in_battle"] == 0
    mem.put(0x030030F0 + 0x439, [0b001])  # oamLoadDisabled alone is no battle
    assert probe(mem.read)["in_battle"] == 0
    mem.put(0x030030F0 + 0x439, [0b011])
    assert probe(mem.read)["in_battle"] == 1


def test_firered_declares_the_parcels_return_as_required_backtracking():
    """Mart -> Viridian -> Route 1 -> Pallet -> lab after the parcel (M6) and before its delivery
    (M7) is never repetition; the same loop outside that window is."""
    from engine.loop.routes import RouteTracker

    game = _game("pokemon-firered-leafgreen-en")
    (back,) = game.required_backtracking
    assert (back.from_map, back.to_map, back.after, back.until) == (0x0305, 0x0304, "M6", "M7")
    assert set(back.via) == {0x0103, 0x1303, 0x0003}
    loop = [((0x0103, 5, 5), "UP", (0x1303, 5, 30)), ((0x1303, 5, 30), "UP", (0x0003, 9, 20)),
            ((0x0003, 9, 20), "UP", (0x0304, 6, 12)), ((0x0304, 6, 12), "DOWN", (0x0103, 5, 5))] * 3
    # 12 transitions: 9 four-step windows, 4 distinct rotations of the loop, so 5 repeats when not excused
    for reached, repeated in [(["M6"], 0), (["M6", "M7"], 5), ([], 5)]:
        tracker = RouteTracker.for_game(game, loop_repeats=None)
        for before, action, after in loop:
            tracker.record(before, action, after, reached)
        assert tracker.repeated_actions == repeated, reached


def test_the_emerald_ladder_is_seed_002s_full_game():
    """68 rungs, 60 required, ending at the Hall of Fame; the long-horizon section scores m out of those 60."""
    from engine.games.ladder import deciding

    game = _game("pokemon-emerald-en")
    assert len(game.milestones) == 68 and sum(m.required for m in game.milestones) == 60
    assert game.final_id == "M68" and game.milestones[-1].name == "Hall of Fame"
    assert len(deciding(game)) == 60
    lh = game.long_horizon
    assert (lh.required_milestones, lh.reference_hours, lh.budget_hours, lh.level_full, lh.level_zero) == \
        (60, 20, 40, 60, 100)
    assert sum(m.name.endswith(" Badge") for m in game.milestones) == 8
    flags = game.arrays["event_flags"]
    rung_flags = {c.field for m in game.milestones for c in m.all if game.fields[c.field].flag == "event_flags"}
    assert len(rung_flags) >= 60
    assert all(game.fields[f].index < flags.bytes * 8 for f in rung_flags)  # inside SaveBlock1.flags


def test_every_emerald_rung_decodes_from_its_flag_through_the_moving_save_block():
    """Synthetic memory: the save block at one offset, then moved (a map load); each rung holds once
    its flag (the starter also needs a live party) is set at SaveBlock1+0x1270 wherever the block is."""
    game = _game("pokemon-emerald-en")
    probe = Probe(game)
    for sb1 in (0x02025A00, 0x02025A00 + 124):
        mem = Memory()
        mem.u32(0x03005D8C, sb1)
        mem.u32(0x03005D90, 0x02024A54)
        mem.put(0x020244E9, [1])  # gPlayerPartyCount
        blank = probe(mem.read)
        assert game.is_ready(blank) and not [m.id for m in game.milestones if m.holds(blank)]
        for m in game.milestones:
            (field, *_) = [c.field for c in m.all]
            f = game.fields[field]
            if f.var:  # M3: VAR_ROUTE101_STATE 3 at SaveBlock1.vars (+0x139C)
                mem.put(sb1 + 0x139C + 2 * (f.index - 0x4000), [3, 0])
            else:
                _set_flag(mem, sb1 + 0x1270, f.index)
            sample = probe(mem.read)
            assert m.holds(sample), m.id
        assert all(m.holds(probe(mem.read)) for m in game.milestones)


def test_the_emerald_ladder_awards_the_hall_of_fame_as_success_with_the_long_horizon_score():
    """Reaching every required rung, then the Hall of Fame, ends the trial as a success; the scorer
    counts m = 60 required rungs (optional ones do not count) and reads L from party_level."""
    from engine.games.ladder import FINAL, Ladder

    game = _game("pokemon-emerald-en")
    probe = Probe(game)
    mem = Memory()
    mem.u32(0x03005D8C, 0x02025A00)
    mem.u32(0x03005D90, 0x02024A54)
    mem.put(0x020244E9, [2])
    mem.put(0x020244EC + 0x54, [55])
    mem.put(0x020244EC + 100 + 0x54, [58])
    start = probe(mem.read)
    ladder = Ladder(game, start)
    for m in game.milestones:
        if not m.required:
            continue
        f = game.fields[m.all[0].field]
        if f.var:
            mem.put(0x02025A00 + 0x139C + 2 * (f.index - 0x4000), [3, 0])
        else:
            _set_flag(mem, 0x02025A00 + 0x1270, f.index)
        s = probe(mem.read)
        ladder.update(s, s, decision_id=1, frame_index=1, frame_sha256="0" * 64)
    assert ladder.ending == FINAL and len(ladder.reached) == 60 and ladder.skipped_required == []
    assert probe(mem.read)["party_level"] == 58
