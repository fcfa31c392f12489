"""The tool server swept with bad input (issue 31.5), over its real stdio wire: malformed JSON-RPC,
unknown methods and tools, arguments of every JSON type, a 10 MB argument, thousands of calls after
the trial ended, a client that drops mid-call, kill -9 mid-trial then recover and verify. Each ends
with no traceback, no hang, and every call that reached a tool in the evidence: a decision's attempt,
or a refusal in provenance.tool_server; so is every line that is no JSON-RPC message, which is also
answered with a JSON-RPC error (id null).

The everyday sweep is sized to a few seconds of examples; `-m slow` runs a longer one."""

from __future__ import annotations

import json
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessions.audit.verify import verify_experiment
from tests.fakes.mcp_wire import Wire
from tests.sessions.execute.test_mcp_server import OAKWATCH, ROOT, mcp_manifest, result_of

TOOLS = ["get_screen", "press_keys"]  # the human ruleset's
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) \
    | st.text(max_size=20)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)


def _line(obj) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def bad_messages():
    """(bytes to send, the request id that must be answered or None, the tool call it makes or None)."""
    garbage = st.binary(min_size=1, max_size=200).filter(lambda b: b"\n" not in b).map(lambda b: (b + b"\n", None,
                                                                                                   None))
    not_rpc = JSON.map(lambda v: (_line(v), None, None))
    unknown_method = st.tuples(st.text(min_size=1, max_size=30), JSON).map(
        lambda m: (_line({"jsonrpc": "2.0", "id": "u", "method": "x/" + m[0], "params": {"v": m[1]}}), "u", None))
    unknown_note = st.text(min_size=1, max_size=30).map(
        lambda m: (_line({"jsonrpc": "2.0", "method": "notifications/x" + m}), None, None))
    wrong_version = JSON.map(lambda v: (_line({"jsonrpc": v, "id": "v", "method": "ping"}), None, None))
    call = st.tuples(st.sampled_from([*TOOLS, "read_ram", "get_screen ", ""]), JSON).map(
        lambda c: (_line({"jsonrpc": "2.0", "id": "c", "method": "tools/call",
                          "params": {"name": c[0], "arguments": c[1]}}), "c", c[0]))
    keys = JSON.map(lambda v: (_line({"jsonrpc": "2.0", "id": "k", "method": "tools/call",
                                      "params": {"name": "press_keys", "arguments": {"keys": v}}}), "k", "press_keys"))
    return st.one_of(garbage, not_rpc, unknown_method, unknown_note, wrong_version, call, keys)


def serve(tmp_path, budgets: dict) -> Wire:
    wire = Wire([*OAKWATCH, "mcp", str(mcp_manifest(tmp_path, budgets=budgets)), "--output", str(tmp_path / "out")],
                ROOT)
    wire.initialize()
    return wire


def sweep(tmp_path, examples: int, after_end: int) -> None:
    from mcp_types import jsonrpc_message_adapter

    wire = serve(tmp_path, {"accepted_actions": 12})
    answers: list[dict] = []  # every tools/call answer the server gave
    malformed = [0]  # lines that are no JSON-RPC message (the SDK's own parser says which)

    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(bad_messages())
    def one(message):
        data, ask, tool = message
        if ask is not None:  # a fresh id per request, so each answer is matched to its question
            wire._next += 1
            data = data.replace(f'"id": "{ask}"'.encode(), f'"id": {wire._next}'.encode(), 1)
            ask = wire._next
        try:
            jsonrpc_message_adapter.validate_json(data)
        except ValueError:
            malformed[0] += 1
        wire.send_bytes(data)
        ping = wire.request("ping")
        if ask is not None:
            answer = wire.answer(ask, timeout=30)
            if tool is not None and "result" in answer:
                answers.append((tool, answer["result"]))
        assert "result" in wire.answer(ping, timeout=30)  # alive, and not stuck

    one()
    # a 10 MB argument, then the trial played to its end, then thousands of calls after it
    answers.append(("press_keys", wire.call("press_keys", {"keys": ["B" * (10 << 20)]})["result"]))
    while not answers[-1][1].get("isError") or "has ended" not in answers[-1][1]["content"][0]["text"]:
        answers.append(("press_keys", wire.call("press_keys", {"keys": ["RIGHT"]})["result"]))
    first = wire._next + 1
    wire.send_bytes(b"".join(_line({"jsonrpc": "2.0", "id": first + i, "method": "tools/call",
                                    "params": {"name": "press_keys", "arguments": {"keys": ["A"]}}})
                             for i in range(after_end)))
    late = [wire.answer(first + i, timeout=60)["result"] for i in range(after_end)]
    assert all(r["isError"] and "the trial has ended" in r["content"][0]["text"] for r in late)
    status, err = wire.close()
    assert status in (1, 2) and "Traceback" not in err, err[-3000:]
    out = tmp_path / "out"
    assert verify_experiment(out) == []
    result, trial = result_of(out)
    # nothing unrecorded: each call that became a decision's attempt is in responses.jsonl; each the SDK
    # refused before any tool ran is a refusal in the result
    texts = [r["content"][0].get("text", "") if r.get("content") else "" for _, r in answers]
    lines = (trial / "responses.jsonl").read_bytes().splitlines()  # (bytes: a line may hold U+2028 and kin)
    attempts = sum(len(json.loads(line)["attempts"]) for line in lines)
    decided = sum((not r.get("isError") and tool == "press_keys") or "charged as an invalid output of decision" in t
                  for (tool, r), t in zip(answers, texts, strict=True) if "has ended" not in t)
    assert attempts == decided
    refused = sum(r.get("isError", False) and ("Unknown tool" in t or "validation error" in t)
                  for (_, r), t in zip(answers, texts, strict=True))
    # each line that is no JSON-RPC message is answered as JSON-RPC asks (id null) and refused on the record
    nulls = [n["error"]["code"] for n in wire.notes if "error" in n and n.get("id") is None]
    assert len(nulls) == malformed[0] > 0 and set(nulls) <= {-32700, -32600}
    assert result["provenance"]["tool_server"]["refused_count"] == refused + malformed[0]
    reasons = {r["reason"] for r in result["provenance"]["tool_server"]["refused"]}
    assert "a message that is not JSON" in reasons
    assert decided > 0 and refused > 0  # the sweep reached both


