"""Text from users' files made safe for one-line messages (shared by engine and sessions)."""

from __future__ import annotations


def printable(text: object) -> str:
    """`text` with every control, line-separator or unencodable character escaped, so a
    message built from user input stays on one line and can always be printed."""
    s = str(text)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in s)


def decode_utf8(data: bytes, source: str) -> str:
    """Strict UTF-8; a bad byte is reported as `SOURCE:LINE: not UTF-8 text (byte 0xNN ...)`."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ValueError(f"{printable(source)}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                         f"{exc.start:,}; save the file as UTF-8)") from None
