"""No process outlives the run: measurement processes die with the profiler, and the profiler
handles SIGTERM and SIGHUP as it handles Ctrl-C.

Place in the pipeline: both sides of a run. ``die_with_parent`` is the ``preexec_fn`` of every
measurement process the runner starts (``profiler.processes.runner``): Linux's parent-death
signal kills it if the profiler is killed, even by SIGKILL. ``watch_parent`` runs in each
measurement process as well: if its parent changes (the profiler died before the signal was
armed, or on a system without it), it kills its own process group: py-spy and anything the
script started go with it.
``Terminated`` is what the profiler's SIGTERM/SIGHUP handler raises (``install``): a
``KeyboardInterrupt``, so every path that keeps a partial run on Ctrl-C keeps it on those too,
with exit status 128 + the signal (143, 129).
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

#: ``prctl(PR_SET_PDEATHSIG, sig)``.
_PR_SET_PDEATHSIG = 1
#: How often a measurement process checks that its parent is still the profiler.
WATCH_S = 0.5


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP reached the profiler: stop as Ctrl-C does, exit 128 + ``signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


def install() -> None:
    """SIGTERM and SIGHUP raise ``Terminated`` in the main thread (the profiler's parent side),
    and SIGINT raises ``KeyboardInterrupt`` even where it was ignored when the profiler started
    (a shell starts background jobs so: ``kill -INT`` would otherwise leave its workers run)."""

    def handler(signum: int, _frame: Any) -> None:
        raise Terminated(signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def exit_status(exc: BaseException) -> int:
    """130 for Ctrl-C, 128 + the signal for SIGTERM/SIGHUP."""
    return exc.exit_status if isinstance(exc, Terminated) else 130


def die_with_parent() -> None:
    """In a child before it execs: SIGKILL when the parent dies (Linux; a no-op elsewhere)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def watch_parent(on_tick: Callable[[], None] | None = None) -> threading.Thread:
    """A daemon thread that kills this process's group when its parent goes away; ``on_tick``
    runs at every check (a heartbeat)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(WATCH_S)
            if os.getppid() != parent:
                try:
                    os.killpg(os.getpgrp(), signal.SIGKILL)
                except OSError:
                    os._exit(137)
            if on_tick is not None:
                try:
                    on_tick()
                except Exception:  # a heartbeat is best effort
                    pass

    thread = threading.Thread(target=watch, name="profiler-parent-watch", daemon=True)
    thread.start()
    return thread
