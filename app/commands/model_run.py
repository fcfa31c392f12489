"""Quick overrides of a manifest from the command line, written into the manifest that is frozen
with the run like any other setting.

* `oakwatch run --provider P --model ID [--base-url URL]`: a model plays. The manifest (the bundled
  dry-run unless one is given) keeps its game, emulator, agent contract and budgets; its conditions
  become one model condition with the given provider, model and address, priced from the bundled
  dated price schedule.
* `oakwatch run MANIFEST --base-url URL` (without --provider): every condition of the manifest on a
  provider that takes a base URL (openai-compatible) is pointed at URL; e.g. the bundled demo at
  an `oakwatch demo-server` on another port.
* `oakwatch run --emulator pyboy|mgba`: the run uses that emulator backend (emulator.name), with
  its start state from game.start_states and its own installed version.

They can be given together: one temporary manifest carries them all. The user never wrote that
temporary file, so no message may cite it: the overridden manifest is validated here, and every
problem names what the user gave instead, through an `Origin`: the option that set the field
(`--base-url`, `--model`, `--emulator`, `--force`) or the field's line in their own manifest (the
bundled dry-run's when they gave none). The preflight names fields through the same Origin.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import ValidationError

from engine.text import decode_utf8, printable
from sessions.preflight.assets import ASSETS, BUNDLED_PREFIX, DEFAULT_MANIFEST, resolve

PRICES = "prices-2026-11-30.yaml"  # assets/pricing/


class ModelRunError(ValueError):
    pass


@dataclass(frozen=True)
class Origin:
    """Where the user set each field of a manifest built for them: an option, or their own file."""

    source: Path  # the user's manifest, or the bundled dry-run
    options: dict[str, str] = field(default_factory=dict)  # field path (or a prefix of it) -> the option

    @property
    def name(self) -> str:
        return printable(str(self.source))

    def option(self, dotted: str) -> str | None:
        """The option that set the field `dotted` (e.g. conditions.0.base_url), by its longest prefix."""
        parts = dotted.split(".") if dotted else []
        for n in range(len(parts), 0, -1):
            label = self.options.get(".".join(parts[:n]))
            if label is not None:
                return label
        return None

    def at(self, dotted: str) -> str:
        """`--option VALUE`, or `FILE:LINE: field` in the user's own manifest."""
        from sessions.preflight.yamlfile import field_line

        label = self.option(dotted)
        if label is not None:
            return label
        line = field_line(self.source, dotted)
        return f"{self.name}:{line}: {dotted}" if line else f"{self.name}: {dotted}"


def _option(name: str, value: str | None) -> str:
    return printable(f"{name} {value}" if value is not None else name)


def _model_condition(provider: str | None = None, model: str | None = None, base_url: str | None = None,
                     api: str | None = None) -> tuple[dict, dict[str, str]]:
    """The model condition, and which option set which of its fields. The combinations the
    provider catalog refuses are refused here, in the options' own terms."""
    from engine.providers import PROVIDERS

    if provider is None or not model:
        raise ModelRunError("--provider and --model go together (e.g. --provider openai --model gpt-5.4)")
    entry = PROVIDERS.get(provider)
    if entry is None:
        raise ModelRunError(f"--provider {printable(provider)}: no such provider (there are: {', '.join(PROVIDERS)})")
    if api is not None and api not in entry.apis:
        raise ModelRunError(f"--api {printable(api)}: provider {provider} has no {printable(api)} API "
                            f"(it has: {', '.join(entry.apis)})")
    if base_url is None and entry.needs_base_url:
        raise ModelRunError(f"--provider {provider} needs --base-url URL (the server's /v1 address, "
                            f"e.g. http://127.0.0.1:8000/v1)")
    if base_url is not None and not re.match(r"^https?://", base_url):
        raise ModelRunError(f"--base-url {printable(base_url)}: give the server's http:// or https:// address "
                            f"(e.g. http://127.0.0.1:8000/v1)")
    prices = ASSETS / "pricing" / PRICES
    condition = {"id": "model", "policy": "model", "provider": provider, "model": model,
                 "memory_policy": "persistent",
                 "pricing": {"file": f"{BUNDLED_PREFIX}{PRICES}",
                             "sha256": hashlib.sha256(prices.read_bytes()).hexdigest()}}
    if base_url is not None:
        condition["base_url"] = base_url
    if api is not None:
        condition["api"] = api
    options = {"conditions": _option("--provider", provider) + " " + _option("--model", model),
               "conditions.0.provider": _option("--provider", provider),
               "conditions.0.model": _option("--model", model),
               "conditions.0.base_url": _option("--base-url", base_url),
               "conditions.0.api": _option("--api", api)}
    return condition, options


def _refs(data: dict) -> Iterator[tuple[dict, str, str]]:
    """The file references the copy must anchor: (section, key, field path)."""
    game = data.get("game") if isinstance(data.get("game"), dict) else {}
    for key in ("rom", "definition"):
        yield game, key, f"game.{key}"
    states = game.get("start_states")
    if isinstance(states, dict):
        for name, entry in states.items():
            if isinstance(entry, dict):
                yield entry, "state", f"game.start_states.{name}.state"
    conditions = data.get("conditions") if isinstance(data.get("conditions"), list) else []
    for i, c in enumerate(conditions):
        if isinstance(c, dict):
            for key in ("script", "script_notes", "replay_trace"):
                yield c, key, f"conditions.{i}.{key}"


