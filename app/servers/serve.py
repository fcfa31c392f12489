"""`oakwatch serve DIR`: the attached console for an experiment as a web page.

textual-serve's Server runs one app process per browser tab (per websocket): `<this python> -m app.cli
attach DIR --read-only`, without `--read-only` when served with `--operator`. Bound to 127.0.0.1 by
default; watch a remote run through a tunnel (`ssh -L 8000:127.0.0.1:8000 head-node`, then open
http://127.0.0.1:8000).

The page works with no internet: our own template (app/servers/serve_templates/) names no other host (no web
font: a local monospace font stack) and loads textual-serve's JS and CSS from this server; a Content
Security Policy keeps the page to its own origin. Every URL on the page is relative, so a tunnel on any
local port works. The websocket refuses a foreign Origin (another site open in the same browser must not
drive the console), and on a loopback bind a Host that is not a loopback name (DNS rebinding).
"""

from __future__ import annotations

import asyncio
import ipaddress
import shlex
import signal
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp_jinja2
import textual_serve
from aiohttp import web
from textual_serve.server import Server, to_int

TEMPLATES = Path(__file__).resolve().parent / "serve_templates"
STATIC = Path(textual_serve.__file__).resolve().parent / "static"
LOOPBACK_NAMES = ("localhost", "localhost.")


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 with or without brackets) is this machine only."""
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def app_command(folder: Path, *, operator: bool) -> str:
    """The shell command textual-serve runs for each browser tab: attach, read-only unless `operator`."""
    parts = [sys.executable, "-m", "app.cli", "attach", str(folder.resolve())]
    if not operator:
        parts.append("--read-only")
    return shlex.join(parts)


def _host_of(value: str) -> str:
    """The host name of a Host header (`name:port`, `[v6]:port`)."""
    return (urlsplit(f"//{value}").hostname or "") if value else ""


class OakwatchServer(Server):
    """textual-serve's Server with an offline page, relative URLs and a guarded websocket."""

    def __init__(self, command: str, *, folder: Path, host: str, port: int, operator: bool) -> None:
        shown = f"[{host}]" if ":" in host else host
        super().__init__(command, host=host, port=port, title=f"oakwatch · {folder.name}",
                         public_url=f"http://{shown}:{port}", statics_path=STATIC, templates_path=TEMPLATES)
        self.folder = folder
        self.operator = operator

    def initialize_logging(self) -> None:  # textual-serve's rich handler logs each request; keep warnings
        import logging

        logging.basicConfig(level="WARNING", format="oakwatch serve: %(message)s")

    async def on_startup(self, app: web.Application) -> None:  # textual-serve prints a banner here
        pass

    def announce(self, *_args) -> None:
        """Once listening (not before: the port may be taken)."""
        mode = "operator: keys control the run" if self.operator else "read-only"
        print(f"oakwatch serve: {self.folder} on {self.public_url}/ ({mode}; one console per browser tab; "
              f"Ctrl+C stops)", flush=True)

    def serve(self, debug: bool = False) -> None:
        """textual-serve's serve(), announcing the address only once the port is bound."""
        self.debug = debug
        self.initialize_logging()
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        loop.add_signal_handler(signal.SIGINT, self.request_exit)
        loop.add_signal_handler(signal.SIGTERM, self.request_exit)
        web.run_app(self._make_app(), host=self.host, port=self.port, handle_signals=False, loop=loop,
                    print=self.announce)

    @aiohttp_jinja2.template("app_index.html")
    async def handle_index(self, request: web.Request) -> dict[str, Any]:
        return {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "static_url": "static/",
            "websocket_path": "ws",
            "title": self.title,
            "read_only": not self.operator,
        }

    def refusal(self, request: web.Request) -> str | None:
        """Why this websocket must not open a console (None: it may)."""
        host = _host_of(request.headers.get("Host", ""))
        if is_loopback(self.host) and not is_loopback(host):
            return f"Host {host!r} is not a loopback name"
        origin = request.headers.get("Origin")
        if origin is not None:
            parts = urlsplit(origin)
            if parts.scheme not in ("http", "https") or parts.netloc.lower() != request.headers.get("Host",
                                                                                                  "").lower():
                return f"Origin {origin!r} is not this page's"
        return None

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        problem = self.refusal(request)
        if problem:
            print(f"oakwatch serve: refused a console from {request.remote}: {problem}", file=sys.stderr,
                  flush=True)
            raise web.HTTPForbidden(text=f"oakwatch serve: {problem}\n")
        return await super().handle_websocket(request)


def serve(folder: Path, *, host: str = "127.0.0.1", port: int = 8000, operator: bool = False) -> int:
    from app.review.attach_data import is_evidence_folder

    if not is_evidence_folder(folder):
        print(f"oakwatch: error: {folder}: not an evidence folder (no trials/ or schedule.json)", file=sys.stderr)
        return 2
    if not 0 <= port <= 65535:
        print(f"oakwatch: error: --port {port}: not a port number", file=sys.stderr)
        return 2
    if not is_loopback(host):
        print(f"oakwatch serve: warning: binding to {host}, not 127.0.0.1: anyone who can reach this machine's "
              f"port {port} can {'control the run' if operator else 'watch the run'} (there is no login); "
              f"prefer the default and an SSH tunnel", file=sys.stderr, flush=True)
    server = OakwatchServer(app_command(folder, operator=operator), folder=folder,
                            host=host, port=port, operator=operator)
    try:
        server.serve()
    except OSError as exc:
        print(f"oakwatch: error: cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    return 0
