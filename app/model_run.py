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

They can be given together: one temporary manifest carries them all.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from sessions.assets import ASSETS, BUNDLED_PREFIX, DEFAULT_MANIFEST, resolve

PRICES = "prices-2026-11-30.yaml"  # assets/pricing/


class ModelRunError(ValueError):
    pass


def _model_condition(provider: str | None = None, model: str | None = None, base_url: str | None = None,
                     api: str | None = None) -> dict:
    if provider is None or not model:
        raise ModelRunError("--provider and --model go together (e.g. --provider openai --model gpt-5.4)")
    prices = ASSETS / "pricing" / PRICES
    condition = {"id": "model", "policy": "model", "provider": provider, "model": model,
                 "memory_policy": "persistent",
                 "pricing": {"file": f"{BUNDLED_PREFIX}{PRICES}",
                             "sha256": hashlib.sha256(prices.read_bytes()).hexdigest()}}
    if base_url is not None:
        condition["base_url"] = base_url
    if api is not None:
        condition["api"] = api
    return condition


def _anchor(data: dict, base: Path) -> None:
    """The copy lives elsewhere: anchor the game's relative file references to absolute paths."""
    game = data.get("game") if isinstance(data.get("game"), dict) else {}
    refs = [(game, key) for key in ("rom", "definition")]
    states = game.get("start_states")
    if isinstance(states, dict):
        refs += [(entry, "state") for entry in states.values() if isinstance(entry, dict)]
    conditions = data.get("conditions") if isinstance(data.get("conditions"), list) else []
    refs += [(c, key) for c in conditions if isinstance(c, dict) for key in ("script", "script_notes", "replay_trace")]
    for section, key in refs:
        ref = section.get(key)
        if isinstance(ref, str) and not ref.startswith(BUNDLED_PREFIX):
            section[key] = str(resolve(ref, base).resolve())


def _point_at(data: dict, source: Path, base_url: str) -> None:
    from engine.providers import PROVIDERS

    conditions = data.get("conditions") if isinstance(data.get("conditions"), list) else []
    pointed = [c for c in conditions if isinstance(c, dict) and c.get("policy") == "model"
               and getattr(PROVIDERS.get(str(c.get("provider"))), "needs_base_url", False)]
    if not pointed:
        raise ModelRunError(f"--base-url: {source} has no condition on a provider that takes a base URL "
                            f"(openai-compatible); with --provider and --model it makes one")
    for condition in pointed:
        condition["base_url"] = base_url


@contextmanager
def overridden_manifest(manifest: Path | None, *, model: dict | None = None,
                        emulator: str | None = None, force: bool = False,
                        base_url: str | None = None) -> Iterator[Path]:
    """A temporary copy of `manifest` (default: the bundled dry-run) with the overrides applied.
    `model`: keyword arguments of the model condition (provider, model, base_url, api).
    `base_url`: the new address of the manifest's own base-URL conditions."""
    condition = _model_condition(**model) if model is not None else None
    source = manifest or DEFAULT_MANIFEST
    try:
        data = yaml.safe_load(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ModelRunError(f"cannot read manifest {source} ({exc})") from None
    if not isinstance(data, dict):
        raise ModelRunError(f"{source}: a manifest must be a YAML mapping")
    _anchor(data, source.resolve().parent)
    if condition is not None:
        data["conditions"] = [condition]
        data["experiment_id"] = f"{data.get('experiment_id', 'experiment')}-{condition['provider']}"[:128]
        data.setdefault("trials", {})
        if isinstance(data["trials"], dict):
            data["trials"]["per_condition"] = 1
    if base_url is not None:
        _point_at(data, source, base_url)
    if emulator is not None:
        section = data.get("emulator")
        if not isinstance(section, dict):
            raise ModelRunError(f"{source}: no emulator section to override")
        if section.get("name") != emulator:
            section["name"] = emulator
            section.pop("version", None)  # the installed version of the new backend is recorded
            section.pop("config_sha256", None)  # computed again for the new backend
    if force:
        if not isinstance(data.get("game"), dict):
            raise ModelRunError(f"{source}: no game section")
        data["game"]["allow_unidentified_rom"] = True  # frozen with the run: every trial records it
    with tempfile.TemporaryDirectory(prefix="oakwatch-run-") as tmp:
        path = Path(tmp) / "manifest.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        yield path


@contextmanager
def model_manifest(manifest: Path | None, provider: str | None, model: str | None, base_url: str | None,
                   api: str | None, emulator: str | None = None) -> Iterator[Path]:
    with overridden_manifest(manifest, model={"provider": provider, "model": model, "base_url": base_url,
                                              "api": api}, emulator=emulator) as path:
        yield path
