"""Seed 004's task set on the open GBA cartridge (assets/tasks/gba-bosses/): eight boss battles, easy to
hard, each from the moment before its battle. Real mGBA, the cartridge's own battle engine, and the
battle adapter of parcel-quest-advance-battles.yaml (FireRed's RAM): apply_team writes encrypted
records that the game decrypts and checksums itself. The reference team of each task wins with a
greedy play; random teams with random actions rarely do; a record with a bad checksum is a bad egg
that cannot fight."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import yaml

from engine.battle.battle import BattleRefused, BattleSettings, make_judge
from sessions.tasks.tasks import catalog
from tests.gba.conftest import TIMING, needs_mgba

pytestmark = needs_mgba
BOSSES = Path(__file__).resolve().parents[2] / "assets" / "tasks" / "gba-bosses"
PARTY = 0x02024284  # gPlayerParty (pret/pokefirered symbols)
BEAT_BOSS = 0x500  # TRAINER_FLAGS_START: the cartridge sets 0x500 + the boss's id on a win


def _tasks():
    return sorted(catalog(BOSSES), key=lambda t: t.file.battle.difficulty["tier"])



class Episode:
    """One episode through the adapter's own calls (the MCP tools' plans), on a restored start state."""

    def __init__(self, emu, task):
        self.emu, self.task = emu, task
        emu.restore((task.path.parent / task.file.start_states["mgba"].state).read_bytes())
        rules = task.file.battle
        self.adapter = task.game.battle
        self.judge = make_judge(self.adapter, BattleSettings.model_validate(
            rules.model_dump(exclude={"derived", "team"})))

    def call(self, tool: str, args: dict) -> None:
        plan = self.judge.plan(tool, args, self.emu.read_range)
        for address, data in plan.writes:
            self.emu.write(address, bytes(data))
        for press in plan.presses:
            self.emu.step(press, TIMING, lambda read: {})
        self.judge.accepted(plan)

    def snapshot(self) -> dict:
        return self.judge.snapshot(self.emu.read_range)

    def effectiveness(self, move: str, types: list[str]) -> float:
        import sys
        sys.path.insert(0, str(BOSSES.parents[1] / "gba-cartridge" / "tools"))
        import battle_data

        m = self.adapter.move_named(move)
        out = 1.0
        for a, b, x in battle_data.CHART:
            if a == m.type and b in types:
                out *= x / 10
        return out

    def greedy_move(self, own: dict, enemy: dict) -> str:
        def score(mv: dict) -> float:
            m = self.adapter.move_named(mv["move"])
            stab = 1.5 if m.type in self.adapter.species_named(own["species"]).types else 1.0
            return (m.power or 0) * stab * self.effectiveness(m.name, enemy["types"] or []) * (m.accuracy or 100)
        return max((mv for mv in own["moves"] if mv["pp"]), key=score)["move"]

    def play(self, team: list[dict], policy: str, rng: random.Random | None = None, limit: int = 80) -> str | None:
        """The battle's result ('won' / 'lost') or None when it is still on after `limit` actions."""
        self.call("apply_team", {"team": team})
        self.call("lead", {"slot": 0})
        for _ in range(limit):
            s = self.snapshot()
            if s["phase"] is None or s["phase"] in ("won", "lost"):
                return s["battle_state"]
            try:
                if s["phase"] == "send":
                    alive = [p["slot"] for p in s["party"] if p["slot"] != s["active"]]
                    for slot in (rng.sample(alive, len(alive)) if rng else alive):
                        try:
                            self.call("action", {"kind": "SEND", "slot": slot})
                            break
                        except BattleRefused:
                            continue
                elif policy == "greedy":
                    move = self.greedy_move(s["own"], s["enemy"]) if s["own"] else team[0]["moves"][0]
                    self.call("action", {"kind": "FIGHT", "move": move})
                elif s["own"] and rng.random() < 0.85:
                    self.call("action", {"kind": "FIGHT", "move": rng.choice([m["move"] for m in s["own"]["moves"]])})
                else:
                    self.call("action", {"kind": "SWITCH", "slot": rng.randrange(len(s["party"]))})
            except BattleRefused:
                move = (s["own"] or {"moves": [{"move": team[0]["moves"][0]}]})["moves"][0]["move"]
                self.call("action", {"kind": "FIGHT", "move": move})
        return None


def test_eight_boss_tasks_easy_to_hard_with_their_rules():
    tasks = _tasks()
    assert len(tasks) >= 8
    caps = [t.file.battle.level_cap for t in tasks]
    assert caps == sorted(caps) and len(set(caps)) == len(caps)  # the tiers climb
    for t in tasks:
        rules = t.file.battle
        assert t.game.id == "parcel-quest-advance-battles" and t.file.episodes.budget == 10
        assert rules.pool.species and rules.pool.moves and rules.pool.items is not None
        assert all(t.game.battle.species_named(s) for s in rules.pool.species)
        # the party limit is no larger than the boss's party (the task's notes name its size)
        assert rules.party_limit <= int(t.path.read_text().split("(")[1].split(" critters")[0])


