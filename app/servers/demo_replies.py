"""The demo server's players: what `oakwatch demo-server` answers a chat completion with.

Each reply is what a model held to the harness's strict response format would send: one JSON
object with every property of the schema in the request's `response_format` (a memory write's
optional fields as null), actions only from the manifest's allowed list and never more than the
prompt allows. Nothing is remembered between requests: what a reply needs comes from the request
itself, so any number of trials can play against one server at once.

- "scripted" plays the bundled cartridge's walkthrough (assets/cartridge/walkthrough.txt) with its
  notes (walkthrough-notes.yaml: observations and memory writes): decision N of a trial (the
  prompt's "Decision N.") presses the walkthrough's next `at most K` presses from (N - 1) x K on, so
  a trial that takes every press reaches M8.
- "random" presses 1 to K random allowed buttons from a generator seeded with the server's seed and
  the request's number: trials differ from each other, and one server's stream of replies is the
  same on every start (the order trials ask in decides which trial gets which).

The model id asked for picks the player (`demo-scripted`, `demo-random`); any other id gets the
server's default. Usage is estimated the way providers count (about four characters a token, an
image by 512-pixel tiles), so a bigger prompt costs more and the bundled demo prices give a cost.
"""

from __future__ import annotations

import base64
import json
import math
import random
import re
import struct
from functools import cached_property

from app.servers.chat_server import usage
from engine.loop.script import parse_script
from sessions.preflight.assets import ASSETS
from sessions.preflight.notes import load_notes

MODES = ("scripted", "random")
MODELS = {"demo-scripted": "scripted", "demo-random": "random"}
UNKNOWN = {"screen": "unknown", "location_guess": "unknown", "objective_guess": "", "certainty": 0.0}
WRITE_FIELDS = ("kind", "value", "confidence", "evidence", "subject", "predicate", "supersedes", "status")
MAX_WRITES = 8  # the contract's limit per response

_DECISION = re.compile(r"^Decision (\d+)\. Press at most (\d+) button\(s\) this turn, from: ([A-Z, ]+)\.", re.M)


def _user_text(body: dict) -> str:
    """The text of the last user message (the model policy's prompt)."""
    for message in reversed(body.get("messages") or []):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def _schema_actions(body: dict) -> list[str]:
    """The action enumeration of the response format's schema (empty if there is none)."""
    try:
        items = body["response_format"]["json_schema"]["schema"]["properties"]["actions"]["items"]
        return [a for a in items["enum"] if isinstance(a, str)]
    except (KeyError, TypeError):
        return []


def _image_tokens(body: dict) -> int:
    """Tokens for the attached screens: 85 + 170 per 512-pixel tile (OpenAI's high-detail rule)."""
    total = 0
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else []:
            url = part.get("image_url", {}).get("url", "") if isinstance(part, dict) else ""
            if not isinstance(url, str) or not url.startswith("data:image/png;base64,"):
                continue
            try:
                head = base64.b64decode(url.split(",", 1)[1][:44])  # signature + IHDR: 33 bytes
                width, height = struct.unpack(">II", head[16:24])
            except (ValueError, struct.error):
                width = height = 512
            total += 85 + 170 * math.ceil(width / 512) * math.ceil(height / 512)
    return total


def estimated_usage(body: dict, content: str) -> dict:
    text = sum(len(m.get("content")) for m in body.get("messages") or []
               if isinstance(m, dict) and isinstance(m.get("content"), str))
    text += len(_user_text(body))
    return usage(math.ceil(text / 4) + _image_tokens(body), max(1, math.ceil(len(content) / 4)))


def _write(item: dict) -> dict:
    """A memory write with every field the strict schema requires."""
    full = {name: item.get(name) for name in WRITE_FIELDS}
    full["status"] = full["status"] or "active"
    return full


def response_json(summary: str, observed: dict, reads: list[str], writes: list[dict], actions: list[str]) -> str:
    return json.dumps({"reasoning_summary": summary, "observed": observed, "memory_read": reads,
                       "memory_write": [_write(w) for w in writes][:MAX_WRITES], "actions": actions})


class DemoReplies:
    """The replies of `oakwatch demo-server` (a `chat_server.Replies`)."""

    models = tuple(MODELS)

    def __init__(self, default: str = "scripted", seed: int = 0):
        if default not in MODES:
            raise ValueError(f"replies must be one of {', '.join(MODES)}, not {default!r}")
        self.default = default
        self.seed = seed

    @cached_property
    def walkthrough(self) -> list[str]:
        return parse_script((ASSETS / "cartridge" / "walkthrough.txt").read_text(encoding="utf-8"),
                            "walkthrough.txt")

    @cached_property
    def notes(self) -> dict[int, dict]:
        return load_notes(ASSETS / "cartridge" / "walkthrough-notes.yaml")

    def mode(self, model: object) -> str:
        return MODELS.get(model, self.default) if isinstance(model, str) else self.default

    def __call__(self, body: dict, n: int) -> tuple[str, dict]:
        decision, most, allowed = 1, 1, _schema_actions(body)
        found = _DECISION.search(_user_text(body))
        if found:
            decision, most = int(found.group(1)), max(1, int(found.group(2)))
            listed = [a.strip() for a in found.group(3).split(",") if a.strip()]
            allowed = [a for a in listed if a in allowed] if allowed else listed
        allowed = allowed or ["A"]
        if self.mode(body.get("model")) == "random":
            content = self._random(n, most, allowed)
        else:
            content = self._scripted(decision, most, allowed)
        return content, estimated_usage(body, content)

    def _random(self, n: int, most: int, allowed: list[str]) -> str:
        rng = random.Random(f"oakwatch-demo:{self.seed}:{n}")
        actions = [rng.choice(allowed) for _ in range(rng.randint(1, most))]
        return response_json(f"Demo server (random): pressing {' '.join(actions)} at random.", UNKNOWN, [], [],
                             actions)

    def _scripted(self, decision: int, most: int, allowed: list[str]) -> str:
        """The walkthrough's presses for this decision; its notes keyed 1..len by press number."""
        start = (decision - 1) * most
        chunk = [a for a in self.walkthrough[start:start + most] if a in allowed]
        keys = range(start + 1, start + len(chunk) + 1)
        seen = [k for k in self.notes if k <= start + 1 and "observed" in self.notes[k]]
        observed = self.notes[max(seen)]["observed"] if seen else UNKNOWN
        reads = [r for k in keys for r in self.notes.get(k, {}).get("memory_read", [])]
        writes = [w for k in keys for w in self.notes.get(k, {}).get("memory_write", [])]
        if not chunk:  # past the end of the walkthrough: wait
            chunk = ["NOOP"] if "NOOP" in allowed else [allowed[0]]
            summary = "Demo server (scripted): the walkthrough is over; waiting."
        else:
            summary = (f"Demo server (scripted): walkthrough presses {start + 1}-{start + len(chunk)} "
                       f"of {len(self.walkthrough)}.")
        return response_json(summary, observed, reads, writes, chunk)
