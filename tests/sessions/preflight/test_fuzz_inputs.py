"""Property-based fuzzing of every input a user or a model hands oakwatch.

Manifests, game definitions, script notes (mutated from the bundled files: keys deleted, added,
misspelt; values replaced by arbitrary YAML; lines duplicated; random bytes), input scripts
(random text and tokens) and agent responses (random text, mutated valid JSON). The property:
only the module's own validation error comes out (ManifestError, GameDefinitionError, NotesError,
ScriptError, ContractError, PreflightError), as one printable line where it is shown to a user;
never another exception, never a hang (a hypothesis deadline, plus an interval timer that
interrupts a loop that never returns).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.loop.contract import ACTIONS, AgentResponse, ContractError, parse_response
from engine.loop.script import ScriptError, parse_script
from sessions.preflight.assets import ASSETS, DEFAULT_MANIFEST
from sessions.preflight.experiment import PreflightError, prepare
from sessions.preflight.gamedefs import GameDefinitionError, parse_game_definition
from sessions.preflight.manifest import Manifest, ManifestError, load_manifest, parse_manifest
from sessions.preflight.notes import NotesError, parse_notes

DRY_TEXT = DEFAULT_MANIFEST.read_text(encoding="utf-8")
DRY = yaml.safe_load(DRY_TEXT)
GAME_TEXT = (ASSETS / "games" / "parcel-quest.yaml").read_text(encoding="utf-8")
GAME = yaml.safe_load(GAME_TEXT)
NOTES_TEXT = (ASSETS / "cartridge" / "walkthrough-notes.yaml").read_text(encoding="utf-8")
NOTES = yaml.safe_load(NOTES_TEXT)
HUGE = "HUGE-INT-MARKER"  # yaml.safe_dump cannot write a 5,001-digit int; swapped in after dumping

# OAKWATCH_FUZZ_EXAMPLES=5000 for a deeper hunt; the default keeps the file well under a minute.
EXAMPLES = int(os.environ.get("OAKWATCH_FUZZ_EXAMPLES", "150"))
FAST = settings(deadline=2000, max_examples=EXAMPLES, suppress_health_check=[HealthCheck.too_slow])


@contextlib.contextmanager
def no_hang(seconds: float) -> Iterator[None]:
    """Interrupt the example if it runs this long: a deadline only fires after a call returns."""
    def alarm(signum, frame):
        raise TimeoutError(f"no result after {seconds} s: a hang")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def assert_one_line(message: str, source: str) -> None:
    assert message and "\n" not in message and message.isprintable(), repr(message)
    assert source in message, message


# -- arbitrary YAML ------------------------------------------------------------------------------------

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12), st.just(HUGE),
    st.sampled_from(["", "~", "1e9", "0x10", "1_000", ".nan", "yes", "2024-01-01", "bundled:", "/dev/zero",
                     "UP*999999999999", "a\0b", "a\nb", *ACTIONS]),
)
keys = st.one_of(st.text(max_size=12), st.integers(-3, 3), st.sampled_from(
    ["game", "rom", "seed", "budgets", "accepted_actions", "settle_frames", "notes", "observed", "certainty",
     "fields", "address", "milestones", "all", "field", "eq"]))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
                      max_leaves=12)


def paths(obj, prefix: tuple = ()) -> Iterator[tuple]:
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from paths(v, (*prefix, i))


def at(obj, path: tuple):
    for part in path:
        obj = obj[part]
    return obj


def typo(draw, key) -> object:
    if not isinstance(key, str) or not key:
        return draw(keys)
    i = draw(st.integers(0, len(key) - 1))
    how = draw(st.sampled_from(["drop", "double", "swap", "case", "char"]))
    if how == "drop":
        return key[:i] + key[i + 1:]
    if how == "double":
        return key[:i] + key[i] + key[i:]
    if how == "swap" and i + 1 < len(key):
        return key[:i] + key[i + 1] + key[i] + key[i + 2:]
    if how == "case":
        return key.upper()
    return key[:i] + draw(st.characters()) + key[i + 1:]


def mutate(draw, original, max_steps: int = 4):
    data = copy.deepcopy(original)
    for _ in range(draw(st.integers(1, max_steps))):
        path = draw(st.sampled_from(list(paths(data))))
        op = draw(st.sampled_from(["replace", "replace", "delete", "rename", "insert"]))
        if not path:
            if op == "replace":
                data = draw(values)
            continue
        parent, key = at(data, path[:-1]), path[-1]
        if op == "replace":
            parent[key] = draw(values)
        elif op == "delete":
            del parent[key]
        elif op == "rename" and isinstance(parent, dict):
            new = typo(draw, key)
            parent[new] = parent.pop(key)
        elif op == "insert":
            if isinstance(parent, dict):
                parent[draw(keys)] = draw(values)
            else:
                parent.insert(key, draw(values))
    return data


def dump(data) -> str:
    text = yaml.safe_dump(data, allow_unicode=True, sort_keys=False)
    return text.replace(HUGE, "9" * 5001)


@st.composite
def mutated_yaml(draw, original: dict) -> str:
    text = dump(mutate(draw, original))
    lines = text.split("\n")
    if draw(st.booleans()):  # a line twice: duplicate keys
        i = draw(st.integers(0, len(lines) - 1))
        lines.insert(i, lines[i])
    return "\n".join(lines)


SNIPPETS = ["[", "{", ":", "- ", "\n", "\t", "&a", "*a", "!!", "\0", "'", '"', "#", "!!bool ", "!!int ", "!!float ",
            "!!binary ", "!!set ", "!!omap ", "!!timestamp ", "<<: ", "? ", "%YAML 1.1\n---\n", "\ufeff", "\x85"]


@st.composite
def text_edits(draw, original: str) -> str:
    """The file's own text with characters inserted, deleted or replaced at random places."""
    text = original
    for _ in range(draw(st.integers(1, 5))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 8)))
        text = text[:i] + draw(st.text(max_size=6) | st.sampled_from(SNIPPETS)) + text[j:]
    return text


