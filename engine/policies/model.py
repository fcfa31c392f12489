"""The model policy: a language model plays, through one provider adapter (engine/providers/).

It owns what every provider shares: the prompt (built from the Observation alone, so nothing
the hidden-state probe reads can reach a request but, on the structured track, the game
definition's allowlist of it: engine.games.tracks), the screen as a lossless PNG enlarged by the
manifest's whole factor, the request's hashes, the call and its latency, and the cost (the
provider's where it reports one, else derived from the dated price schedule and labelled so,
else unknown). Retries are the trial loop's: a content fault comes back as text the contract
rejects; a transport fault is raised (ProviderError) for the loop to log, charge and retry.
"""

from __future__ import annotations

import hashlib
import json
import time

import numpy as np

from engine.emulators.png import encode_png, enlarged
from engine.loop.context import Conversation
from engine.loop.pricing import Price, derived_cost
from engine.loop.records import Usage
from engine.policies.policy import Observation, PolicyReply, ProviderFailure, TransportRetry
from engine.policies.presentation import ScreenHistory
from engine.providers.base import CallGate, ModelReply, ModelRequest, ProviderAdapter, Sampling


def screen_png(frame: np.ndarray, scale: int) -> bytes:
    """The frame as a standard PNG, each pixel a scale x scale block (lossless)."""
    return encode_png(enlarged(frame, scale))


def prompt_text(obs: Observation, structured: dict | None = None, track: str = "structured",
                screens: str = "The current screen is attached.") -> str:
    """The user turn: what the agent may see besides the screen (the information contract).
    `structured`: the track's view as sent (default: the observation's own); `screens`: what the
    presentation attached (engine.policies.presentation)."""
    structured = obs.structured if structured is None else structured
    lines = [
        f"Decision {obs.decision_id}. Press at most {obs.max_actions} button(s) this turn, from: "
        f"{', '.join(obs.allowed_actions)}.",
        "Your recent actions, oldest first: " + (", ".join(obs.recent_actions) or "none yet") + ".",
    ]
    if obs.recent_observations:
        lines.append("Your recent observations, oldest first:")
        lines += [json.dumps(o, sort_keys=True, ensure_ascii=False) for o in obs.recent_observations]
    lines.append(f"Your current objective: {obs.current_objective or 'none recorded yet'}.")
    if obs.memory:
        lines.append("Facts from your memory (contradicted ones are marked; resolve them):")
        lines += [json.dumps(f, sort_keys=True, ensure_ascii=False) for f in obs.memory]
    else:
        lines.append("Facts from your memory: none.")
    if obs.refused_writes:
        lines.append("Your memory refused these writes from your last turn:")
        lines += obs.refused_writes
    if obs.retry_feedback:
        lines.append(obs.retry_feedback)
    if structured is not None:  # a structured or gameplay track only: the visual track's prompt is unchanged
        lines.append(f"The game's state as read for you ({track} track):")
        lines.append(json.dumps(structured, sort_keys=True, ensure_ascii=False))
    lines.append(f"{screens} Answer with the JSON object only.")
    return "\n".join(lines)


def canonical(body: dict) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


class ModelPolicy:
    name = "model"
    paid = True

    def __init__(self, adapter: ProviderAdapter, *, model: str, system: str, schema: dict, sampling: Sampling,
                 image_scale: int, transport: TransportRetry, price: Price | None):
        self.adapter = adapter
        self.provider, self.api = adapter.provider, adapter.api
        self.model_id = model  # asked for; each reply names the model that answered
        self.system = system
        self.schema = schema
        self.sampling = sampling
        self.image_scale = image_scale
        self.transport = transport
        self.price = price
        self._schema_bytes = canonical(schema)
        self.gate: CallGate | None = None  # the run's shared limits, set by the runner
        self.context: Conversation | None = None  # bounded context (engine.loop.context), set by the factory
        self.track = "structured"  # the manifest's agent.information_track, named in the prompt (set by the factory)
        self.screens: ScreenHistory | None = None  # a presentation with earlier screens (set by the factory)
        self.shortcuts_note: str | None = None  # the permitted shortcuts, said in every prompt (set by the factory)

    def request(self, obs: Observation) -> ModelRequest:
        structured = obs.structured
        if self.context is not None and structured is not None:  # a segment's party updates as changes
            structured = self.context.party_view(structured)
        earlier: tuple[tuple[str, bytes], ...] = ()
        if self.screens is not None:
            earlier, note = self.screens.earlier(obs.decision_id, obs.frame)
            text = prompt_text(obs, structured, self.track, note)
        else:
            text = prompt_text(obs, structured, self.track)
        if self.shortcuts_note is not None:
            text = f"{text}\n{self.shortcuts_note}"
        history: tuple[tuple[str, str], ...] = ()
        if self.context is not None:  # bounded context: the segment's turns and the notebook
            text = f"{text}\n{self.context.notebook_text()}"
            history = tuple(self.context.history)
        return ModelRequest(self.model_id, self.system, text, screen_png(obs.frame, self.image_scale),
                            self.schema, self.sampling, history, earlier)

    async def decide(self, observation: Observation) -> PolicyReply:
        request = self.request(observation)
        context = self.context.record() if self.context is not None else None
        body = self.adapter.body(request)
        # The exact bytes that leave the process (credentials travel in headers, never here), and
        # what must match across conditions: system prompt, response schema, screen.
        prompt_sha = hashlib.sha256(canonical(body)).hexdigest()
        core = hashlib.sha256()
        for part in (request.system.encode(), self._schema_bytes, request.image_png):
            core.update(hashlib.sha256(part).digest())
        if self.gate is not None:  # may wait (rate limits) or refuse (the experiment's cost ceiling)
            self.gate.before_call()
        started = time.perf_counter()  # after any limiter wait: latency is the call's own
        try:
            reply = await self.adapter.send(body, self.transport.timeout_seconds)
        except ProviderFailure as exc:  # a failed call took time too (a timeout: all of it)
            exc.latency_ms = round((time.perf_counter() - started) * 1000, 3)
            raise
        latency = round((time.perf_counter() - started) * 1000, 3)
        usage = self._priced(reply)
        if self.gate is not None:
            self.gate.after_call(usage.cost_usd, usage.total_tokens)
        if self.context is not None:
            self.context.after(request.text, reply.text)
        return PolicyReply(
            text=reply.text, model_id=reply.model_id, response_id=reply.response_id, usage=usage,
            latency_ms=latency, prompt_sha256=prompt_sha, prompt_core_sha256=core.hexdigest(),
            stop_reason=reply.stop_reason, identity=reply.identity or None, reply=reply.raw or None,
            oversize=reply.oversize, context=context)

    def _priced(self, reply: ModelReply) -> Usage:
        u = reply.usage
        if u.cost_usd is not None:  # the provider said what it charged
            return u.model_copy(update={"cost_source": "provider"})
        if self.price is None:
            return u  # unknown stays unknown
        cost = derived_cost(self.price, self.provider, input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                            cached_tokens=u.cached_tokens, cache_write_tokens=reply.cache_write_tokens,
                            reasoning_tokens=reply.reasoning_tokens)
        return u.model_copy(update={"cost_usd": cost, "cost_source": "derived" if cost is not None else None})

    def close(self) -> None:
        pass

    async def aclose(self) -> None:
        await self.adapter.aclose()
