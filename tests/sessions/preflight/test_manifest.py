import re
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessions.preflight.manifest import ManifestError, load_manifest, parse_manifest

GOOD = textwrap.dedent("""
    experiment_id: t-1
    game:
      title: Parcel Quest
      definition: bundled:parcel-quest.yaml
      rom: bundled:parcel-quest.gb
      rom_sha256: "%s"
      start_states:
        pyboy: {state: bundled:parcel-quest.state, sha256: "%s", emulator_version: "2.8.1"}
    emulator: {name: pyboy, version: "2.8.1", frame_width: 160, frame_height: 144}
    conditions:
      - {id: a, policy: random, seed: 1}
""") % ("a" * 64, "b" * 64)


def test_good_manifest_and_defaults():
    m = parse_manifest(GOOD, "m.yaml")
    assert m.agent.max_actions_per_decision == 4 and m.agent.invalid_output_retries == 1
    assert m.budgets.accepted_actions == 2500 and m.trials.order == "counterbalanced"
    assert len(m.sha256()) == 64 and m.sha256() == parse_manifest(GOOD, "other.yaml").sha256()


@pytest.mark.parametrize("edit, message", [
    (("  title: Parcel Quest", "  title: Parcel Quest\n  colour: red"), "m.yaml:5: game.colour: unknown key"),
    (("pyboy, version: \"2.8.1\"", "pyboy, version: \"2.8.1\", speed: 3"), "m.yaml:10: emulator.speed: unknown key"),
    (("seed: 1", "seed: one"), "m.yaml:12: conditions.0.seed"),
    (("policy: random, seed: 1", "policy: cheat"), "m.yaml:12: conditions.0.policy"),
    (("policy: random, seed: 1", "policy: random"), "policy 'random' needs 'seed'"),
    (("rom_sha256: \"" + "a" * 64, "rom_sha256: \"" + "A" * 64), "m.yaml:7: game.rom_sha256"),
])
def test_bad_manifests_name_file_and_field(edit, message):
    text = GOOD.replace(*edit)
    assert text != GOOD
    with pytest.raises(ManifestError) as err:
        parse_manifest(text, "m.yaml")
    assert re.match(r"m\.yaml:\d+: ", err.value.args[0])
    assert message.split("m.yaml")[-1] in err.value.args[0]


def test_malformed_yaml_and_missing_file(tmp_path):
    with pytest.raises(ManifestError, match=r"m.yaml:\d+: not valid YAML"):
        parse_manifest("a: [", "m.yaml")
    with pytest.raises(ManifestError, match="cannot read manifest"):
        load_manifest(tmp_path / "nope.yaml")


def test_budget_values_validated():
    with pytest.raises(ManifestError, match="budgets.accepted_actions"):
        parse_manifest(GOOD + "budgets: {accepted_actions: 0}\n", "m.yaml")


def test_memory_rules_default_to_the_engines_and_reach_the_store():
    from engine.loop.memory import MemoryRules as EngineRules

    m = parse_manifest(GOOD, "m.yaml")
    assert m.agent.memory.model_dump() == EngineRules().as_dict()
    assert m.agent.memory.engine_rules() == EngineRules()
    custom = parse_manifest(GOOD + "agent: {memory: {confirm_threshold: 0.8, guess_cap: 0.3, max_facts: 64,\n"
                                   "  exclusive_predicates: [is_at, weather], possession_predicates: []}}\n", "m.yaml")
    assert custom.agent.memory.engine_rules() == EngineRules(
        confirm_threshold=0.8, guess_cap=0.3, max_facts=64, exclusive_predicates=("is_at", "weather"),
        possession_predicates=())
    assert parse_manifest(custom.to_yaml(), "frozen.yaml").agent.memory == custom.agent.memory