def _read(source: Path) -> tuple[object, dict]:
    """The user's manifest as plain data with the line of every field, read as strictly as any manifest."""
    from sessions.preflight.safe_read import MAX_TEXT_BYTES, InputFileError, read_input
    from sessions.preflight.yamlfile import load_yaml_text

    try:
        raw = read_input(source, what="manifest", max_bytes=MAX_TEXT_BYTES)
    except InputFileError as exc:
        raise ModelRunError(f"{printable(str(source))}: cannot read manifest ({exc.reason})") from None
    try:
        return load_yaml_text(decode_utf8(raw, str(source)), str(source))
    except ValueError as exc:
        raise ModelRunError(str(exc)) from None


def _point_at(data: dict, source: Path, base_url: str) -> list[int]:
    """`--base-url` alone: repoint the manifest's own base-URL conditions; their indexes."""
    from engine.providers import PROVIDERS

    conditions = data.get("conditions") if isinstance(data.get("conditions"), list) else []
    pointed = [i for i, c in enumerate(conditions) if isinstance(c, dict) and c.get("policy") == "model"
               and getattr(PROVIDERS.get(str(c.get("provider"))), "needs_base_url", False)]
    if not pointed:
        raise ModelRunError(f"--base-url: {printable(str(source))} has no condition on a provider that takes a "
                            f"base URL (openai-compatible); with --provider and --model it makes one")
    for i in pointed:
        conditions[i]["base_url"] = base_url
    return pointed


@contextmanager
def built_manifest(manifest: Path | None, *, model: dict | None = None, emulator: str | None = None,
                   force: bool = False, base_url: str | None = None,
                   goal: str | None = None) -> Iterator[tuple[Path, Origin]]:
    """A temporary copy of `manifest` (default: the bundled dry-run) with the overrides applied, and
    the Origin that names its fields in the user's terms. `model`: keyword arguments of the model
    condition (provider, model, base_url, api). `base_url` alone: the new address of the manifest's
    own base-URL conditions."""
    from sessions.preflight.manifest import Manifest
    from sessions.preflight.yamlfile import describe_validation

    condition, options = _model_condition(**model) if model is not None else (None, {})
    source = manifest or DEFAULT_MANIFEST
    data, lines = _read(source)
    if not isinstance(data, dict):
        raise ModelRunError(f"{printable(str(source))}:1: a manifest must be a YAML mapping (key: value lines)")
    if condition is not None:
        data["conditions"] = [condition]
        data["experiment_id"] = f"{data.get('experiment_id', 'experiment')}-{condition['provider']}"[:128]
        data.setdefault("trials", {})
        if isinstance(data["trials"], dict):
            data["trials"]["per_condition"] = 1
    if base_url is not None:
        for i in _point_at(data, source, base_url):
            options[f"conditions.{i}.base_url"] = _option("--base-url", base_url)
    if emulator is not None:
        section = data.get("emulator")
        if not isinstance(section, dict):
            raise ModelRunError(f"{printable(str(source))}: no emulator section for --emulator {emulator} to override")
        options["emulator.name"] = _option("--emulator", emulator)
        if section.get("name") != emulator:
            section["name"] = emulator
            section.pop("version", None)  # the installed version of the new backend is recorded
            section.pop("config_sha256", None)  # computed again for the new backend
    if force:
        if not isinstance(data.get("game"), dict):
            raise ModelRunError(f"{printable(str(source))}: no game section for --force to mark")
        data["game"]["allow_unidentified_rom"] = True  # frozen with the run: every trial records it
        options["game.allow_unidentified_rom"] = "--force"
    if goal is not None:  # seed 001's goal benchmark (engine.games.goals): frozen with the run like --force
        if not isinstance(data.get("game"), dict):
            raise ModelRunError(f"{printable(str(source))}: no game section for --goal to set")
        data["game"]["goal"] = goal
        options["game.goal"] = _option("--goal", goal)
        if isinstance(data.get("agent"), dict):  # the agent is told the goal's instruction, not the ladder's
            data["agent"].pop("instruction", None)
    origin = Origin(source, options)
    try:  # every problem here, named where the user set it
        Manifest.model_validate(data)
    except ValidationError as exc:
        raise ModelRunError(describe_validation(exc, str(source), data, lines, Manifest,
                                                lambda path: origin.option(".".join(map(str, path))))) from None
    base = source.resolve().parent
    for section, key, dotted in _refs(data):  # the copy lives elsewhere: anchor relative references
        ref = section.get(key)
        if isinstance(ref, str) and not ref.startswith(BUNDLED_PREFIX):
            try:
                section[key] = str(resolve(ref, base).resolve())
            except (OSError, ValueError, RuntimeError) as exc:  # `~nosuchuser/...`
                raise ModelRunError(f"{origin.at(dotted)}: cannot use path {printable(ref)} "
                                    f"({printable(str(exc))})") from None
    with tempfile.TemporaryDirectory(prefix="oakwatch-run-") as tmp:
        path = Path(tmp) / "manifest.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        yield path, origin


@contextmanager
def overridden_manifest(manifest: Path | None, *, model: dict | None = None,
                        emulator: str | None = None, force: bool = False) -> Iterator[Path]:
    """`built_manifest`'s temporary copy alone (for callers that word no errors)."""
    with built_manifest(manifest, model=model, emulator=emulator, force=force) as (path, _origin):
        yield path


@contextmanager
def model_manifest(manifest: Path | None, provider: str | None, model: str | None, base_url: str | None,
                   api: str | None, emulator: str | None = None) -> Iterator[Path]:
    with overridden_manifest(manifest, model={"provider": provider, "model": model, "base_url": base_url,
                                              "api": api}, emulator=emulator) as path:
        yield path
