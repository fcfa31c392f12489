"""Where a `policy: cli` client runs: out of reach of the repository, the assets and the evidence.

A coding agent reads whatever its harness leaves in reach, and the answers are all around oakwatch
(the ROM, the game definitions with every milestone's RAM address, the walkthroughs, the evidence).
So the client starts in an empty folder (its working directory and its HOME), with only PATH and
the environment variables its condition names, and, where the system offers one, in a bubblewrap
(`bwrap`, Debian's `bubblewrap`) user and mount namespace (else util-linux's `unshare` and a chroot
built alike, where the system lets it make a user namespace) whose file system holds only the system
(/usr, /etc and the /bin, /lib links), a fresh /tmp, the empty folder, the MCP config file, the
client's own executable and the paths its condition lists in `client_reads` (read-only). The network
is shared: the client calls its provider and oakwatch's server on 127.0.0.1. Which isolation ran is
recorded with the result (provenance.tool_server.client.isolation).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

# The system a program needs to start: read-only. /bin, /lib... are links into /usr on current
# Debian (kept as links), directories on older systems (bound read-only).
SYSTEM_DIRS = ("/usr", "/etc")
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
PROBE_TIMEOUT_S = 10


@functools.cache
def bwrap_path() -> str | None:
    """bwrap, when it is installed and this system lets it make a user namespace (a container may not)."""
    exe = shutil.which("bwrap")
    if exe is None:
        return None
    try:
        done = subprocess.run([exe, *system_binds(), "--unshare-user", "--unshare-pid", "--die-with-parent",
                               "--", "/bin/sh", "-c", "exit 0"], capture_output=True, timeout=PROBE_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return exe if done.returncode == 0 else None


@functools.cache
def unshare_paths() -> tuple[str, str] | None:
    """util-linux's unshare and coreutils' chroot, when this system lets unshare make a user namespace."""
    exe, chroot = shutil.which("unshare"), shutil.which("chroot")
    if exe is None or chroot is None:
        return None
    try:
        done = subprocess.run([exe, *UNSHARE_FLAGS, "--", "/bin/sh", "-c", "exit 0"], capture_output=True,
                              timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (exe, chroot) if done.returncode == 0 else None


def isolation_kind() -> str:
    """`bwrap` where it works here, else `unshare` (the same file system, built by a shell script in
    unshare's namespaces), else `none` (the empty folder and the named environment only)."""
    if bwrap_path() is not None:
        return "bwrap"
    return "unshare" if unshare_paths() is not None else "none"


UNSHARE_FLAGS = ("--user", "--map-root-user", "--mount", "--pid", "--fork", "--kill-child", "--ipc", "--uts")
# Run by /bin/sh inside unshare's namespaces: a tmpfs root holding what bwrap's would, then chroot into
# it. Arguments: ROOT WORK CONFIG N READ... -- CHROOT ARGV... (every path an argument: nothing is quoted).
UNSHARE_SETUP = r"""
set -eu
root=$1 work=$2 config=$3 n=$4
shift 4
mount -t tmpfs -o mode=0755 oakwatch-root "$root"
bind_ro() {
  if [ -d "$1" ]; then mkdir -p "$root$1"; else mkdir -p "$root$(dirname "$1")"; [ -e "$root$1" ] || : > "$root$1"; fi
  mount --bind "$1" "$root$1"
  mount -o remount,bind,ro "$root$1"
}
for d in /usr /etc; do if [ -d "$d" ]; then bind_ro "$d"; fi; done
for l in /bin /sbin /lib /lib32 /lib64 /libx32; do
  if [ -L "$l" ]; then ln -s "$(readlink "$l")" "$root$l"; elif [ -d "$l" ]; then bind_ro "$l"; fi
done
mkdir -p "$root/proc" "$root/dev" "$root/tmp"
mount -t proc proc "$root/proc"
for f in null zero full random urandom tty; do : > "$root/dev/$f"; mount --bind "/dev/$f" "$root/dev/$f"; done
ln -s /proc/self/fd "$root/dev/fd"
mount -t tmpfs -o mode=1777 oakwatch-tmp "$root/tmp"
mkdir -p "$root$work"
mount --bind "$work" "$root$work"
bind_ro "$config"
while [ "$n" -gt 0 ]; do bind_ro "$1"; shift; n=$((n - 1)); done
shift
chroot=$1
shift
exec "$chroot" "$root" /bin/sh -c 'cd "$0" && exec "$@"' "$work" "$@"
"""


def system_binds() -> list[str]:
    args: list[str] = []
    for d in SYSTEM_DIRS:
        if os.path.isdir(d):
            args += ["--ro-bind", d, d]
    for link in SYSTEM_LINKS:
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    return args


def client_env(names: Iterable[str], home: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The client's whole environment: PATH (to find its own programs), HOME (its empty folder) and the
    variables its condition names, where set. Nothing else of the user's environment."""
    environ = os.environ if environ is None else environ
    env = {"PATH": environ.get("PATH", os.defpath), "HOME": str(home)}
    for name in names:
        if name in environ and name != "HOME":
            env[name] = environ[name]
    return env


def wrapped(argv: list[str], *, kind: str, work: Path, config_dir: Path, reads: Iterable[Path],
            root: Path | None = None) -> list[str]:
    """`argv` as started under `kind` isolation: in bwrap's namespaces, in unshare's (`root`: an empty
    folder of ours to build its file system on), or as is (cwd and env are the caller's)."""
    if kind == "none":
        return list(argv)
    if kind == "unshare":
        found = unshare_paths()
        assert found is not None and root is not None, "isolation_kind said unshare"
        exe, chroot = found
        reads = [str(r) for r in reads]
        return [exe, *UNSHARE_FLAGS, "--", "/bin/sh", "-c", UNSHARE_SETUP, "oakwatch-sandbox", str(root), str(work),
                str(config_dir), str(len(reads)), *reads, "--", chroot, *argv]
    exe = bwrap_path()
    assert exe is not None, "isolation_kind said bwrap"
    args = [exe, *system_binds(), "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
            "--bind", str(work), str(work), "--ro-bind", str(config_dir), str(config_dir)]
    for path in reads:
        args += ["--ro-bind", str(path), str(path)]
    args += ["--chdir", str(work), "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
             "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--", *argv]
    return args


def overlap(path: Path, protected: Iterable[tuple[str, Path]]) -> str | None:
    """What of `protected` (what it is, its path) `path` would put in reach: itself, a folder holding
    it, or a folder inside it; None when nothing."""
    p = _real(path)
    for what, other in protected:
        o = _real(other)
        if p == o or p in o.parents or o in p.parents:
            return f"{what} ({other})"
    return None


def _real(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path.absolute()
