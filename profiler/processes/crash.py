"""Where a script's process crashed outside Python, read from the dump that Python's
faulthandler writes to its stderr (every measurement process runs with
``PYTHONFAULTHANDLER=1``).

A SIGSEGV or SIGABRT inside a native library leaves no traceback and no ``error.txt``: without
the dump, all a run could say is the signal. With it, the error names the Python frame that
was running on the crashing thread (``stop (tensorflow/python/profiler/profiler_v2.py:149)``)
and, when the profiler's own code called it, the phase that did.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

#: How much of the end of a stderr log is read for the dump.
READ_BYTES = 256 * 1024
#: Frames of the crashing thread kept in the error's details.
DUMP_FRAMES = 10

_FATAL = re.compile(r"^Fatal Python error: (?P<what>.+)$", re.M)
_THREAD = re.compile(r"^(Current thread 0x|Thread 0x|Stack ).*\(most recent call first\):$")
_FRAME = re.compile(r'^  File "(?P<path>[^"]+)", line (?P<line>\d+) in (?P<fn>\S+)$')
_LIBRARY = re.compile(r"^.*(?:site-packages|dist-packages|lib/python3\.\d+)/(?P<rest>.+)$")
_OWN = str(Path(__file__).resolve().parents[1]).replace("\\", "/") + "/"
_PHASE = re.compile(r"profiler/capture/phases/(?P<phase>\w+)\.py$")


@dataclass(frozen=True)
class Frame:
    path: str
    line: int
    function: str

    @property
    def short_path(self) -> str:
        """A library's file from its package (``tensorflow/python/...``, ``ctypes/...``), else
        the file's name."""
        m = _LIBRARY.search(self.path.replace("\\", "/"))
        return m["rest"] if m else Path(self.path).name

    def __str__(self) -> str:
        return f"{self.function} ({self.short_path}:{self.line})"


@dataclass(frozen=True)
class NativeCrash:
    """The last fatal error in a stderr log: what it was and the crashing thread's frames
    (innermost first)."""

    what: str
    frames: tuple[Frame, ...]

    @property
    def phase(self) -> str | None:
        """The profiler phase whose code was on the crashing thread's stack, if any."""
        for f in self.frames:
            m = _PHASE.search(f.path.replace("\\", "/"))
            if m and m["phase"] != "__init__":
                return m["phase"]
        return None

    @property
    def in_tensorflow(self) -> bool:
        return bool(self.frames) and self.frames[0].short_path.startswith("tensorflow/")

    @property
    def own_frame(self) -> Frame | None:
        """The innermost frame of the script's own code (neither a library's nor the
        profiler's)."""
        for f in self.frames:
            p = f.path.replace("\\", "/")
            if not (_LIBRARY.search(p) or p.startswith(_OWN) or p.startswith("<")):
                return f
        return None

    def where(self) -> str:
        """``in stop (tensorflow/.../profiler_v2.py:149), called by the profiler's framework
        phase`` or ``in string_at (ctypes/__init__.py:519), from <module> (train.py:7)``."""
        if not self.frames:
            return "with no Python frame on the crashing thread"
        text = f"in {self.frames[0]}"
        own = self.own_frame
        if self.phase:
            text += f", called by the profiler's {self.phase} phase"
        elif own is not None and own != self.frames[0]:
            text += f", from {own}"
        return text

    def dump(self) -> str:
        lines = [f"Fatal Python error: {self.what}", "its thread (most recent call first):"]
        lines += [f"  {f}" for f in self.frames[:DUMP_FRAMES]]
        return "\n".join(lines)


def parse(text: str) -> NativeCrash | None:
    """The last faulthandler dump in ``text``, or None."""
    found = list(_FATAL.finditer(text))
    if not found:
        return None
    last = found[-1]
    frames: list[Frame] = []
    in_current = False
    for line in text[last.end() :].splitlines():
        if _THREAD.match(line):
            if in_current:
                break
            in_current = not line.startswith("Thread ")
            continue
        m = _FRAME.match(line)
        if m and in_current:
            frames.append(Frame(m["path"], int(m["line"]), m["fn"]))
        elif in_current and frames and not line.strip():
            break
    return NativeCrash(last["what"].strip(), tuple(frames))


def read(path: Path) -> NativeCrash | None:
    """The last faulthandler dump at the end of the log at ``path``, or None."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(size - READ_BYTES, 0))
            text = f.read().decode(errors="replace")
    except OSError:
        return None
    return parse(text)