# -- manifests -------------------------------------------------------------------------------------------------

@FAST
@given(mutated_yaml(DRY))
def test_mutated_manifests(text):
    with no_hang(10):
        try:
            parse_manifest(text, "m.yaml")
        except ManifestError as exc:
            assert_one_line(str(exc), "m.yaml:")


@FAST
@given(text_edits(DRY_TEXT))
def test_manifest_text_edits(text):
    with no_hang(10):
        try:
            parse_manifest(text, "m.yaml")
        except ManifestError as exc:
            assert_one_line(str(exc), "m.yaml:")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@settings(FAST, max_examples=max(EXAMPLES * 2 // 3, 1))
@given(data=st.binary(max_size=300) | st.builds(lambda t, b, i: (t[:i] + b + t[i:]),
                                                 st.just(DRY_TEXT.encode()), st.binary(min_size=1, max_size=4),
                                                 st.integers(0, len(DRY_TEXT))))
def test_random_bytes_as_a_manifest_file(scratch, data):
    path = scratch / "m.yaml"
    path.write_bytes(data)
    with no_hang(10):
        try:
            load_manifest(path)
        except ManifestError as exc:
            assert_one_line(str(exc), "m.yaml")


def test_dry_run_manifest_still_valid():
    m = parse_manifest(DRY_TEXT, "dry-run.yaml")
    assert isinstance(m, Manifest) and m.emulator.settle_frames == 12


# -- game definitions and notes -----------------------------------------------------------------------------

@FAST
@given(mutated_yaml(GAME) | text_edits(GAME_TEXT))
def test_mutated_game_definitions(text):
    with no_hang(10):
        try:
            parse_game_definition(text, "g.yaml")
        except GameDefinitionError as exc:
            assert_one_line(str(exc), "g.yaml:")


@FAST
@given(mutated_yaml(NOTES) | text_edits(NOTES_TEXT))
def test_mutated_script_notes(text):
    with no_hang(10):
        try:
            parse_notes(text, "n.yaml")
        except NotesError as exc:
            assert_one_line(str(exc), "n.yaml:")


# -- input scripts ------------------------------------------------------------------------------------------

tokens = st.one_of(
    st.sampled_from(ACTIONS), st.sampled_from([a.lower() for a in ACTIONS]), st.text(max_size=8),
    st.builds(lambda a, n: f"{a}*{n}", st.sampled_from(ACTIONS),
              st.integers(-5, 10**15) | st.sampled_from(["", "x", "²", "0", "1e3", "9" * 5001, " 3"])),
)
scripts = st.lists(st.lists(tokens, max_size=6).map(" ".join) | st.just("# comment"), max_size=12).map("\n".join)


@FAST
@given(scripts | st.text(max_size=200) | st.binary(max_size=200))
def test_random_scripts(text):
    with no_hang(10):
        try:
            actions = parse_script(text, "s.txt")
        except ScriptError as exc:
            assert_one_line(str(exc), "s.txt:")
        else:
            assert all(a in ACTIONS for a in actions) and len(actions) <= 1_000_000


# -- agent responses --------------------------------------------------------------------------------------------

VALID_RESPONSE = {
    "reasoning_summary": "walk to the stairs",
    "observed": {"screen": "overworld", "location_guess": "bedroom", "objective_guess": "leave", "certainty": 0.8},
    "memory_read": [],
    "memory_write": [{"kind": "location", "value": "bedroom", "confidence": 0.9, "evidence": "bed visible"}],
    "actions": ["UP", "A"],
}


def json_text(data) -> str:
    return json.dumps(data).replace(json.dumps(HUGE), "9" * 5001)


@st.composite
def mutated_responses(draw) -> str:
    return json_text(mutate(draw, VALID_RESPONSE))


@FAST
@given(st.text(max_size=300) | st.sampled_from(["[" * 100_000, '{"a":' * 50_000, "9" * 5001, "NaN", "null", "{}"])
       | mutated_responses())
def test_random_agent_responses(raw):
    with no_hang(10):
        try:
            response = parse_response(raw, max_actions=4, allowed=frozenset(ACTIONS))
        except ContractError:
            pass
        else:
            assert isinstance(response, AgentResponse)


@pytest.mark.parametrize("bad", [True, "0.8", float("nan"), float("inf"), None])
def test_certainty_must_be_a_finite_number(bad):
    body = copy.deepcopy(VALID_RESPONSE)
    body["observed"]["certainty"] = bad
    with pytest.raises(ContractError, match=r"observed\.certainty"):
        parse_response(json.dumps(body), max_actions=4)


# -- the whole preflight ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def odd_files(tmp_path_factory) -> list[str]:
    tmp = tmp_path_factory.mktemp("odd")
    os.mkfifo(tmp / "fifo")
    (tmp / "dir").mkdir()
    (tmp / "empty").write_bytes(b"")
    (tmp / "random").write_bytes(os.urandom(4096))
    (tmp / "notutf8").write_bytes(b"\xff\xfe\x00")
    return [str(tmp / n) for n in ("fifo", "dir", "empty", "random", "notutf8")] + [
        "/dev/zero", "/dev/null", "nope", "bundled:nope", "bundled:parcel-quest.gb", "bundled:parcel-quest.state",
        "bundled:walkthrough.txt", "bundled:parcel-quest.yaml", "~no-such-user-oakwatch/x", "/"]


@settings(deadline=None, max_examples=max(EXAMPLES // 5, 1), suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_preflight_on_mutated_manifests(scratch, odd_files, data):
    manifest = copy.deepcopy(DRY)
    section = data.draw(st.sampled_from(["game", "conditions", "emulator", "budgets", "trials", "agent"]))
    if data.draw(st.booleans()):  # point a file reference somewhere odd
        ref = data.draw(st.sampled_from([("game", "rom"), ("state", "state"), ("game", "definition"),
                                         ("cond", "script"), ("cond", "script_notes")]))
        target = {"game": manifest["game"], "state": manifest["game"]["start_states"]["pyboy"]}.get(
            ref[0], manifest["conditions"][0])
        target[ref[1]] = data.draw(st.sampled_from(odd_files))
    else:
        manifest[section] = mutate(data.draw, manifest[section], max_steps=2)
    path = scratch / "pm.yaml"
    path.write_text(dump(manifest), encoding="utf-8")
    out = scratch / "never-written"
    with no_hang(60):  # a refusal is quick; a valid manifest boots PyBoy once (~1 s)
        try:
            prepare(path, out)
        except PreflightError as exc:
            message = str(exc)
            assert message and "\n" not in message and message.isprintable(), repr(message)
            assert "/" in message, message  # names a file: every path is absolute by now
    assert not out.exists()