def test_a_sweep_of_bad_input_over_stdio(tmp_path):
    sweep(tmp_path, examples=60, after_end=2000)


@pytest.mark.slow
def test_a_longer_sweep_of_bad_input_over_stdio(tmp_path):
    sweep(tmp_path, examples=600, after_end=10000)


def test_a_client_that_drops_mid_call(tmp_path):
    """The client closes both ends while its call is being answered: the decision is recorded, the
    trial ends as its client leaving, the server exits 2 without a traceback."""
    wire = serve(tmp_path, {"accepted_actions": 50})
    assert "result" in wire.call("get_screen")
    wire.request("tools/call", {"name": "press_keys", "arguments": {"keys": ["RIGHT", "RIGHT"]}})
    wire.request("tools/call", {"name": "get_screen"})  # ~100 kB to write into a pipe nobody reads
    wire.process.stdout.close()
    status, err = wire.close()
    assert status == 2 and "Traceback" not in err, err[-3000:]
    out = tmp_path / "out"
    result, trial = result_of(out)
    assert result["termination_reason"] == "agent-disconnected"
    assert verify_experiment(out) == []


def test_kill_9_mid_trial_then_recover_and_verify(tmp_path):
    wire = serve(tmp_path, {"accepted_actions": 50})
    for _ in range(3):
        assert "result" in wire.call("press_keys", {"keys": ["RIGHT"]})
    wire.process.kill()
    wire.finish()
    out = tmp_path / "out"
    assert verify_experiment(out) != []  # unfinished: recover's work
    done = subprocess.run([*OAKWATCH, "recover", str(out)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    result, _ = result_of(out)
    assert result["termination_reason"] == "process-died" and result["recovered"]
    assert verify_experiment(out) == []


def test_a_sweep_of_bad_requests_over_http(tmp_path):
    """Over streamable HTTP: bodies that are not JSON-RPC, methods and content types the SDK does not
    serve, foreign session ids and tokens. Each is answered with an error status (a refusal in the
    result where it reached the gate), the server keeps serving its one client, and it ends cleanly."""
    import anyio
    import httpx

    from tests.sessions.execute.test_mcp_protocol import _client, serve_http

    token_file = tmp_path / "token"
    server, url = serve_http(tmp_path, "--token-file", str(token_file))
    token = token_file.read_text().strip()
    good = {"authorization": f"Bearer {token}", "accept": "application/json, text/event-stream",
            "content-type": "application/json"}
    statuses: list[int] = []

    async def main():
        async with _client(url, token) as client:  # the trial's client, first
            assert not (await client.call_tool("press_keys", {"keys": ["RIGHT"]})).is_error
            with httpx.Client(timeout=30) as http:

                @settings(max_examples=40, deadline=None, database=None, derandomize=True,
                          suppress_health_check=list(HealthCheck))
                @given(method=st.sampled_from(["POST", "GET", "DELETE", "PUT"]),
                       body=st.binary(max_size=300) | JSON.map(lambda v: json.dumps(v).encode()),
                       session=st.none() | st.text("0123456789abcdef", min_size=1, max_size=40),
                       auth=st.sampled_from(["good", "none", "wrong"]))
                def one(method, body, session, auth):
                    headers = dict(good)
                    if auth == "none":
                        del headers["authorization"]
                    elif auth == "wrong":
                        headers["authorization"] = "Bearer " + token[::-1]
                    if session is not None:
                        headers["mcp-session-id"] = session
                    answer = http.request(method, url, content=body, headers=headers)
                    statuses.append(answer.status_code)
                    assert 400 <= answer.status_code < 500, (answer.status_code, answer.text[:300])

                await anyio.to_thread.run_sync(one)
            assert not (await client.call_tool("press_keys", {"keys": ["RIGHT"]})).is_error  # still playing

    try:
        anyio.run(main)
        assert server.wait(timeout=60) == 2  # the client left mid-trial
        err = server.stderr.read()
    finally:
        server.kill()
    assert "Traceback" not in err, err[-3000:]
    result, _ = result_of(tmp_path / "out")
    assert result["last_decision"] == 2  # no bad request became a decision
    assert sum(s in (401, 403) for s in statuses) > 0
    assert result["provenance"]["tool_server"]["refused_count"] == len(statuses)  # each one, on the record
    assert verify_experiment(tmp_path / "out") == []
