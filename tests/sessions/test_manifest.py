import re
import textwrap

import pytest

from sessions.manifest import ManifestError, load_manifest, parse_manifest

GOOD = textwrap.dedent("""
    experiment_id: t-1
    game:
      title: Parcel Quest
      definition: bundled:parcel-quest.yaml
      rom: bundled:parcel-quest.gb
      rom_sha256: "%s"
      initial_state: bundled:parcel-quest.state
      initial_state_sha256: "%s"
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
    (("version: \"2.8.1\"", "version: \"2.8.1\", speed: 3"), "m.yaml:10: emulator.speed: unknown key"),
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
