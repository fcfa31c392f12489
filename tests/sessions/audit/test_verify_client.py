"""verify checks a cli client's record against its frozen condition: a real `policy: cli` trial (the fake
Claude Code client on the real emulator) verifies clean, and each way its recorded command, tool
settings or isolation could disagree with the manifest is named."""

from __future__ import annotations

import copy

import pytest

from sessions.audit.verify import verify_experiment
from sessions.audit.verify_client import check_clients, client_problems
from sessions.audit.verify_context import Report
from sessions.evidence.folder import EvidenceFolder
from sessions.preflight.manifest import load_manifest
from tests.sessions.execute.test_cli_policy import cli_manifest, client_exe, command, run


@pytest.fixture(scope="module")
def played(tmp_path_factory, client_install):
    tmp_path = tmp_path_factory.mktemp("cli-client")
    exe = client_exe(tmp_path, client_install)
    out, _ = run(tmp_path, cli_manifest(tmp_path, client_install, command(exe), budgets={"accepted_actions": 8}))
    manifest = load_manifest(out / "manifest.yaml")
    folder = EvidenceFolder(out)
    ((key, (result, _sha)),) = folder.results().items()
    return out, manifest, dict(folder.blinding()[0].labels), key, result


def test_a_real_cli_trial_verifies_and_its_client_matches_its_condition(played):
    out, manifest, _labels, _key, result = played
    assert verify_experiment(out) == []
    client = result.provenance["tool_server"]["client"]
    assert client_problems(client, manifest.conditions[0]) == []


@pytest.mark.parametrize("change, expected", [
    (lambda c: c.update(command=[*c["command"], "--dangerously-skip-permissions"]), "not its condition's frozen"),
    (lambda c: c["tools"].update(allowed_by_manifest=True), "recorded tool settings"),
    (lambda c: c["tools"].update(file_and_shell=["Bash"]), "recorded tool settings"),
    (lambda c: c["isolation"].update(kind="chroot"), "isolation 'chroot' is not one of"),
    (lambda c: c["isolation"].update(working_folder="/work/main"), "not run in an empty working folder"),
    (lambda c: c["isolation"]["env"].append("ANTHROPIC_API_KEY"), "does not name: ANTHROPIC_API_KEY"),
    (lambda c: c.pop("isolation"), "isolation is not recorded"),
])
def test_each_disagreement_with_the_condition_is_named(played, change, expected):
    _out, manifest, labels, key, result = played
    changed = copy.deepcopy(result.provenance)
    change(changed["tool_server"]["client"])
    report = Report()
    check_clients(manifest, labels, {key: (result.model_copy(update={"provenance": changed}), "")}, report)
    assert len(report.problems) == 1 and expected in report.problems[0], report.problems


def test_open_file_tools_the_manifest_does_not_allow_are_named_even_when_recorded_as_given(played):
    _out, manifest, _labels, _key, result = played
    client = copy.deepcopy(result.provenance["tool_server"]["client"])
    condition = manifest.conditions[0].model_copy(update={"command": [*manifest.conditions[0].command[:-2]]})
    client["command"] = list(condition.command)  # `--tools ""` dropped: Claude Code's built-ins are all open
    from sessions.preflight.tool_conditions import client_tools

    client["tools"] = client_tools(list(condition.command)) | {"allowed_by_manifest": False}
    assert client_problems(client, condition) == [
        "the client's own file and shell tools were open, and the manifest does not allow them"]
