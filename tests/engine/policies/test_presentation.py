"""Presentations (issue 32.3): the bytes each wire format receives for the current screen alone, with
screenshot recall and before-after, checked on the fake provider server; and the manifest's refusals."""

from __future__ import annotations

import asyncio
import base64
import hashlib

import numpy as np
import pytest

from engine.loop.contract import response_json_schema
from engine.policies.model import ModelPolicy, canonical, screen_png
from engine.policies.policy import Observation, TransportRetry
from engine.policies.presentation import PresentationRules, ScreenHistory
from engine.providers import make_adapter
from engine.providers.base import Sampling
from tests.fakes.provider_server import FakeProviderServer

APIS = [("anthropic", "messages"), ("openai", "chat"), ("openai", "responses")]


def _frame(shade: int) -> np.ndarray:
    return np.full((144, 160, 3), shade, np.uint8)


def _obs(decision: int, shade: int) -> Observation:
    return Observation(decision, _frame(shade), f"{shade:064x}", (), (), None, (), 4, ("UP", "A"))


def _images(provider: str, api: str, body: dict) -> list[bytes]:
    """The PNGs of the request's last user turn, in order, decoded from the wire format."""
    content = (body["messages"] if api != "responses" else body["input"])[-1]["content"]
    out = []
    for part in content:
        if part["type"] == "image":
            out.append(base64.b64decode(part["source"]["data"]))
        elif part["type"] in ("image_url", "input_image"):
            url = part["image_url"]["url"] if part["type"] == "image_url" else part["image_url"]
            out.append(base64.b64decode(url.split(",", 1)[1]))
    return out


def _play(provider: str, api: str, rules: PresentationRules | None, shades: list[int], retry_at: int | None = None):
    """Decisions 1..n on the fake server (a retry of `retry_at` asks twice); the bodies received."""
    with FakeProviderServer() as server:
        adapter = make_adapter(provider, api, api_key="k-test", base_url=server.base_url(api))
        policy = ModelPolicy(adapter, model="m", system="Play.", schema=response_json_schema(4), sampling=Sampling(),
                             image_scale=1, transport=TransportRetry(), price=None)
        if rules is not None:
            policy.screens = ScreenHistory(rules, lambda f: screen_png(f, 1))
        shas = []

        async def run():
            for i, shade in enumerate(shades, start=1):
                for _ in range(2 if i == retry_at else 1):
                    shas.append((await policy.decide(_obs(i, shade))).prompt_sha256)
            await policy.aclose()

        asyncio.run(run())
        bodies = [r.json for r in server.state.requests]
        raw = [r.body for r in server.state.requests]
    return bodies, raw, shas


@pytest.mark.parametrize(("provider", "api"), APIS)
def test_the_default_sends_the_current_screen_alone(provider, api):
    bodies, _, _ = _play(provider, api, None, [10, 20, 30])
    assert [_images(provider, api, b) for b in bodies] == [[screen_png(_frame(s), 1)] for s in (10, 20, 30)]


@pytest.mark.parametrize(("provider", "api"), APIS)
def test_recall_sends_the_previous_k_screens_oldest_first_then_the_current(provider, api):
    bodies, raw, shas = _play(provider, api, PresentationRules("current", 2), [10, 20, 30, 40], retry_at=3)
    png = {s: screen_png(_frame(s), 1) for s in (10, 20, 30, 40)}
    # decision 3 is asked twice (a retry adds no screen of its own)
    assert [_images(provider, api, b) for b in bodies] == [
        [png[10]], [png[10], png[20]], [png[10], png[20], png[30]], [png[10], png[20], png[30]],
        [png[20], png[30], png[40]]]
    assert b"Your screenshot at decision 2:" in raw[-1] and b"up to 2" in raw[-1]
    # the prompt hash is the canonical body's: the earlier screens are in it
    assert shas[-1] == hashlib.sha256(canonical(bodies[-1])).hexdigest()


@pytest.mark.parametrize(("provider", "api"), APIS)
def test_before_after_sends_the_screen_before_the_last_actions_and_after(provider, api):
    bodies, raw, shas = _play(provider, api, PresentationRules("before-after"), [10, 20, 30])
    png = {s: screen_png(_frame(s), 1) for s in (10, 20, 30)}
    assert [_images(provider, api, b) for b in bodies] == [[png[10]], [png[10], png[20]], [png[20], png[30]]]
    assert b"The screen before your last actions (decision 2):" in raw[-1]
    _, _, recall = _play(provider, api, PresentationRules("current", 1), [10, 20, 30])
    assert shas[-1] != recall[-1]  # the same pixels, another presentation: another prompt


# -- the manifest: frozen per condition, refused in one line -----------------------------------------

def _manifest_text(extra: str, decisions: int = 50) -> str:
    from sessions.preflight.assets import ASSETS

    text = (ASSETS / "experiments" / "presentations.yaml").read_text(encoding="utf-8")
    text = text.replace("model_decisions: 50", f"model_decisions: {decisions}")
    assert "- id: current\n" in text
    return text.replace("- id: current\n", f"- id: current\n{extra}", 1)


@pytest.mark.parametrize(("extra", "decisions", "says"), [
    ("  screenshot_recall: 0\n", 50, "screenshot_recall"),
    ("  screenshot_recall: 50\n", 50, "at most 49"),
    ("  max_images: 1\n  screenshot_recall: 2\n", 50, "sends 3 images a request"),
    ("  max_images: 1\n  presentation: before-after\n", 50, "sends 2 images a request"),
    ("  presentation: before-after\n  screenshot_recall: 1\n", 50, "goes with presentation current"),
])
def test_a_presentation_that_cannot_be_sent_is_refused(extra, decisions, says):
    from sessions.preflight.manifest import ManifestError, parse_manifest

    with pytest.raises(ManifestError) as info:
        parse_manifest(_manifest_text(extra, decisions), "x.yaml")
    assert says in str(info.value) and "\n" not in str(info.value)


def test_the_bundled_manifest_pits_the_presentations_and_hashes_them():
    from sessions.preflight.assets import ASSETS
    from sessions.preflight.manifest import load_manifest, parse_manifest

    m = load_manifest(ASSETS / "experiments" / "presentations.yaml")
    rules = {c.id: c.presentation_rules() for c in m.conditions}
    assert {r.presentation for r in rules.values()} == {"current", "before-after"}
    assert any(r.recall for r in rules.values())
    changed = parse_manifest(_manifest_text("  screenshot_recall: 3\n"), "x.yaml")
    assert changed.sha256() != m.sha256()
