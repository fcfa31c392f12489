"""The tool server's wire faults (issues 31.2, 33.4, 34.8): stdin that carries no client, a message too
long to read, SIGTERM as the SDK's clients send it. Each ends in one line and exit 2, or in a truthful
invalid record that verifies; never a traceback, a hang or a folder for `recover`."""

from __future__ import annotations

import signal
import subprocess

import pytest

from sessions.audit.verify import verify_experiment
from tests.fakes.mcp_wire import Wire
from tests.sessions.execute.test_mcp_server import OAKWATCH, ROOT, mcp_manifest, result_of


def serve_stdio(tmp_path, manifest=None, **kw) -> Wire:
    manifest = manifest or mcp_manifest(tmp_path)
    return Wire([*OAKWATCH, "mcp", str(manifest), "--output", str(tmp_path / "out")], ROOT, **kw)


@pytest.mark.parametrize("stdin", ["devnull", "file"])
def test_stdin_that_carries_no_client_is_refused_at_start(tmp_path, stdin):
    """On main: an asyncio traceback, then a server waiting for good (or a valid game-failure once the
    wall-time budget ran out)."""
    if stdin == "file":
        path = tmp_path / "calls.jsonl"
        path.write_text('{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
        source = path.open("rb")
    else:
        source = subprocess.DEVNULL
    done = subprocess.run([*OAKWATCH, "mcp", str(mcp_manifest(tmp_path)), "--output", str(tmp_path / "out")],
                          stdin=source, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and done.stdout == ""
    what = "/dev/null" if stdin == "devnull" else "a regular file"
    assert done.stderr.splitlines() == [f"oakwatch: error: --transport stdio: stdin is {what}, not a client's pipe "
                                        f"(an MCP client starts this command and talks on its stdin and stdout; "
                                        f"or serve --transport http)"]
    assert not (tmp_path / "out").exists()


def test_a_message_over_the_line_limit_ends_the_trial_as_a_harness_fault(tmp_path):
    """On main: the server crashed (exit 1) and the result said the client closed stdin."""
    from sessions.execute.mcp_server import MAX_LINE_BYTES

    wire = serve_stdio(tmp_path)
    wire.initialize()
    assert "result" in wire.call("press_keys", {"keys": ["RIGHT"]})
    try:
        wire.send_bytes(b'{"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": "press_keys", '
                        b'"arguments": {"keys": ["' + b"A" * MAX_LINE_BYTES + b'"]}}}\n')
    except BrokenPipeError:
        pass  # the server stopped reading once the line passed its limit
    status, err = wire.close()
    assert status == 2 and "Traceback" not in err, err
    result, _ = result_of(tmp_path / "out")
    assert (result["outcome"], result["termination_reason"], result["invalid_cause"]) == \
        ("harness-error", "harness-error", "tool-server")
    assert "longer than the 64 MiB the server reads on stdin" in result["termination_detail"]
    assert result["last_decision"] == 1
    assert verify_experiment(tmp_path / "out") == []


def test_sigterm_just_after_the_client_closes_stdin_leaves_a_finished_folder(tmp_path):
    """The official SDK clients close stdin, then send SIGTERM (2 s later; here at once): the trial
    ends as the client leaving, the folder is finished, exit 2."""
    wire = serve_stdio(tmp_path)
    wire.initialize()
    assert "result" in wire.call("press_keys", {"keys": ["RIGHT"]})
    wire.process.stdin.close()
    wire.process.send_signal(signal.SIGTERM)
    status, err = wire.finish()
    assert status == 2 and "Traceback" not in err, err
    out = tmp_path / "out"
    result, _ = result_of(out)
    assert result["termination_reason"] in ("agent-disconnected", "signal")
    assert not (out / ".lock").exists()
    assert verify_experiment(out) == []


def serve_http(tmp_path, *extra: str, manifest=None) -> tuple[subprocess.Popen, str]:
    import re

    server = subprocess.Popen([*OAKWATCH, "mcp", str(manifest or mcp_manifest(tmp_path)), "--transport", "http",
                               "--port", "0", "--output", str(tmp_path / "out"), *extra],
                              stderr=subprocess.PIPE, text=True, cwd=ROOT)
    line = server.stderr.readline()
    found = re.search(r"on (http://\S+/mcp)", line)
    assert found, line
    return server, found.group(1)


def _client(url: str, token: str | None):
    """An SDK client session over streamable HTTP (its context stack)."""
    import contextlib

    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    @contextlib.asynccontextmanager
    async def session():
        headers = {"Authorization": f"Bearer {token}"} if token is not None else None
        async with create_mcp_http_client(headers=headers) as http, \
                streamable_http_client(url, http_client=http) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            yield s

    return session()


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in _leaves(e)]
    return [exc]


def test_one_trial_one_client_and_its_bearer_token(tmp_path):
    """Issue 31.1: on main a second client's presses became decisions of the same trial, unattributed.
    The first session that initializes owns the trial; a second SDK client, and a client without the
    token, are refused with a JSON-RPC error and recorded; every decision names its session by hash;
    the token is in no file of the evidence and never printed."""
    import json

    import anyio

    token_file = tmp_path / "token"
    server, url = serve_http(tmp_path, "--token-file", str(token_file))
    token = token_file.read_text().strip()
    assert len(token) >= 40 and (token_file.stat().st_mode & 0o777) == 0o600
    refusals: dict = {}

    async def main():
        async with _client(url, token) as first:
            assert not (await first.call_tool("press_keys", {"keys": ["RIGHT"]})).is_error
            for name, key in (("second", token), ("no-token", None), ("wrong-token", token[::-1])):
                try:
                    async with _client(url, key) as other:
                        refusals[name] = await other.call_tool("press_keys", {"keys": ["LEFT"]})
                except Exception as exc:  # the SDK raises the server's JSON-RPC error
                    refusals[name] = exc
            assert not (await first.call_tool("press_keys", {"keys": ["RIGHT"]})).is_error

    try:
        anyio.run(main)
        assert server.wait(timeout=60) == 2  # the client left mid-trial: agent-disconnected
        err = server.stderr.read()
    finally:
        server.kill()
    messages = {name: " ".join(map(str, _leaves(exc))) for name, exc in refusals.items()}
    assert all(isinstance(exc, BaseException) for exc in refusals.values()), refusals
    assert "this trial already has its client: one trial, one client" in messages["second"], messages
    assert "needs its bearer token" in messages["no-token"] and "needs its bearer token" in messages["wrong-token"]
    out = tmp_path / "out"
    result, trial = result_of(out)
    record = result["provenance"]["tool_server"]
    assert record["auth"] == "bearer" and record["refused_count"] == 3
    reasons = [r["reason"] for r in record["refused"]]
    assert reasons.count("no bearer token, or not this trial's (Authorization: Bearer ...)") == 2
    assert "a second client: this trial already has its client" in reasons
    assert result["last_decision"] == 2  # the refused clients made no decision
    from tests.conftest import read_jsonl

    made_by = {a["identity"]["mcp_session_sha256"] for r in read_jsonl(trial / "responses.jsonl")
               for a in r["attempts"]}
    assert len(made_by) == 1 and len(next(iter(made_by))) == 64
    assert verify_experiment(out) == []
    for path in out.rglob("*"):  # the token: never evidence, never printed
        assert not path.is_file() or token.encode() not in path.read_bytes(), path
    assert token not in err and "refused a connection: a second client" in err
    # verify: a decision made by another session fails the trial
    lines = (trial / "responses.jsonl").read_text().splitlines()
    other = json.loads(lines[1])
    other["attempts"][0]["identity"]["mcp_session_sha256"] = "0" * 64
    lines[1] = json.dumps(other)
    (trial / "responses.jsonl").write_text("\n".join(lines) + "\n")
    assert any("made by another MCP session than decision 1's (one trial, one client)" in p
               for p in verify_experiment(out))


def test_token_file_refusals(tmp_path):
    done = subprocess.run([*OAKWATCH, "mcp", str(mcp_manifest(tmp_path)), "--token-file", str(tmp_path / "t"),
                           "--output", str(tmp_path / "out")], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          stdin=subprocess.PIPE)
    assert done.returncode == 2 and done.stderr.splitlines() == [
        "oakwatch: error: --token-file: a bearer token is for --transport http (a stdio client is the one that "
        "started the server)"]
    done = subprocess.run([*OAKWATCH, "mcp", str(mcp_manifest(tmp_path)), "--transport", "http", "--port", "0",
                           "--token-file", str(tmp_path / "out" / "t"), "--output", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and "not inside the evidence folder" in done.stderr
    assert not (tmp_path / "out").exists()


def _oversized_attempt(trial) -> dict:
    from tests.conftest import read_jsonl

    (attempt,) = [a for r in read_jsonl(trial / "responses.jsonl") for a in r["attempts"] if a.get("oversize")]
    return attempt


def test_a_huge_argument_over_stdio_is_kept_as_its_size_and_digest(tmp_path):
    """Issue 34.8: on main a 10 MB call was stored verbatim and verify then failed the folder. It is an
    invalid output of its decision, charged, answered with the reason, recorded by size and SHA-256."""
    import hashlib

    import pydantic_core

    wire = serve_stdio(tmp_path, mcp_manifest(tmp_path, budgets={"accepted_actions": 3}))
    wire.initialize()
    arguments = {"keys": ["A" * (10 << 20)]}
    answer = wire.call("press_keys", arguments)
    text = answer["result"]["content"][0]["text"]
    assert answer["result"]["isError"] and "charged as an invalid output of decision 1: oversized call" in text
    for _ in range(3):
        wire.call("press_keys", {"keys": ["RIGHT"]})
    status, err = wire.close()
    assert status == 1 and "Traceback" not in err, err  # the budget ended it: a valid game-failure
    result, trial = result_of(tmp_path / "out")
    assert result["telemetry"]["invalid_outputs"] == 1
    attempt = _oversized_attempt(trial)
    received = pydantic_core.to_json(arguments)
    assert attempt["oversize"]["received_bytes"] == len(received) > 10 << 20
    assert attempt["oversize"]["received_sha256"] == hashlib.sha256(received).hexdigest()
    assert attempt["raw"] is None and attempt["reply"] is None and attempt["identity"]["mcp_session_sha256"]
    assert (trial / "responses.jsonl").stat().st_size < 1 << 20
    assert verify_experiment(tmp_path / "out") == []


def test_a_request_the_sdk_finds_malformed_over_http_is_answered_and_recorded(tmp_path):
    """A body that is not JSON reaches the SDK (before any client, or from the trial's own client) and
    is answered 400 with a JSON-RPC parse error; each is a refusal in the result, the second with the
    hash of the session that sent it, and neither is a decision."""
    import hashlib

    import httpx

    server, url = serve_http(tmp_path)
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "t", "version": "1"}}}
    try:
        with httpx.Client(timeout=30) as http:
            first = http.post(url, content=b"{not json", headers=headers)  # no session yet: claims nothing
            init = http.post(url, json=hello, headers=headers)
            session = init.headers["mcp-session-id"]
            own = http.post(url, content=b"[1, 2", headers=headers | {"mcp-session-id": session})
            http.delete(url, headers=headers | {"mcp-session-id": session})
        assert server.wait(timeout=60) == 2  # the client left before a decision
        err = server.stderr.read()
    finally:
        server.kill()
    assert (first.status_code, init.status_code, own.status_code) == (400, 200, 400)
    assert first.json()["error"]["code"] == -32700 and first.json()["id"] is None
    result, _ = result_of(tmp_path / "out")
    record = result["provenance"]["tool_server"]
    malformed = "a request the SDK refused as malformed (HTTP 400)"
    assert [(r["reason"], r["session_sha256"]) for r in record["refused"]] == [
        (malformed, None), (malformed, hashlib.sha256(session.encode()).hexdigest())]
    assert record["refused_count"] == 2 and result["last_decision"] in (0, None)
    assert "Traceback" not in err and session not in err
    assert verify_experiment(tmp_path / "out") == []


