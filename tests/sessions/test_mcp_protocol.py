"""The tool server's wire faults (issues 31.2, 33.4, 34.8): stdin that carries no client, a message too
long to read, SIGTERM as the SDK's clients send it. Each ends in one line and exit 2, or in a truthful
invalid record that verifies; never a traceback, a hang or a folder for `recover`."""

from __future__ import annotations

import signal
import subprocess

import pytest

from sessions.verify import verify_experiment
from tests.fakes.mcp_wire import Wire
from tests.sessions.test_mcp_server import OAKWATCH, ROOT, mcp_manifest, result_of


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
    from sessions.mcp_server import MAX_LINE_BYTES

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
