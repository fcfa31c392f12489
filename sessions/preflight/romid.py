"""Which game a ROM is: its cartridge header and whole-file hashes, matched against a definition.

A game definition lists the dumps it was written for (`roms:`): header title, game code,
revision, header checksum and the SHA-1 that public dump databases list. A ROM is identified
when its SHA-1 is one of them; anything else is refused with what was found, unless the run is
forced, and then the record says so. The SHA-256 is recorded too (the manifest pins it).
Headers are read by engine.emulators.romheader.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from engine.emulators.romheader import RomHeader, read_header
from engine.games.gamedef import GameDefinition
from engine.text import printable


class RomIdentityError(ValueError):
    """The ROM is not one the game definition was written for; one line naming what was found."""


@dataclass(frozen=True)
class RomIdentity:
    """What the run records about the ROM it played."""

    header: RomHeader
    matched: str | None  # the definition's name for the dump, when identified
    forced: bool  # run although not identified (`--force`)
    # an open cartridge listed in the definition's `conformance:` (its build name): never a dump of the game
    conformance_build: str | None = None

    def as_dict(self) -> dict:
        return {**asdict(self.header), "matched": self.matched, "forced": self.forced,
                "conformance_build": self.conformance_build}

    def label(self, game_title: str) -> str:
        """What the ROM is, in one phrase, for lines and reports."""
        if self.conformance_build:
            return (f"conformance build {self.conformance_build} (an open cartridge that keeps its state where "
                    f"{game_title} does; not a {game_title} ROM)")
        if self.matched:
            return self.matched
        return "not a known dump (--force)" if self.forced else "not identified (no dump list)"


def identify(rom: bytes, game: GameDefinition, *, force: bool = False, source: str = "the ROM") -> RomIdentity:
    """Identify `rom` against `game.roms` (or, by SHA-256, one of its `conformance` builds: accepted
    and labelled as the open cartridge it is, never as the game). A definition listing no dumps (the open cartridge,
    pinned by its SHA-256 instead) identifies nothing and refuses nothing."""
    header = read_header(rom)
    for build in game.conformance:  # an open cartridge the definition ran on unchanged: accepted, labelled
        if build.rom_sha256 == header.sha256:
            return RomIdentity(header, None, False, build.build)
    if not game.roms:
        return RomIdentity(header, None, False)
    for known in game.roms:
        if known.sha1 == header.sha1:
            return RomIdentity(header, known.name, False)
    if force:
        return RomIdentity(header, None, True)
    found = (header.title, header.code, header.revision)
    same_header = [k for k in game.roms if (k.title, k.code, k.revision) == found]
    if same_header:
        why = (f"its header matches {same_header[0].name}, but its SHA-1 is not that dump's "
               f"({same_header[0].sha1}): a patched, trimmed or bad dump?")
    else:
        why = "it is not a game or revision this definition was written for"
    names = "; ".join(k.name for k in game.roms)
    raise RomIdentityError(f"{printable(source)}: {header.describe()}: {why} (game definition {game.id} "
                           f"knows: {names}); --force runs it anyway and records that it did")
