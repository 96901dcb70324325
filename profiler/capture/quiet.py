"""Quiet by default: the TensorFlow log lines the profiler's own calls cause stay out of the
script's output, and are kept in the workload's ``profiler-tf.log``.

Place in the pipeline: used by the phases inside the measured process (the framework phase's
``tf.profiler.experimental`` start/stop, its FULL_TRACE steps and its flops count) and, for a
script's process, by the runner's copy of its stderr to the terminal
(``profiler.processes.runner``). ``PROFILER_LINES`` is the one table of the lines meant.

``held(workload_dir)`` brackets one of our calls. For its duration:

* fd 2 (where TensorFlow's C++ logging writes) goes into ``stderr-held.log`` in the workload's
  folder; at the end each line that matches ``PROFILER_LINES`` is appended to
  ``profiler-tf.log`` and every other byte is written to the real fd 2, in order. The redirect
  is process-wide, so the script's own stderr lines of that moment are kept, only delayed; the
  file (not a pipe) keeps them on disk if the process dies inside the window, and Python's
  faulthandler writes to the real stderr meanwhile, so a crash dump still reaches it;
* records of the ``tensorflow`` Python logger and Python warnings raised on a thread inside a
  window go to ``profiler-tf.log`` (a notebook's ``sys.stderr`` is not fd 2); other threads'
  records and warnings (the script's) are untouched.

Windows opened while one is open (another thread, or nested) share it; the last to end closes it.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import re
import sys
import threading
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

#: Where the lines kept out of the output go, in the workload's folder.
LOG_NAME = "profiler-tf.log"
#: fd 2's content during a window; removed at its end (left only if the process died in it).
HELD_NAME = "stderr-held.log"


@dataclass(frozen=True)
class ProfilerLine:
    """A line (and the lines that continue its record) that one of the profiler's calls causes.

    Attributes:
        pattern: matches the line (without its newline).
        cause: which of our calls writes it, and why it is not the script's.
        then: the record's further lines, in order; each is dropped only right after the one
            before it.
        tee: also dropped by the runner's copy of a script's stderr to the terminal, outside any
            window: only lines the script could not print of its own in its process (TF's C++
            INFO/WARNING lines are off there: ``launch.CHILD_ENV``).
    """

    pattern: re.Pattern[str]
    cause: str
    then: tuple[re.Pattern[str], ...] = ()
    tee: bool = True


def _native(source: str, message: str) -> re.Pattern[str]:
    """A line of TensorFlow's C++ logging from ``source``: absl's format
    (``W0000 00:00:1796.86 9439 session_manager.cc:55] ...``) or TF's older one
    (``2024-01-02 03:04:05.678: I tensorflow/tsl/.../profiler_session.cc:104] ...``)."""
    prefix = r"(?:[IWEF]\d{4} [\d:.]+ +\d+ |\d{4}-\d\d-\d\d [\d:.]+: [IWEF] (?:\S+/)?)"
    return re.compile(rf"^{prefix}{re.escape(source)}:\d+\] {message}")


#: The lines, as TF 2.21 writes them (tests/test_quiet.py runs them for real).
PROFILER_LINES: tuple[ProfilerLine, ...] = (
    ProfilerLine(
        _native("session_manager.cc", r"\w+ expects an i value\.$"),
        "tf.profiler.experimental.start: one per ProfilerOptions field (delay_ms too), "
        "with any options",
    ),
    ProfilerLine(
        _native(
            "profiler_session.cc",
            r"Profiler session (?:initializing|started|collecting data|tear down)\.$",
        ),
        "tf.profiler.experimental.start/stop, and each FULL_TRACE session.run (TF1)",
    ),
    ProfilerLine(
        _native("save_profile.cc", r"Collecting XSpace to repository: "),
        "tf.profiler.experimental.stop writing the capture",
    ),
    ProfilerLine(
        _native("xplane_to_step_stats.cc", r"GPU trace was not collected\.$"),
        "each FULL_TRACE session.run (TF1) on a machine without a GPU",
    ),
    ProfilerLine(
        re.compile(r"^WARNING: All log messages before absl::InitializeLog\(\) is called"),
        "absl's note before the process's first C++ log line, when that line is one of ours",
        tee=False,
    ),
    ProfilerLine(
        re.compile(
            r"^WARNING:tensorflow:From \S*flops_registry\.py:\d+: "
            r"tensor_shape_from_node_def_name .* is deprecated"
        ),
        "the flops count (tf.compat.v1.profiler float_operation): a Python deprecation record",
        then=(
            re.compile(r"^Instructions for updating:$"),
            re.compile(r"^This API was designed for TensorFlow v1\. "),
        ),
        # The script may count flops itself: a Python record, printed whatever the log level.
        tee=False,
    ),
)


class LineFilter:
    """Which lines of a stream are the profiler's (``drops``), record by record, in order."""

    def __init__(self, rules: Iterable[ProfilerLine] = PROFILER_LINES) -> None:
        self.rules = tuple(rules)
        self._then: tuple[re.Pattern[str], ...] = ()

    def drops(self, line: str) -> bool:
        """True if ``line`` (its newline stripped or not) is one of the profiler's lines."""
        text = line.rstrip("\r\n")
        if self._then and self._then[0].search(text):
            self._then = self._then[1:]
            return True
        self._then = ()
        for rule in self.rules:
            if rule.pattern.search(text):
                self._then = rule.then
                return True
        return False

    def split(self, data: bytes) -> tuple[bytes, bytes]:
        """``data``'s lines as (kept, dropped), each in order; bytes are kept as they are."""
        kept: list[bytes] = []
        dropped: list[bytes] = []
        for line in data.splitlines(keepends=True):
            text = line.decode("utf-8", errors="surrogateescape")
            (dropped if self.drops(text) else kept).append(line)
        return b"".join(kept), b"".join(dropped)


