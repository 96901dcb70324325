"""Where a script's process crashed outside Python, read from the dump that Python's
faulthandler writes to its stderr (every measurement process runs with
``PYTHONFAULTHANDLER=1``).

A SIGSEGV or SIGABRT inside a native library leaves no traceback and no ``error.txt``: without
the dump, all a run could say is the signal. With it, the error names the Python frame that
was running on the crashing thread (``stop (tensorflow/python/profiler/profiler_v2.py:149)``)
and, when the profiler's own code called it, the phase that did.

A process killed by SIGKILL may have been the kernel's out-of-memory killer's: ``oom_kills``
reads the kernel's counters (``/proc/vmstat`` and the cgroup's ``memory.events`` or
``memory.oom_control``) before and after it runs and ``kernel_log_kill`` its log, and
``sigkill_out_of_memory`` says "out of memory" as a fact only where one of them names the kill,
"likely" where only the memory record's rise to its peak does.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def killed_by(signum: int) -> str:
    """``killed by signal 9 (SIGKILL)``: how every record says that a measurement process (a
    workload's, the experiments', the efficiency study's) ended by a signal."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = "unknown"
    return f"killed by signal {signum} ({name})"


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


# --- out of memory --------------------------------------------------------------------------

#: The kernel's counts of out-of-memory kills: system-wide, and for a cgroup (v2, v1).
_VMSTAT = Path("/proc/vmstat")
_CGROUP_ROOT = Path("/sys/fs/cgroup")
#: A SIGKILL with resident memory near its peak and this share above its median over the run
#: (the samples are spread evenly in time) is "rising": an out-of-memory kill is likely; a
#: process killed at the size it held most of the run is not.
NEAR_PEAK = 0.9
RISEN_SHARE = 0.2
_LOG_KILL = re.compile(r"(?:Killed process|oom-kill:.*\bpid=)\s*(?P<pid>\d+)")


def _counter(path: Path, key: str) -> int | None:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        return None
    return None


def _cgroup_files(proc_cgroup: Path = Path("/proc/self/cgroup")) -> list[Path]:
    """This process's cgroup files that count out-of-memory kills (``memory.events`` in v2,
    ``memory.oom_control`` in v1); a process the profiler starts is in the same cgroup."""
    out: list[Path] = []
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        _, controllers, path = line.split(":", 2) if line.count(":") >= 2 else ("", "", "")
        rel = path.lstrip("/")
        if controllers == "":
            out += [_CGROUP_ROOT / rel / "memory.events"]
            out += [_CGROUP_ROOT / "unified" / rel / "memory.events"]
        elif "memory" in controllers.split(","):
            out += [_CGROUP_ROOT / "memory" / rel / "memory.oom_control"]
    return [p for p in out if p.is_file()]


def oom_kills() -> dict[str, int]:
    """The kernel's out-of-memory kill counters readable here, by file: read before and after
    a process runs, a count that rose says the kernel's OOM killer ran meanwhile."""
    found = {}
    for path, key in [(_VMSTAT, "oom_kill"), *((p, "oom_kill") for p in _cgroup_files())]:
        value = _counter(path, key)
        if value is not None:
            found[str(path)] = value
    return found


def kernel_log_kill(pid: int) -> str | None:
    """The kernel log's line that says the OOM killer killed ``pid`` (``dmesg``, where this
    user may read it), or None."""
    import subprocess

    try:
        text = subprocess.run(
            ["dmesg"], capture_output=True, text=True, timeout=2.0, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in reversed(text.splitlines()[-2000:]):
        m = _LOG_KILL.search(line)
        if m and int(m["pid"]) == pid:
            return line.split("] ", 1)[-1].strip()
    return None


def _mb(b: float) -> str:
    return f"{b / 2**20:,.0f} MB"


def _steps(n: int) -> str:
    return f"{n:,} step{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class OutOfMemory:
    """How a process ran out of memory (the script record's ``memory.out_of_memory``).

    Attributes:
        how: the exception's class (``MemoryError``, ``ResourceExhaustedError``) or
            ``SIGKILL``.
        rss_bytes: resident bytes at the last sample before the end (None: not measured).
        steps: the steps done then.
        confirmed: a SIGKILL the kernel says was its OOM killer's (a counter rose, or its
            log names the process); False: likely, from the resident memory only.
        evidence: what says so, in words.
    """

    how: str
    rss_bytes: int | None
    steps: int
    confirmed: bool = True
    evidence: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "how": self.how,
            "rss_bytes": self.rss_bytes,
            "steps": self.steps,
            "confirmed": self.confirmed,
            "evidence": self.evidence,
        }

    def sentence(self) -> str:
        """What ended the script, for its message and its error's first line."""
        at = _mb(self.rss_bytes) if self.rss_bytes is not None else "a size not measured"
        if self.how != "SIGKILL":
            return (
                f"the script ran out of memory: it raised {self.how} after "
                f"{_steps(self.steps)}, with {at} resident"
            )
        if self.confirmed:
            return (
                f"the script ran out of memory: the kernel's out-of-memory killer ended its "
                f"process (SIGKILL) after at least {_steps(self.steps)}, with resident memory "
                f"at {at} ({self.evidence})"
            )
        return (
            f"the script likely ran out of memory: its process was killed by SIGKILL with "
            f"resident memory rising to {at} after at least {_steps(self.steps)}: likely the "
            f"out-of-memory killer ({self.evidence})"
        )


def sigkill_out_of_memory(
    memory: Mapping[str, Any] | None,
    before: Mapping[str, int],
    after: Mapping[str, int],
    log_line: str | None,
    steps: int,
) -> OutOfMemory | None:
    """A process killed by SIGKILL, read as out of memory: confirmed where the kernel's log
    names it or one of its oom_kill counters rose while it ran; likely where its resident
    memory was rising to its peak when it died; else None (a SIGKILL at a steady size)."""
    rss = memory.get("rss_bytes") if memory and memory.get("measured") else None
    last = int(rss[-1]) if rss else None
    if log_line:
        return OutOfMemory("SIGKILL", last, steps, True, f"the kernel's log: {log_line}")
    rose = [f"{k} oom_kill {before[k]} -> {v}" for k, v in after.items() if v > before.get(k, v)]
    if rose:
        return OutOfMemory("SIGKILL", last, steps, True, "; ".join(rose))
    if not rss or last is None:
        return None
    held = sorted(int(r) for r in rss)[len(rss) // 2]
    peak = max(int(memory.get("peak_bytes") or 0), max(rss)) if memory else max(rss)
    if last < NEAR_PEAK * peak or last < (1 + RISEN_SHARE) * held:
        return None
    why = (
        "not confirmed: the kernel's oom_kill counters did not move; a user-space killer "
        "such as systemd-oomd or earlyoom, a job scheduler's limit or a user sent it"
        if after
        else "not confirmed: no oom_kill counter or kernel log is readable here"
    )
    return OutOfMemory("SIGKILL", last, steps, False, why)
