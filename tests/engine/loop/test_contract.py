import json

import pytest

from engine.loop.contract import ContractError, parse_response, response_json_schema


def response(**overrides):
    body = {
        "reasoning_summary": "walk to the stairs",
        "observed": {"screen": "overworld", "location_guess": "bedroom", "objective_guess": "leave",
                     "certainty": 0.8},
        "memory_read": [],
        "memory_write": [{"kind": "location", "value": "bedroom", "confidence": 0.9,
                          "evidence": "bed visible"}],
        "actions": ["UP", "A"],
    }
    body.update(overrides)
    return json.dumps(body)


def test_valid_response_parses():
    r = parse_response(response(), max_actions=4)
    assert r.actions == ["UP", "A"]
    assert r.memory_write[0].kind == "location"


def test_too_many_actions_rejected_not_truncated():
    with pytest.raises(ContractError, match="5 actions given, at most 4"):
        parse_response(response(actions=["UP"] * 5), max_actions=4)


@pytest.mark.parametrize("bad, where", [
    ({"actions": ["JUMP"]}, "actions.0"),
    ({"actions": []}, "actions"),
    ({"observed": {"screen": "map", "location_guess": "", "objective_guess": "", "certainty": 0.5}},
     "observed.screen"),
    ({"observed": {"screen": "menu", "location_guess": "", "objective_guess": "", "certainty": 1.5}},
     "observed.certainty"),
    ({"memory_write": [{"kind": "rumour", "value": "x", "confidence": 0.1, "evidence": ""}]},
     "memory_write.0.kind"),
    ({"reasoning_summary": "x" * 1001}, "reasoning_summary"),
    ({"extra": 1}, "extra"),
    ({"observed": {"screen": "menu", "location_guess": "", "objective_guess": "", "certainty": True}},
     "observed.certainty"),
    ({"observed": {"screen": "menu", "location_guess": "", "objective_guess": "", "certainty": "0.5"}},
     "observed.certainty"),
    ({"memory_write": [{"kind": "event", "value": "x", "confidence": False, "evidence": ""}]},
     "memory_write.0.confidence"),
    ({"reasoning_summary": 5}, "reasoning_summary"),
])
def test_contract_violations_name_the_field(bad, where):
    with pytest.raises(ContractError, match=where.replace(".", r"\.")):
        parse_response(response(**bad), max_actions=4)


def test_non_json_and_non_object_rejected():
    with pytest.raises(ContractError, match="not a JSON object"):
        parse_response("press up please", max_actions=4)
    with pytest.raises(ContractError, match="not a JSON object"):
        parse_response("[1, 2]", max_actions=4)
    for hostile in ["[" * 100_000, "9" * 5001, '{"observed": {"certainty": NaN}}']:
        with pytest.raises(ContractError):
            parse_response(hostile, max_actions=4)


def test_whole_numbers_still_count_as_certainties():
    r = parse_response(response(observed={"screen": "menu", "location_guess": "", "objective_guess": "",
                                          "certainty": 1}), max_actions=4)
    assert r.observed.certainty == 1.0


def test_actions_outside_the_manifest_allowlist_rejected():
    with pytest.raises(ContractError, match="not allowed by the manifest: SELECT"):
        parse_response(response(actions=["SELECT"]), max_actions=4, allowed=frozenset({"UP", "A"}))


def test_schema_carries_the_action_limit():
    schema = response_json_schema(3)
    assert schema["properties"]["actions"]["maxItems"] == 3
    assert set(schema["required"]) >= {"reasoning_summary", "observed", "memory_read", "memory_write", "actions"}
