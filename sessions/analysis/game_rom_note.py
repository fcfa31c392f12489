"""The report's "Game and ROM" section: what the trials played, as their results recorded it.

Read from each trial's `result.json` provenance (not from the definition file as it is today): the
ROM's identity (a listed dump, an open cartridge's conformance build, forced, or an open cartridge
with no dump list), whether the game definition was `verified`, and where the definition has run
unchanged on an open cartridge (`game_definition_conformance`). Worded so that a conformance build is
never read as a check on the commercial game.
"""

from __future__ import annotations

import json
from pathlib import Path

from sessions.evidence import layout


def game_and_rom(root: Path, title: str | None) -> dict | None:
    """{rom, sha256, verified, conformance, sentences}; None when no trial recorded a result."""
    found = None
    for result in sorted((root / layout.TRIALS).glob(f"*/{layout.RESULT}")):
        try:
            prov = json.loads(result.read_text(encoding="utf-8")).get("provenance") or {}
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(prov, dict) and isinstance(prov.get("rom_identity"), dict):
            found = prov
            break
    if found is None:
        return None
    ident, game = found["rom_identity"], title or "the game"
    verified = found.get("game_definition_verified")
    builds = [b for b in found.get("game_definition_conformance") or [] if isinstance(b, dict)]
    sentences = []
    if ident.get("conformance_build"):
        sentences.append(
            f"The ROM played is {ident['conformance_build']}, an open cartridge built from this project's source, "
            f"listed in the game definition as a conformance build: it keeps its state at the addresses the "
            f"definition reads for {game}. These trials exercised the definition's fields, pointers, arrays and "
            f"ladder on a real ROM in a real emulator; they are not a check on that game itself: none of its ROMs "
            f"was run.")
    elif ident.get("matched"):
        sentences.append(f"The ROM played is identified as {ident['matched']} (SHA-1 {ident.get('sha1')}).")
    elif ident.get("forced"):
        sentences.append(f"The ROM played is not a dump the game definition lists (SHA-1 {ident.get('sha1')}); "
                         "the run was forced (game.allow_unidentified_rom).")
    else:
        sentences.append(f"The ROM played is pinned by its SHA-256 ({ident.get('sha256')}); the game definition "
                         "lists no commercial dumps.")
    if verified is False:
        sentences.append("The game definition says verified: false: no real-ROM test of the commercial game has "
                         "passed on it.")
    elif verified is True:
        sentences.append("The game definition says verified: true.")
    if builds:
        sentences.append("Where the definition has run unchanged: " + "; ".join(
            f"{b.get('build')} (ROM SHA-256 {str(b.get('rom_sha256'))[:16]}…, source commit {b.get('commit')})"
            for b in builds) + ".")
    return {"rom": ident.get("conformance_build") or ident.get("matched"), "sha256": ident.get("sha256"),
            "conformance_build": ident.get("conformance_build"), "verified": verified, "conformance": builds,
            "sentences": sentences}
