"""`oakwatch run --provider P --model ID [--base-url URL]`: a model plays the bundled experiment.

The manifest (the bundled dry-run unless one is given) keeps its game, emulator, agent contract
and budgets; its conditions become one model condition with the given provider, model and
address, priced from the bundled dated price schedule. The overrides are written into the
manifest that is frozen with the run, like any other setting.
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


@contextmanager
def model_manifest(manifest: Path | None, provider: str | None, model: str | None, base_url: str | None,
                   api: str | None) -> Iterator[Path]:
    if provider is None or not model:
        raise ModelRunError("--provider and --model go together (e.g. --provider openai --model gpt-5.4)")
    source = manifest or DEFAULT_MANIFEST
    try:
        data = yaml.safe_load(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ModelRunError(f"cannot read manifest {source} ({exc})") from None
    if not isinstance(data, dict):
        raise ModelRunError(f"{source}: a manifest must be a YAML mapping")
    base = source.resolve().parent
    game = data.get("game") if isinstance(data.get("game"), dict) else {}
    for key in ("rom", "initial_state", "definition"):  # the copy lives elsewhere: anchor its paths
        ref = game.get(key)
        if isinstance(ref, str) and not ref.startswith(BUNDLED_PREFIX):
            game[key] = str(resolve(ref, base).resolve())
    prices = ASSETS / "pricing" / PRICES
    condition = {"id": "model", "policy": "model", "provider": provider, "model": model,
                 "memory_policy": "persistent",
                 "pricing": {"file": f"{BUNDLED_PREFIX}{PRICES}",
                             "sha256": hashlib.sha256(prices.read_bytes()).hexdigest()}}
    if base_url is not None:
        condition["base_url"] = base_url
    if api is not None:
        condition["api"] = api
    data["conditions"] = [condition]
    data["experiment_id"] = f"{data.get('experiment_id', 'experiment')}-{provider}"[:128]
    data.setdefault("trials", {})
    if isinstance(data["trials"], dict):
        data["trials"]["per_condition"] = 1
    with tempfile.TemporaryDirectory(prefix="oakwatch-model-") as tmp:
        path = Path(tmp) / "manifest.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        yield path
