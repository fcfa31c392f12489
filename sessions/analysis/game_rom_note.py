"""The report's "Game and ROM" section: what the trials played, as their results recorded it.

Read from each trial's `result.json` provenance (not from the definition file as it is today): the
ROM's identity (a listed dump, an open cartridge's conformance build, forced, or an open cartridge
with no dump list), whether the game definition was `verified`, and where the definition has run
unchanged on an open cartridge (`game_definition_conformance`). Worded so that a conformance build is
never read as a check on the commercial game.
"""

from __future__ import annotations

from pathlib import Path

from sessions.evidence import layout
from sessions.evidence.folder import EvidenceFolder
from sessions.evidence.reader import FormatProblem


def _recorded_provenance(root: Path) -> dict | None:
    """The provenance of the first trial (in trials/, by key) whose result.json records a ROM identity."""
    folder = EvidenceFolder(root)
    for trial in folder.trials(voided=False):
        try:
            prov = folder.json(f"{trial.rel}/{layout.RESULT}").get("provenance") or {}
        except (FormatProblem, AttributeError):
            continue
        if isinstance(prov, dict) and isinstance(prov.get("rom_identity"), dict):
            return prov
    return None


def _rom_sentence(ident: dict, game: str) -> str:
    if ident.get("conformance_build"):
        return (f"The ROM played is {ident['conformance_build']}, an open cartridge built from this project's "
                f"source, listed in the game definition as a conformance build: it keeps its state at the addresses "
                f"the definition reads for {game}. These trials exercised the definition's fields, pointers, arrays "
                f"and ladder on a real ROM in a real emulator; they are not a check on that game itself: none of its "
                f"ROMs was run.")
    if ident.get("matched"):
        return f"The ROM played is identified as {ident['matched']} (SHA-1 {ident.get('sha1')})."
    if ident.get("forced"):
        return (f"The ROM played is not a dump the game definition lists (SHA-1 {ident.get('sha1')}); "
                "the run was forced (game.allow_unidentified_rom).")
    return (f"The ROM played is pinned by its SHA-256 ({ident.get('sha256')}); the game definition "
            "lists no commercial dumps.")


VERIFIED_SENTENCES = {
    False: "The game definition says verified: false: no real-ROM test of the commercial game has passed on it.",
    True: "The game definition says verified: true.",
}


def game_and_rom(root: Path, title: str | None) -> dict | None:
    """{rom, sha256, verified, conformance, sentences}; None when no trial recorded a result."""
    found = _recorded_provenance(root)
    if found is None:
        return None
    ident, game = found["rom_identity"], title or "the game"
    verified = found.get("game_definition_verified")
    builds = [b for b in found.get("game_definition_conformance") or [] if isinstance(b, dict)]
    sentences = [_rom_sentence(ident, game)]
    if verified is True or verified is False:
        sentences.append(VERIFIED_SENTENCES[verified])
    if builds:
        sentences.append("Where the definition has run unchanged: " + "; ".join(
            f"{b.get('build')} (ROM SHA-256 {str(b.get('rom_sha256'))[:16]}…, source commit {b.get('commit')})"
            for b in builds) + ".")
    return {"rom": ident.get("conformance_build") or ident.get("matched"), "sha256": ident.get("sha256"),
            "conformance_build": ident.get("conformance_build"), "verified": verified, "conformance": builds,
            "sentences": sentences}