def test_a_huge_argument_over_http_too_and_a_body_past_the_sdks_limit_is_recorded(tmp_path):
    """3 MB over HTTP (under the SDK's 4 MiB body limit): as over stdio. 5 MB: the SDK refuses the
    request (HTTP 413) before any tool sees it; the refusal is recorded in the result."""
    import anyio

    server, url = serve_http(tmp_path, manifest=mcp_manifest(tmp_path, budgets={"accepted_actions": 2}))
    got: dict = {}

    async def main():
        async with _client(url, None) as client:
            got["3MB"] = await client.call_tool("press_keys", {"keys": ["A" * (3 << 20)]})
            try:
                got["5MB"] = await client.call_tool("press_keys", {"keys": ["A" * (5 << 20)]})
            except Exception as exc:
                got["5MB"] = exc
            for _ in range(2):
                await client.call_tool("press_keys", {"keys": ["RIGHT"]})

    try:
        anyio.run(main)
        assert server.wait(timeout=60) == 1
    finally:
        server.kill()
    assert got["3MB"].is_error and "oversized call" in got["3MB"].content[0].text
    result, trial = result_of(tmp_path / "out")
    assert _oversized_attempt(trial)["oversize"]["received_bytes"] > 3 << 20
    record = result["provenance"]["tool_server"]
    assert [r["reason"] for r in record["refused"]] == ["a request body over the SDK's limit (HTTP 413)"]
    assert verify_experiment(tmp_path / "out") == []