#: The runner's terminal filter: the rows it may drop outside any window.
TEE_LINES = tuple(rule for rule in PROFILER_LINES if rule.tee)


class _Window:
    """The open redirect: fd 2 into the held file, the threads inside, what they logged."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.threads: dict[int, int] = {}
        self.records: list[str] = []
        self.saved_fd = -1
        self.held_fd = -1
        self.showwarning: Any = None

    def open(self) -> None:
        _flush_stderr()
        self.folder.mkdir(parents=True, exist_ok=True)
        flags = os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
        self.held_fd = os.open(self.folder / HELD_NAME, flags, 0o644)
        self.saved_fd = os.dup(2)
        os.dup2(self.held_fd, 2)
        if faulthandler.is_enabled():
            faulthandler.enable(file=self.saved_fd, all_threads=True)
        _TF_LOGGER.addFilter(self.divert)
        self.showwarning = warnings.showwarning
        warnings.showwarning = self.show

    def divert(self, record: logging.LogRecord) -> bool:
        """The ``tensorflow`` logger's filter: a record of a thread inside is kept instead."""
        if record.thread not in self.threads:
            return True
        self.records.append(f"{record.levelname}:{record.name}:{record.getMessage()}\n")
        return False

    def show(
        self,
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        """``warnings.showwarning`` while open: a warning of a thread inside is kept instead."""
        if threading.get_ident() in self.threads:
            text = warnings.formatwarning(message, category, filename, lineno, line)
            self.records.append(text)
        else:
            self.showwarning(message, category, filename, lineno, file, line)

    def close(self) -> None:
        if warnings.showwarning == self.show:  # unless the script replaced it meanwhile
            warnings.showwarning = self.showwarning
        _TF_LOGGER.removeFilter(self.divert)
        _flush_stderr()
        os.dup2(self.saved_fd, 2)
        if faulthandler.is_enabled():
            faulthandler.enable(file=2, all_threads=True)
        os.close(self.saved_fd)
        try:
            os.lseek(self.held_fd, 0, os.SEEK_SET)
            chunks = []
            while chunk := os.read(self.held_fd, 1 << 20):
                chunks.append(chunk)
        finally:
            os.close(self.held_fd)
        kept, dropped = LineFilter().split(b"".join(chunks))
        _write_all(2, kept)
        own = dropped + "".join(self.records).encode("utf-8", errors="replace")
        if own:
            with open(self.folder / LOG_NAME, "ab") as log:
                log.write(own)
        (self.folder / HELD_NAME).unlink(missing_ok=True)


_TF_LOGGER = logging.getLogger("tensorflow")
_lock = threading.Lock()
_window: _Window | None = None


@contextmanager
def held(workload_dir: Path) -> Iterator[None]:
    """Keep the TensorFlow lines of the call inside out of the output (module docstring).

    Args:
        workload_dir: the workload's folder: ``profiler-tf.log`` and the held file go there.
    """
    global _window
    me = threading.get_ident()
    with _lock:
        window = _window
        if window is None:
            window = _Window(Path(workload_dir))
            try:
                window.open()
            except OSError:  # an unwritable folder: the call runs unquieted
                window = None
            _window = window
        if window is not None:
            window.threads[me] = window.threads.get(me, 0) + 1
    try:
        yield
    finally:
        if window is not None:
            with _lock:
                window.threads[me] -= 1
                if not window.threads[me]:
                    del window.threads[me]
                if not window.threads:
                    _window = None
                    window.close()


def _flush_stderr() -> None:
    try:
        if sys.stderr is not None:
            sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError:  # stderr went away: nothing to show it on
        pass
