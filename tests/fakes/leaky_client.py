#!/usr/bin/env python3
"""A coding-agent CLI that prints its own API keys everywhere it can: in its `--version` line, in
every field of Claude Code's `--output-format json` object (or of Codex's `--json` event lines), on
stderr, in a session transcript under its home, then exits 1 before making a single call. What
oakwatch keeps of it must hold no key. Standard library only (it runs inside the client sandbox).

  leaky_client.py --version
  leaky_client.py --shape claude|codex [anything else is ignored]
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

KEY_VARS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")


def keys() -> str:
    return " ".join(os.environ.get(k, "") for k in KEY_VARS)


def main(argv: list[str]) -> int:
    if "--version" in argv:
        print(f"9.9.9 (leaky {keys()})")
        return 0
    k = keys()
    shape = argv[argv.index("--shape") + 1] if "--shape" in argv else "claude"
    if shape == "codex":
        events = [{"type": "thread.started", "thread_id": k},
                  {"type": "turn.started"},
                  {"type": "item.completed", "item": {"id": k, "type": "agent_message", "text": k}},
                  {"type": "turn.completed", "usage": {"input_tokens": k, "cached_input_tokens": k,
                                                       "output_tokens": k}},
                  {"type": "turn.failed", "error": {"message": k}},
                  {"type": "error", "message": k}]
        for event in events:
            print(json.dumps(event))
        home = Path(os.environ.get("HOME", "."))
        log = home / ".codex" / "sessions" / "2026" / "01" / "01" / "rollout-leak.jsonl"
    else:
        print(json.dumps({"type": "result", "subtype": k, "is_error": True, "result": k, "session_id": k,
                          "total_cost_usd": k, "num_turns": k, "duration_ms": k,
                          "usage": {"input_tokens": k, "output_tokens": k, "cache_read_input_tokens": k,
                                    "cache_creation_input_tokens": k, "server_tool_use": {"web": k}},
                          "modelUsage": {k: {"costUSD": k}}, "permission_denials": [k]}))
        home = Path(os.environ.get("HOME", "."))
        log = home / ".claude" / "projects" / "-work" / "leak.jsonl"
    print(f"error: authentication failed for key {k}", file=sys.stderr)
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(json.dumps({"key": k}) + "\n", encoding="utf-8")
    except OSError:
        pass
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
