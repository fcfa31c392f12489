"""Cartridge headers: what a ROM says it is (Game Boy and Game Boy Advance), and its hashes.

Layouts (public, from the Pan Docs and GBATEK):
* Game Boy: logo 0x104-0x133 (it starts CE ED 66 66), title 0x134-0x143 (0x13F-0x142 hold a
  manufacturer code and 0x143 the CGB flag on colour-era carts), mask ROM version 0x14C, header
  checksum 0x14D over 0x134-0x14C.
* Game Boy Advance: logo 0x04-0x9F (it starts 24 FF AE 51), title 0xA0-0xAB, game code
  0xAC-0xAF, maker 0xB0-0xB1, fixed value 0x96 at 0xB2, software version 0xBC, complement check
  0xBD over 0xA0-0xBC.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from engine.text import printable

GBA_LOGO_START = bytes([0x24, 0xFF, 0xAE, 0x51])
GB_LOGO_START = bytes([0xCE, 0xED, 0x66, 0x66])


def gb_header_checksum(rom: bytes) -> int:
    x = 0
    for b in rom[0x134:0x14D]:
        x = (x - b - 1) & 0xFF
    return x


def gba_complement(rom: bytes) -> int:
    return (-(sum(rom[0xA0:0xBD]) + 0x19)) & 0xFF


def _text(raw: bytes) -> str:
    """Header text as stored: ASCII up to the first NUL, anything else shown escaped."""
    raw = raw.split(b"\0", 1)[0]
    return printable(raw.decode("ascii", errors="backslashreplace")).rstrip()


@dataclass(frozen=True)
class RomHeader:
    platform: str | None  # "gb", "gbc" or "gba"; None when neither header is there
    title: str | None
    code: str | None  # GBA game code; None on Game Boy
    revision: int | None
    header_checksum: int | None  # as stored in the ROM
    header_checksum_ok: bool | None  # the stored byte equals the one computed from the header
    sha1: str
    sha256: str

    def describe(self) -> str:
        if self.platform is None:
            return f"no Game Boy or Game Boy Advance header, SHA-1 {self.sha1}"
        code = f", code {self.code}" if self.code else ""
        return (f"{self.platform.upper()} title {self.title!r}{code}, revision {self.revision}, "
                f"header checksum 0x{self.header_checksum:02X}, SHA-1 {self.sha1}")


def platform_of(rom: bytes) -> str | None:
    """gb, gbc or gba from the cartridge header; None when neither header is there."""
    if len(rom) >= 0x150 and rom[0x104:0x108] == GB_LOGO_START:
        return "gbc" if rom[0x143] & 0x80 else "gb"
    # A GBA header: the fixed byte 0x96 at 0xB2, and either the boot logo's first bytes or (an open
    # cartridge that carries no copy of the logo; mGBA's built-in BIOS does not check it) an ARM
    # branch at 0 (the entry point jumping over the header) and a complement that matches.
    if len(rom) >= 0xC0 and rom[0xB2] == 0x96 and (
            rom[4:8] == GBA_LOGO_START or (rom[3] == 0xEA and rom[0xBD] == gba_complement(rom))):
        return "gba"
    return None


def read_header(rom: bytes) -> RomHeader:
    sha1, sha256 = hashlib.sha1(rom).hexdigest(), hashlib.sha256(rom).hexdigest()
    platform = platform_of(rom)
    if platform == "gba":
        return RomHeader("gba", _text(rom[0xA0:0xAC]), _text(rom[0xAC:0xB0]), rom[0xBC], rom[0xBD],
                         rom[0xBD] == gba_complement(rom), sha1, sha256)
    if platform in ("gb", "gbc"):
        title = _text(rom[0x134:0x13F] if platform == "gbc" else rom[0x134:0x144])
        return RomHeader(platform, title, None, rom[0x14C], rom[0x14D], rom[0x14D] == gb_header_checksum(rom),
                         sha1, sha256)
    return RomHeader(None, None, None, None, None, None, sha1, sha256)


