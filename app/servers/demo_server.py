"""`oakwatch demo-server`: a model to try the harness with, no API key needed.

The local OpenAI-compatible server (app.servers.chat_server, Starlette on uvicorn) with the demo's
players (app.servers.demo_replies), in the foreground: one line on start (the address and the
command that runs the bundled demo against it), then it serves until Ctrl-C or SIGTERM, and exits 0.
The bundled demo manifest (assets/experiments/demo.yaml) points at DEFAULT_PORT on 127.0.0.1; on
another port, give the run `--base-url` (the start line says so).
"""

from __future__ import annotations

import ipaddress
import signal
import sys
import threading

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765  # assets/experiments/demo.yaml's base_url names it
DEFAULT_LATENCY_MS = 20  # a little of a real provider's wait, so the console has something to show


def add_parser(sub) -> None:
    demo = sub.add_parser("demo-server", help="a local OpenAI-compatible model server to try oakwatch with (no API "
                                              "key): scripted or random replies; runs bundled:demo.yaml")
    demo.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default: {DEFAULT_HOST})")
    demo.add_argument("--port", type=int, default=DEFAULT_PORT,
                      help=f"port to listen on (default: {DEFAULT_PORT}, the one bundled:demo.yaml names; "
                           "0: any free port)")
    demo.add_argument("--replies", choices=["scripted", "random"], default="scripted",
                      help="what a model id other than demo-scripted / demo-random gets (default: scripted, the "
                           "bundled cartridge's walkthrough to M8)")
    demo.add_argument("--seed", type=int, default=0, help="seed of the random replies (default: 0)")
    demo.add_argument("--latency-ms", type=int, default=DEFAULT_LATENCY_MS, metavar="N",
                      help=f"wait this long before each reply (default: {DEFAULT_LATENCY_MS})")


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def cli_command(args) -> int:
    """`oakwatch demo-server`, as cli.py dispatches it."""
    return run_command(args.host, args.port, args.replies, args.seed, args.latency_ms)


def run_command(host: str, port: int, replies: str, seed: int, latency_ms: int) -> int:
    from app.servers.chat_server import ChatServer
    from app.servers.demo_replies import DemoReplies

    if not 0 <= port <= 65535:
        print(f"oakwatch: error: --port {port}: give a port from 0 to 65535", file=sys.stderr)
        return 2
    if not 0 <= latency_ms <= 600_000:
        print(f"oakwatch: error: --latency-ms {latency_ms}: give 0 to 600000", file=sys.stderr)
        return 2
    server = ChatServer(DemoReplies(replies, seed), delay=latency_ms / 1000, host=host, port=port)
    try:
        server.start()
    except OSError as exc:
        print(f"oakwatch: error: cannot listen on {host}:{port} ({exc.strerror or exc}); another demo-server? "
              f"give --port", file=sys.stderr)
        return 2
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        if not _loopback(host):
            print(f"oakwatch demo-server: warning: listening on {host}, not 127.0.0.1: anyone who can reach this "
                  f"machine can use it", file=sys.stderr)
        extra = "" if port == DEFAULT_PORT and host == DEFAULT_HOST else f" --base-url {server.base_url}"
        print(f"oakwatch demo-server: {server.base_url} (OpenAI chat completions, no API key; demo-scripted plays "
              f"the walkthrough, demo-random presses at random, other model ids: {replies}); try: oakwatch run "
              f"bundled:demo.yaml --workers 2 --output runs/demo{extra}; Ctrl-C stops", flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print(f"oakwatch demo-server: stopped after {server.requests} request(s)", flush=True)
    return 0
