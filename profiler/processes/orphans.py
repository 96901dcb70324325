"""Processes a measured script left behind, found and ended: forked children, daemons in
sessions of their own, and the zombies of children that already exited.

Place in the pipeline: the runner (``profiler.processes.launch.run_process``) calls ``adopt``
before it starts a measurement process and ``end_leftovers`` once that process has ended. The
profiler is made a child subreaper (Linux's ``PR_SET_CHILD_SUBREAPER``): a process the script
started and left running is re-parented to the profiler when the script's process ends, even if
it moved to a session of its own (``start_new_session=True``, a double fork), where the
process-group kill would miss it. Those processes, and what is left of the measured process's
group, are ended; processes that already exited (zombies) are reaped, and not reported as
running. Reading ``/proc``: Linux only; elsewhere only the process group is ended.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time
from pathlib import Path

#: ``prctl(PR_SET_CHILD_SUBREAPER, 1)``.
_PR_SET_CHILD_SUBREAPER = 36
#: How long a left-over process gets after SIGTERM before SIGKILL.
GRACE_S = 2.0

_lock = threading.Lock()
#: The processes the runner started itself (never ended as left-overs of another).
_started: set[int] = set()
_subreaper = False


def adopt() -> None:
    """Make this process the subreaper of what its measured processes leave (once)."""
    global _subreaper
    if _subreaper:
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        _subreaper = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        _subreaper = False


def started(pid: int) -> None:
    """Record a process the runner started (``forget`` it once it has been waited for)."""
    with _lock:
        _started.add(pid)


def forget(pid: int) -> None:
    with _lock:
        _started.discard(pid)


def _stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, parent pid, process group, session) of ``pid`` from ``/proc``, or None if it is
    gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may hold spaces: split after its last ')'.
    fields = text[text.rfind(")") + 2 :].split()
    try:
        return fields[0], int(fields[1]), int(fields[2]), int(fields[3])
    except (IndexError, ValueError):
        return None


def _pids() -> list[int]:
    try:
        return [int(n) for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return []


def running(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def leftovers(pgid: int) -> tuple[list[int], list[int]]:
    """(running, exited) processes that are left: the members of group ``pgid``, and the
    children of this process it did not start itself (orphans re-parented to it).

    A child in this process's own session is never an orphan of the measured script (which
    runs in a session of its own, and whose descendants cannot join this one): it is a helper
    this process started, or a sibling started by the program that runs the profiler in-process.
    Ending it, or its group, would end that program too (a test suite, its ``make``)."""
    me = os.getpid()
    own = _own_ids()
    with _lock:
        ours = set(_started)
    alive: list[int] = []
    dead: list[int] = []
    for pid in _pids():
        if pid == me or pid in ours:
            continue
        st = _stat(pid)
        if st is None:
            continue
        state, ppid, group, session = st
        orphan = ppid == me and _subreaper and session != own[1]
        if (group == pgid and group != own[0]) or orphan:
            (dead if state in ("Z", "X") else alive).append(pid)
    return alive, dead


def _reap(pids: list[int]) -> None:
    """Collect the exit status of those of ``pids`` that are this process's children."""
    me = os.getpid()
    for pid in pids:
        st = _stat(pid)
        if st is None or st[1] != me:
            continue
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def end_leftovers(pgid: int) -> bool:
    """End what the measured process (group ``pgid``) left running, and reap the zombies;
    True if anything was still running."""
    alive, dead = leftovers(pgid)
    _reap(dead)
    if not alive:
        _kill_group_only(pgid)
        return False
    groups = {pgid}
    for pid in alive:
        st = _stat(pid)
        if st is not None:
            groups.add(st[2])
    groups.discard(_own_ids()[0])  # never this process's own group (see ``leftovers``)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for g in groups:
            try:
                os.killpg(g, sig)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in alive:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + (GRACE_S if sig == signal.SIGTERM else 5.0)
        while time.monotonic() < deadline:
            _reap(alive)
            if not any(running(p) for p in alive):
                break
            time.sleep(0.05)
        else:
            continue
        break
    _reap(alive)
    return True


def _own_ids() -> tuple[int, int]:
    """This process's (process group, session)."""
    return os.getpgrp(), os.getsid(0)


def _kill_group_only(pgid: int) -> None:
    # Nothing runs there; a group kill is harmless and covers a process not yet in /proc.
    if pgid == _own_ids()[0]:
        return
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
