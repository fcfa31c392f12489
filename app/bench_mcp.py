"""`oakwatch bench`'s tool-server figure: what one MCP tool call costs over the raw press.

`oakwatch mcp` is started as a subprocess on a copy of the bundled dry-run with one `policy: mcp`
condition (unpaced), and driven with the official SDK's stdio client from this process: the
walkthrough's presses, one button per press_keys call, each call timed at the client from sending
it to its result (JSON-RPC both ways, the desk's hand-off between the server and the trial loop,
and the loop's whole decision: contract, press, probe, ladder, trace and frame store). The raw
press is bench phase 1's (a+): the same presses with the same timing straight on PyBoy, with the
harness's frame capture and SHA-256. Overhead = median call - raw press; target <= 2 ms. For scale,
the SDK's bare round trip (a ping) is printed beside it: it is most of the overhead. The first
WARMUP calls are not counted. Printed (and in `--json`), never asserted in tests.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import yaml

from engine.emulator import Timing

TARGET_MS = 2.0
WARMUP = 5


async def _drive(manifest: Path, out: Path, presses: list[str]) -> dict[str, list[float]]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "app.cli", "mcp", str(manifest), "--output", str(out)])
    times: dict[str, list[float]] = {"press_keys": [], "get_screen": [], "ping": []}
    with open(out.parent / "mcp-server.log", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            for press in presses:
                pinged = time.perf_counter()
                await session.send_ping()  # the SDK's bare round trip, for scale
                started = time.perf_counter()
                times["ping"].append((started - pinged) * 1000)
                await session.call_tool("get_screen", {})
                between = time.perf_counter()
                result = await session.call_tool("press_keys", {"keys": [press]})
                ended = time.perf_counter()
                if result.is_error:
                    raise RuntimeError("".join(getattr(c, "text", "") for c in result.content))
                times["get_screen"].append((between - started) * 1000)
                times["press_keys"].append((ended - between) * 1000)
    return times


def mcp_figures(prepared, calls: int, tmp: Path, raw_press) -> dict:
    """`raw_press` is bench's raw PyBoy loop (app.bench._raw), handed in so this module needs nothing of
    bench's: the figure is measured against exactly the loop the other phases use."""
    import anyio

    script = list(next(iter(prepared.scripts.values())))
    # The walkthrough's first half (it cannot reach the final rung, which would end the trial and
    # refuse the rest), then NOOPs for as many more calls as were asked for: any count is measured.
    walk = script[:min(calls + WARMUP, len(script) // 2)]
    presses = walk + ["NOOP"] * (calls + WARMUP - len(walk))
    m = prepared.manifest
    timing = Timing(m.emulator.press_frames, m.emulator.settle_frames)
    print(f"tool server: {len(presses) - WARMUP} press_keys calls over stdio (the SDK's client) against the "
          f"raw press", flush=True)
    data = yaml.safe_load(m.to_yaml())
    data["emulator"]["speed_multiplier"] = 0
    # budgets that cannot end the trial before the last measured call (standing still is no loop here)
    data["budgets"].update({"accepted_actions": len(presses) + 1, "model_decisions": None,
                            "unrecoverable_loop_repeats": None, "wall_time_minutes": None})
    data["conditions"] = [{"id": "agent", "policy": "mcp"}]
    data.pop("created_utc", None)
    folder = tmp / "mcp"
    folder.mkdir()
    manifest = folder / "manifest.yaml"
    manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    times = anyio.run(_drive, manifest, folder / "out", presses)
    counted = presses[WARMUP:]
    raw_wall, _ = raw_press(prepared.rom_path, prepared.start_state, counted, timing, hashing=True, png=False)
    raw_ms = raw_wall * 1000 / len(counted)
    call_ms = statistics.median(times["press_keys"][WARMUP:])
    screen_ms = statistics.median(times["get_screen"][WARMUP:])
    ping_ms = statistics.median(times["ping"][WARMUP:])
    overhead = call_ms - raw_ms
    figures = {"calls": len(counted), "press_keys_median_ms": round(call_ms, 3), "raw_press_ms": round(raw_ms, 3),
               "overhead_ms": round(overhead, 3), "get_screen_median_ms": round(screen_ms, 3),
               "sdk_ping_median_ms": round(ping_ms, 3),
               "target_ms": TARGET_MS, "target_met": overhead <= TARGET_MS}
    print(f"tool server: press_keys {call_ms:.3f} ms per call (median), raw press {raw_ms:.3f} ms: overhead "
          f"{overhead:.3f} ms per call (target <= {TARGET_MS:g} ms: {'met' if overhead <= TARGET_MS else 'NOT met'}); "
          f"the SDK's bare round trip (ping) {ping_ms:.3f} ms; get_screen {screen_ms:.3f} ms", flush=True)
    return figures
