"""`oakwatch mcp` over stdio spoken by hand: raw JSON-RPC lines, so a test can send what no SDK client
would (malformed messages, unknown methods, arguments of any type or size) and drop the wire where it
likes. Only a wire: it plays nothing."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import time
from pathlib import Path

PROTOCOL = "2025-06-18"  # one of the SDK's handshake versions


class Wire:
    def __init__(self, command: list[str], cwd: Path, stdin=subprocess.PIPE):
        self.process = subprocess.Popen(command, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        cwd=cwd)
        self._buffer = b""
        self._next = 0
        self._kept: dict = {}  # answers read while waiting for another one, by id
        self.notes: list[dict] = []  # messages that answer nothing (notifications, errors with id null)

    # -- sending -----------------------------------------------------------------------------------
    def send_bytes(self, data: bytes) -> None:
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def send(self, message: dict) -> None:
        self.send_bytes(json.dumps(message).encode() + b"\n")

    def request(self, method: str, params: dict | None = None) -> int:
        self._next += 1
        self.send({"jsonrpc": "2.0", "id": self._next, "method": method, **({"params": params} if params else {})})
        return self._next

    def initialize(self) -> dict:
        ask = self.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                          "clientInfo": {"name": "wire", "version": "0"}})
        answer = self.answer(ask)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer

    def call(self, tool: str, arguments=None, timeout: float = 60) -> dict:
        params = {"name": tool} | ({"arguments": arguments} if arguments is not None else {})
        return self.answer(self.request("tools/call", params), timeout)

    # -- receiving ---------------------------------------------------------------------------------
    def answer(self, request_id, timeout: float = 60) -> dict:
        """The response to `request_id` (others read meanwhile are kept for their own turn)."""
        deadline = time.monotonic() + timeout
        while request_id not in self._kept:
            message = self.message(deadline - time.monotonic())
            if ("result" in message or "error" in message) and message.get("id") is not None:
                self._kept[message["id"]] = message
            else:
                self.notes.append(message)
        return self._kept.pop(request_id)

    def message(self, timeout: float) -> dict:
        while b"\n" not in self._buffer:
            chunk = self._read(timeout)
            if not chunk:
                raise EOFError("the server closed its stdout")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def _read(self, timeout: float) -> bytes:
        fd = self.process.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            if not sel.select(max(timeout, 0)):
                raise TimeoutError("no answer from the server")
        return os.read(fd, 1 << 20)

    def close(self, timeout: float = 60) -> tuple[int, str]:
        """Close stdin (the client leaves); the exit status and stderr."""
        return self.finish(timeout)

    def finish(self, timeout: float = 60) -> tuple[int, str]:
        try:
            self.process.stdin.close()
        except BrokenPipeError:
            pass
        self.process.stdin = None  # (communicate would flush it again)
        try:
            _, err = self.process.communicate(timeout=timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
        return self.process.returncode, err.decode("utf-8", "replace")
