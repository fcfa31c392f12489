"""Dated price schedules (assets/pricing/*.yaml): read, checked against the manifest's SHA-256."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from engine.providers.pricing import Price
from sessions.preflight.yamlfile import parse_yaml_model

Dollars = Annotated[float, Field(ge=0, le=10_000)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class ModelPrice(_Strict):
    input: Dollars
    cached_input: Dollars
    cache_write: Dollars
    output: Dollars
    reasoning: Dollars


class PriceSchedule(_Strict):
    date: Annotated[str, Field(pattern=r"^\d{4}-\d{2}-\d{2}$")]
    currency: Annotated[str, Field(pattern=r"^USD$")]
    per_tokens: Annotated[int, Field(ge=1_000_000, le=1_000_000)]
    models: dict[Annotated[str, Field(min_length=1, max_length=200)], ModelPrice]


class PricingError(ValueError):
    pass


def copy_path(sha256: str) -> str:
    """Where the evidence folder (and the export) keeps the bytes of the schedule with this SHA-256:
    named by its hash, so two conditions naming one schedule share a copy and none can collide."""
    return f"pricing/{sha256}.yaml"


def load_prices(path: Path, expected_sha256: str) -> tuple[PriceSchedule, dict[str, Price]]:
    schedule, table, _data = read_prices(path, expected_sha256)
    return schedule, table


def read_prices(path: Path, expected_sha256: str) -> tuple[PriceSchedule, dict[str, Price], bytes]:
    """The schedule, its prices by model, and its bytes exactly as hashed (kept in the evidence)."""
    from engine.text import decode_utf8
    from sessions.preflight.safe_read import MAX_TEXT_BYTES, InputFileError, read_input

    try:
        data = read_input(path, what="price schedule", max_bytes=MAX_TEXT_BYTES)
    except InputFileError as exc:
        raise PricingError(str(exc)) from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected_sha256:
        raise PricingError(f"price schedule {path} has SHA-256 {digest}, but the manifest names "
                           f"{expected_sha256}: refusing other prices")
    try:
        schedule = parse_yaml_model(decode_utf8(data, str(path)), str(path), PriceSchedule, PricingError,
                                    "a price schedule")
    except ValueError as exc:
        raise PricingError(str(exc)) from None
    return schedule, {model: Price(**p.model_dump()) for model, p in schedule.models.items()}, data