@pytest.mark.parametrize("memory, message", [
    ("{max_fact: 10}", "agent.memory.max_fact: unknown key (did you mean 'max_facts'?)"),
    ("{confirm_threshold: 0}", "agent.memory.confirm_threshold: Input should be greater than 0"),
    ("{confirm_threshold: 1.2}", "agent.memory.confirm_threshold: Input should be less than or equal to 1"),
    ("{guess_cap: -0.1}", "agent.memory.guess_cap: Input should be greater than or equal to 0"),
    ("{guess_cap: 0.8}", "agent.memory: guess_cap must be below confirm_threshold"),
    ("{retrieve_records: 0}", "agent.memory.retrieve_records: Input should be greater than or equal to 1"),
    ("{retrieve_records: 1001}", "agent.memory.retrieve_records: Input should be less than or equal to 1000"),
    ("{retrieve_chars: 100}", "agent.memory.retrieve_chars: Input should be greater than or equal to 256"),
    ("{max_facts: 0}", "agent.memory.max_facts: Input should be greater than or equal to 1"),
    ("{max_facts: true}", "agent.memory.max_facts: Input should be a valid integer"),
    ("{max_facts: '64'}", "agent.memory.max_facts: Input should be a valid integer"),
    ("{exclusive_predicates: [Is At]}", "agent.memory.exclusive_predicates.0: String should match pattern"),
    ("{exclusive_predicates: [is_at, is_at]}", "agent.memory.exclusive_predicates: predicates listed twice: is_at"),
    ("{possession_predicates: [is_at]}", "agent.memory: predicates both exclusive and possession: is_at"),
    ("[24]", "agent.memory: Input should be"),
])
def test_memory_rules_validated(memory, message):
    with pytest.raises(ManifestError) as err:
        parse_manifest(GOOD + f"agent: {{memory: {memory}}}\n", "m.yaml")
    assert err.value.args[0].startswith("m.yaml:13: " + message), err.value.args[0]


@pytest.mark.parametrize("memory", ["{confirm_threshold: 0.8}", "{guess_cap: 0.4}", "{retrieve_records: 12}",
                                    "{retrieve_chars: 2000}", "{max_facts: 100}",
                                    "{exclusive_predicates: [is_at]}", "{possession_predicates: [has_item]}"])
def test_memory_rules_change_the_hash(memory):
    base = parse_manifest(GOOD, "m.yaml").sha256()
    assert parse_manifest(GOOD + f"agent: {{memory: {memory}}}\n", "m.yaml").sha256() != base
    defaults = ("{confirm_threshold: 0.7, guess_cap: 0.5, retrieve_records: 24, retrieve_chars: 4000, "
                "max_facts: 256, exclusive_predicates: [is_at, current_objective, status], "
                "possession_predicates: [has_item, lacks_item, delivered_item]}")
    assert parse_manifest(GOOD + f"agent: {{memory: {defaults}}}\n", "m.yaml").sha256() == base


def test_every_trial_runs_under_and_reports_the_manifests_memory_rules(tmp_path):
    from engine.loop.memory import MemoryRules as EngineRules
    from sessions.execute.trial_factory import trial_config
    from sessions.preflight.experiment import prepare
    from tests.conftest import write_manifest

    agent = {"max_actions_per_decision": 4, "memory": {"max_facts": 32, "exclusive_predicates": ["is_at"]}}
    prepared = prepare(write_manifest(tmp_path, agent=agent), tmp_path / "out")
    config = trial_config(prepared, 0)
    assert config.memory_rules == EngineRules(max_facts=32, exclusive_predicates=("is_at",))
    assert not (tmp_path / "out").exists()


def test_the_dry_runs_result_reports_its_memory_rules(dry_run):
    from engine.loop.memory import MemoryRules as EngineRules

    (result,) = dry_run[2]
    assert result.provenance["memory_rules"] == EngineRules().as_dict()


def test_the_reply_cap_is_frozen_and_hashed():
    m = parse_manifest(GOOD, "m.yaml")
    assert m.agent.max_reply_bytes == 1 << 20  # 1 MiB unless the manifest says otherwise
    assert "max_reply_bytes: 1048576" in m.to_yaml()  # the frozen copy names it
    capped = parse_manifest(GOOD + "agent: {max_reply_bytes: 65536}\n", "m.yaml")
    assert capped.sha256() != m.sha256()
    assert parse_manifest(capped.to_yaml(), "frozen.yaml").agent.max_reply_bytes == 65536
    assert parse_manifest(GOOD + "agent: {max_reply_bytes: 1048576}\n", "m.yaml").sha256() == m.sha256()