@pytest.mark.parametrize("task", _tasks(), ids=lambda t: t.id)
def test_the_reference_team_wins_and_sets_the_boss_flag(machine, task):
    team = yaml.safe_load(task.path.with_suffix(".reference.yml").read_text())["team"]
    episode = Episode(machine, task)
    assert episode.snapshot()["phase"] == "before-battle"
    assert episode.play(team, "greedy") == "won"
    tier = task.file.battle.difficulty["tier"]
    sb1 = int.from_bytes(bytes(machine.read_range(0x03005008, 4)), "little")
    flags = bytes(machine.read_range(sb1 + 0xEE0, 288))
    assert flags[(BEAT_BOSS + tier) // 8] >> ((BEAT_BOSS + tier) % 8) & 1  # the goal the task's probe reads


def test_random_teams_and_actions_rarely_win(machine):
    """Two episodes per task of a random legal team (party limit, level cap, pool) and random actions."""
    import sys

    sys.path.insert(0, str(BOSSES.parents[1] / "gba-cartridge" / "tools"))
    import battle_data

    rng = random.Random(11)
    results = []
    for task in _tasks():
        rules = task.file.battle
        for _ in range(2):
            team = []
            for name in rng.sample(rules.pool.species, rules.party_limit):
                s = battle_data.SPECIES_BY_NAME[name]
                learn = [m for m in battle_data.learnset(s[2], s[5]) if m in rules.pool.moves]
                team.append({"species": name, "level": rules.level_cap, "moves": rng.sample(learn, min(4, len(learn)))})
            results.append((task.id, Episode(machine, task).play(team, "random", rng)))
    wins = [r for r in results if r[1] == "won"]
    assert len(wins) <= len(results) // 4, results
    hardest = [r for r in results if r[0] == _tasks()[-1].id]
    assert not [r for r in hardest if r[1] == "won"], results


def test_a_record_with_a_bad_checksum_is_a_bad_egg_that_cannot_fight(machine):
    """The game checksums what it decrypts (src/pokemon.c): one flipped encrypted byte in the lead's
    record and the battle sends the second member instead; the adapter's own writer never does that."""
    from engine.battle.gen3_record import decode

    task = _tasks()[0]
    team = yaml.safe_load(task.path.with_suffix(".reference.yml").read_text())["team"]
    episode = Episode(machine, task)
    episode.call("apply_team", {"team": team})
    assert all(decode(bytes(machine.read_range(PARTY + 100 * i, 100))).checksum_ok for i in range(len(team)))
    raw = bytearray(machine.read_range(PARTY, 100))
    raw[0x30] ^= 0x01  # a byte of the encrypted substructures
    machine.write(PARTY, bytes(raw))
    assert not decode(bytes(raw)).checksum_ok
    assert episode.snapshot()["party"][0]["species"] is None  # what the adapter decodes: no Pokémon there
    for press in episode.adapter.menus.before:  # the battle starts (the adapter's own presses)
        machine.step(press, TIMING, lambda read: {})
    seen = episode.snapshot()
    assert seen["phase"] == "choose-action"
    assert seen["own"]["species"] == team[1]["species"] and seen["active"] == 1


def test_knobs_derive_a_harder_boss_task_with_its_own_hash_and_refuse_an_impossible_one(tmp_path, machine):
    """seed 004's knobs on a boss task: cap down 25%, party limit 1, a species excluded; the derived file
    names its base's sha256 and the knobs, loads with its state, and its data follow the new pool."""
    import hashlib
    import json

    from app.cli import main
    from sessions.tasks.tasks import load_task

    base = _tasks()[1]
    knobs = tmp_path / "knobs.yaml"
    knobs.write_text(yaml.safe_dump({"base": str(base.path), "task_id": "pqa-boss-2-hard",
                                     "knobs": {"level_cap_down_percent": 25, "party_limit": 1,
                                               "exclude": {"species": ["EMBERPUP"]}}}))
    out = tmp_path / "pqa-boss-2-hard.yaml"
    assert main(["tasks", "derive", str(knobs), "--output", str(out)]) == 0
    derived = load_task(out)
    rules = derived.file.battle
    assert (rules.level_cap, rules.party_limit) == (8, 1) and "EMBERPUP" not in rules.pool.species
    assert rules.derived.base_sha256 == base.sha256 and derived.sha256 == hashlib.sha256(out.read_bytes()).hexdigest()
    assert derived.sha256 != base.sha256
    assert main(["tasks", "data", str(out), "--output", str(tmp_path / "data")]) == 0
    assert "EMBERPUP" not in {s["name"] for s in json.loads((tmp_path / "data" / "species.json").read_text())}
    items = json.loads((tmp_path / "data" / "items.json").read_text())
    abilities = json.loads((tmp_path / "data" / "abilities.json").read_text())
    assert items and all(i["effect"] for i in items) and abilities and all(a["effect"] for a in abilities)
    Episode(machine, derived)  # its start state (the base's, resolved from the new folder) restores
    everything = tmp_path / "all.yaml"
    everything.write_text(yaml.safe_dump({"base": str(base.path), "task_id": "pqa-boss-2-none",
                                          "knobs": {"exclude": {"species": list(base.file.battle.pool.species)}}}))
    assert main(["tasks", "derive", str(everything), "--output", str(tmp_path / "none.yaml")]) == 2
    assert not (tmp_path / "none.yaml").exists()
