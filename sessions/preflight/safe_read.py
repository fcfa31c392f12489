"""Reading an input file without trusting it: never blocks, never reads without bound.

Every file a manifest names (the manifest itself, game definition, script, notes, ROM, start
state) is read here. A FIFO, a device (/dev/zero), a directory or a file over the size cap is
refused with one line naming the file; the open never waits for a writer (O_NONBLOCK), the
type is checked on the open descriptor (no race with a rename), and at most cap + 1 bytes are
read whatever the file claims its size is.
"""

from __future__ import annotations

import errno
import os
import stat

from engine.text import printable

MiB = 1 << 20
MAX_TEXT_BYTES = 4 * MiB  # manifest, game definition, script notes, input script
MAX_ROM_BYTES = 32 * MiB  # the largest cartridge there is (GBA)
MAX_STATE_BYTES = 16 * MiB

_KINDS = [(stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")]


class InputFileError(ValueError):
    """An input file that cannot be used. str() is the one-line message; `reason` is the short
    cause for callers that word their own message (e.g. `m.yaml: cannot read manifest (REASON)`)."""

    def __init__(self, message: str, *, what: str, path: str, reason: str):
        super().__init__(message)
        self.what = what
        self.path = path
        self.reason = reason


def _fail(what: str, shown: str, reason: str, message: str) -> InputFileError:
    return InputFileError(message, what=what, path=shown, reason=reason)


def read_input(path: str | os.PathLike[str], *, what: str, max_bytes: int) -> bytes:
    """The whole content of the regular file at `path`, at most `max_bytes` long.

    Raises InputFileError with messages such as `ROM not found: PATH`, `ROM unreadable: PATH
    (Permission denied)`, `ROM is not a regular file: PATH (a FIFO)`, `ROM is too large: PATH
    (N bytes, at most M)`, `ROM path contains a NUL byte: PATH`.
    """
    name, shown = _checked_name(path, what)
    fd = _open(name, what, shown)
    try:
        _check_regular(fd, what, shown, max_bytes)
        return _read_capped(fd, what, shown, max_bytes)
    finally:
        os.close(fd)


def _checked_name(path, what: str) -> tuple:
    """The path as the OS takes it (str or bytes) and as shown in messages; refuses a NUL byte or nothing."""
    try:
        name = os.fspath(path)
    except TypeError:
        raise _fail(what, "?", "not a path", f"{what} path is not a path: {printable(repr(path))}") from None
    shown = printable(name)
    if (b"\0" if isinstance(name, bytes) else "\0") in name:
        raise _fail(what, shown, "path contains a NUL byte", f"{what} path contains a NUL byte: {shown}")
    if not name:
        raise _fail(what, shown, "empty path", f"{what} path is empty")
    return name, shown


def _open(name, what: str, shown: str) -> int:
    """A read-only descriptor that never blocks on a FIFO nor takes a terminal."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(name, flags)
    except FileNotFoundError:
        raise _fail(what, shown, "No such file or directory", f"{what} not found: {shown}") from None
    except UnicodeEncodeError:
        raise _fail(what, shown, "path cannot be encoded", f"{what} path cannot be encoded: {shown}") from None
    except ValueError as exc:  # anything else the OS layer refuses before the call
        raise _fail(what, shown, str(exc), f"{what} unreadable: {shown} ({exc})") from None
    except OSError as exc:
        reason = exc.strerror or errno.errorcode.get(exc.errno or 0, "error")
        raise _fail(what, shown, reason, f"{what} unreadable: {shown} ({reason})") from None


def _check_regular(fd: int, what: str, shown: str, max_bytes: int) -> None:
    """The open file is a regular file no larger than the cap (as fstat sees it)."""
    try:
        st = os.fstat(fd)
    except OSError as exc:
        raise _fail(what, shown, exc.strerror or "fstat failed",
                    f"{what} unreadable: {shown} ({exc.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        kind = next((k for test, k in _KINDS if test(st.st_mode)), "not a regular file")
        if stat.S_ISDIR(st.st_mode):  # the wording callers and users already know
            raise _fail(what, shown, "Is a directory", f"{what} unreadable: {shown} (Is a directory)")
        raise _fail(what, shown, f"not a regular file: {kind}",
                    f"{what} is not a regular file: {shown} ({kind})")
    if st.st_size > max_bytes:
        raise _too_large(what, shown, st.st_size, max_bytes)


def _read_capped(fd: int, what: str, shown: str, max_bytes: int) -> bytes:
    """Everything the file holds; refused when it holds more than the cap."""
    chunks: list[bytes] = []
    total = 0
    while total <= max_bytes:  # the file may grow after fstat: read at most one byte past the cap
        try:
            chunk = os.read(fd, min(max_bytes + 1 - total, 1 << 20))
        except OSError as exc:
            raise _fail(what, shown, exc.strerror or "read failed",
                        f"{what} unreadable: {shown} ({exc.strerror})") from None
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    if total > max_bytes:
        raise _too_large(what, shown, total, max_bytes, at_least=True)
    return b"".join(chunks)


def _too_large(what: str, shown: str, size: int, cap: int, at_least: bool = False) -> InputFileError:
    n = f"{'over ' if at_least else ''}{size:,} bytes, at most {cap:,}"
    return _fail(what, shown, f"too large: {n}", f"{what} is too large: {shown} ({n})")