@pytest.mark.parametrize("agent, message", [
    ("{max_reply_bytes: true}", "agent.max_reply_bytes: Input should be a valid integer"),
    ("{max_reply_bytes: 0}", "agent.max_reply_bytes: Input should be greater than or equal to 1024"),
    ("{max_reply_bytes: -1}", "agent.max_reply_bytes: Input should be greater than or equal to 1024"),
    ("{max_reply_bytes: 1023}", "agent.max_reply_bytes: Input should be greater than or equal to 1024"),
    ("{max_reply_bytes: 1048576.0}", "agent.max_reply_bytes: Input should be a valid integer"),
    ("{max_reply_bytes: '1048576'}", "agent.max_reply_bytes: Input should be a valid integer"),
    ("{max_reply_bytes: 1 MiB}", "agent.max_reply_bytes: Input should be a valid integer"),
    ("{max_reply_bytes: 33554432}", "agent.max_reply_bytes: Input should be less than or equal to 16777216"),
    ("{max_reply_bytes: 8388608, invalid_output_retries: 2}", "agent: max_reply_bytes 8,388,608 times the 3 answers"),
])
def test_the_reply_cap_validated(agent, message):
    with pytest.raises(ManifestError) as err:
        parse_manifest(GOOD + f"agent: {agent}\n", "m.yaml")
    assert err.value.args[0].startswith("m.yaml:13: " + message), err.value.args[0]


def test_the_information_track_is_frozen_and_hashed_and_visual_keeps_the_old_hash():
    plain = parse_manifest(GOOD, "m.yaml")
    agent = "emulator: {name: pyboy"
    visual = parse_manifest(GOOD.replace(agent, "agent: {information_track: visual}\n" + agent), "m.yaml")
    structured = parse_manifest(GOOD.replace(agent, "agent: {information_track: structured}\n" + agent), "m.yaml")
    assert plain.agent.information_track == "visual" and visual.sha256() == plain.sha256()
    assert structured.agent.information_track == "structured" and structured.sha256() != plain.sha256()
    assert "information_track: structured" in structured.to_yaml()
    assert parse_manifest(structured.to_yaml(), "frozen.yaml").sha256() == structured.sha256()
    with pytest.raises(ManifestError, match=r"m.yaml:\d+: agent.information_track"):
        parse_manifest(GOOD.replace(agent, "agent: {information_track: ram}\n" + agent), "m.yaml")


@settings(max_examples=40, deadline=None)
@given(turns=st.integers(-5, 20_000), chars=st.integers(-5, 200_000))
def test_bounded_context_is_frozen_and_hashed_and_bad_limits_are_refused_in_one_line(turns, chars):
    plain = parse_manifest(GOOD, "m.yaml")
    agent = "emulator: {name: pyboy"
    text = GOOD.replace(agent, f"agent: {{context: {{segment_turns: {turns}, notebook_chars: {chars}}}}}\n" + agent)
    if 1 <= turns <= 10_000 and 0 <= chars <= 100_000:
        m = parse_manifest(text, "m.yaml")
        assert (m.agent.context.segment_turns, m.agent.context.notebook_chars) == (turns, chars)
        assert m.sha256() != plain.sha256() and parse_manifest(m.to_yaml(), "f.yaml").sha256() == m.sha256()
        assert plain.agent.context is None and "context" not in plain.to_yaml()  # absent: the old hash
    else:
        with pytest.raises(ManifestError, match=r"m.yaml:\d+: agent.context.(segment_turns|notebook_chars)") as err:
            parse_manifest(text, "m.yaml")
        assert "\n" not in str(err.value)


def test_a_structured_track_on_a_definition_without_one_is_refused_in_preflight(tmp_path):
    from sessions.preflight.assets import ASSETS
    from sessions.preflight.experiment import PreflightError, prepare
    from tests.conftest import write_manifest

    text = (ASSETS / "games" / "parcel-quest.yaml").read_text()
    (tmp_path / "game.yaml").write_text(text[:text.index("tracks:")])
    path = write_manifest(tmp_path, agent={"information_track": "structured"})
    data = path.read_text().replace("bundled:parcel-quest.yaml", str(tmp_path / "game.yaml"))
    path.write_text(data)
    with pytest.raises(PreflightError, match="agent.information_track: structured, but game definition .* "
                                             "declares no structured track") as info:
        prepare(path, tmp_path / "out")
    assert "\n" not in str(info.value) and not (tmp_path / "out").exists()
