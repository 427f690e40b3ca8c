"""Claim holders that name their process well enough to tell, on the same machine, that it died.

A holder is ``host:pid:instance@boot/pidns/start``: the host name, the process id and a
random instance (several hubs of one process stay distinct), then what makes the pid
mean one process: the kernel's boot id, the pid namespace, and the process's start time
in clock ticks since boot (``/proc/<pid>/stat``). Two processes share a boot id and a
pid namespace only when they run on one kernel and see each other's pids (containers
on one host share the boot id but not the pid namespace), so only then does
:func:`holder_gone` look the pid up:

- no such process: gone (it was SIGKILLed, crashed, or stopped without releasing);
- a process with that pid but another start time: gone (the pid was reused);
- a zombie (killed, not yet reaped by its parent): gone;
- anything else, or anything that cannot be checked: not gone.

Everything else (another machine, another container, a holder without the suffix such as
``queue`` or a name from an older release, a system without ``/proc``) is never gone:
there the TTL is the only way its claims expire. A live process is never taken for dead,
since its pid answers with its own start time.
"""

from __future__ import annotations

import functools
import os
import re
import socket
import uuid
from dataclasses import dataclass

__all__ = [
    "HolderIdentity",
    "holder_gone",
    "machine_pattern",
    "on_this_machine",
    "parse_holder",
    "process_holder",
    "this_machine",
]

_HOLDER_RE = re.compile(r"^(?P<host>[^:@]*):(?P<pid>\d+):(?P<instance>[^@]*)@(?P<boot>[0-9a-f-]{8,64})/(?P<pidns>\d+)/(?P<start>\d+)$")


@dataclass(frozen=True, slots=True)
class HolderIdentity:
    """What a holder string says about its process."""

    host: str
    pid: int
    instance: str
    boot: str  # the kernel's boot id: one machine, one boot
    pidns: str  # the pid namespace's inode: pids mean the same processes
    start: int  # the process's start, clock ticks since boot


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None


@functools.cache
def this_machine() -> tuple[str, str] | None:
    """This process's (boot id, pid namespace), or None where they cannot be read (no ``/proc``)."""
    boot = _read("/proc/sys/kernel/random/boot_id")
    try:
        pidns = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    match = re.fullmatch(r"pid:\[(\d+)\]", pidns)
    if not boot or match is None:
        return None
    return boot.lower(), match.group(1)


def _stat(pid: int) -> tuple[str, int] | None:
    """``(state, start ticks)`` of a running pid, from ``/proc/<pid>/stat``; None when unreadable."""
    text = _read(f"/proc/{pid}/stat")
    if not text or ")" not in text:
        return None
    fields = text.rsplit(")", 1)[1].split()  # the command name may hold spaces and brackets
    try:
        return fields[0], int(fields[19])  # field 3 is the state, field 22 the start time
    except (IndexError, ValueError):
        return None


def process_holder(instance: str | None = None) -> str:
    """A holder name for a worker of this process (unique per call unless ``instance`` is given)."""
    name = f"{socket.gethostname().replace(':', '-').replace('@', '-')}:{os.getpid()}:{instance or uuid.uuid4().hex[:8]}"
    machine = this_machine()
    own = _stat(os.getpid())
    if machine is None or own is None:
        return name  # not checkable here: the TTL alone decides, as for any plain name
    return f"{name}@{machine[0]}/{machine[1]}/{own[1]}"


def parse_holder(holder: str) -> HolderIdentity | None:
    """The process a holder names, or None for a plain name (``queue``, ``worker-a``)."""
    match = _HOLDER_RE.match(holder or "")
    if match is None:
        return None
    return HolderIdentity(
        host=match["host"],
        pid=int(match["pid"]),
        instance=match["instance"],
        boot=match["boot"],
        pidns=match["pidns"],
        start=int(match["start"]),
    )


def on_this_machine(identity: HolderIdentity) -> bool:
    """Whether the holder's pid can be looked up here (same boot, same pid namespace)."""
    machine = this_machine()
    return machine is not None and (identity.boot, identity.pidns) == machine


def holder_gone(holder: str) -> bool:
    """Whether ``holder`` names a process of this machine that is no longer running (see the module docstring)."""
    identity = parse_holder(holder)
    if identity is None or not on_this_machine(identity):
        return False
    try:
        os.kill(identity.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # someone else's process with that pid: alive, its start unknown to us
    except OSError:
        return False
    stat = _stat(identity.pid)
    if stat is None:
        return False
    state, start = stat
    return start != identity.start or state in ("Z", "X")


def machine_pattern() -> str | None:
    """The LIKE pattern of holders whose process this machine can check (None: none can be)."""
    machine = this_machine()
    if machine is None:
        return None
    return f"%@{machine[0]}/{machine[1]}/%"
