"""py-spy captures -> model ``Sample`` stacks, and the views derived from one capture.

Place in the pipeline: the sampled phase (``profiler.capture.phases.sampled``) records py-spy once,
in speedscope format (structured: per-thread profiles, frames with separate file and line); this
collector turns that file into ``Sample`` objects (``profiler.model``); the other views of the same
samples (py-spy's collapsed-stack text, a flame graph coloured by cause) are rendered from them
after the run (``profiler.reports.flamegraph``). py-spy writes only one format per capture, so
nothing is recorded twice. ``parse_collapsed`` reads the collapsed text back.

Frames: py-spy names Python frames by qualified name (``BaseSession._run``,
``build.<locals>.step``) with file and line; native frames (``--native``) carry the shared
object as their file and line 0, or a bare address (``0x7f...``) when the symbol is unknown.

Threads: a ``Sample``'s ``thread`` is ``"main"`` for the workload's main thread (native thread id
== process id) and ``"<name> <tid>"`` for others; analysis reads the main thread only.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from profiler.model import Frame, Sample

MAIN_THREAD = "main"

#: py-spy's profile name per thread: ``Thread 7672 "MainThread"`` (the name may be empty).
_THREAD_NAME = re.compile(r'Thread (?P<tid>\d+)(?: "(?P<name>.*)")?')
#: Pseudo frames py-spy adds at the root with ``--threads`` / ``--subprocesses``.
_PSEUDO_FRAME = re.compile(r"thread \((0x)?[0-9a-fA-F]+\)|process \d+:.*")
#: One frame of a collapsed line: ``function (file:line)`` or ``function (file)``.
_COLLAPSED_FRAME = re.compile(r"(?P<function>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)")


def is_native(function: str, file: str, line: int) -> bool:
    """Whether a py-spy frame comes from compiled code (line 0 and not a Python source)."""
    if line > 0 or file.startswith("<"):
        return False
    return not file.endswith((".py", ".pyx", ".pyw"))


def thread_label(profile_name: str, main_tid: int | None) -> str:
    """Our label for a py-spy thread: ``main`` for ``main_tid``, else ``"<name> <tid>"``."""
    m = _THREAD_NAME.fullmatch(profile_name.strip())
    if m is None:
        return profile_name
    tid = int(m.group("tid"))
    if main_tid is not None and tid == main_tid:
        return MAIN_THREAD
    return f"{m.group('name') or 'thread'} {tid}"


def _frame(raw: dict[str, Any]) -> Frame:
    function = str(raw.get("name", "?"))
    file = str(raw.get("file") or "")
    line = int(raw.get("line") or 0)
    return Frame(function=function, file=file, line=line, native=is_native(function, file, line))


def _is_pseudo(frame: Frame) -> bool:
    return frame.file == "" and frame.line == 0 and bool(_PSEUDO_FRAME.fullmatch(frame.function))


def _aggregate(stacks: Iterable[tuple[str, tuple[Frame, ...]]]) -> tuple[Sample, ...]:
    counts: Counter[tuple[str, tuple[Frame, ...]]] = Counter(stacks)
    # Deterministic order: most sampled first, then by thread and stack text.
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0][0], _stack_key(kv[0][1])))
    return tuple(Sample(frames=frames, count=n, thread=t) for (t, frames), n in ordered)


def _stack_key(frames: tuple[Frame, ...]) -> str:
    return ";".join(frame_text(f) for f in frames)


def parse_speedscope(
    doc: dict[str, Any], main_tid: int | None = None, head: float | None = None
) -> tuple[Sample, ...]:
    """Samples of a py-spy speedscope document (one profile per thread, stacks root first).

    Args:
        doc: the parsed JSON.
        main_tid: the workload's main thread id (its pid); that thread is labelled ``main``.
        head: keep only this first fraction of each thread's samples (py-spy writes a
            thread's samples in the order it took them).

    Returns:
        Distinct stacks with their counts, most sampled first.
    """
    frames = [_frame(f) for f in doc.get("shared", {}).get("frames", [])]
    stacks: list[tuple[str, tuple[Frame, ...]]] = []
    for profile in doc.get("profiles", []):
        thread = thread_label(str(profile.get("name", "")), main_tid)
        taken = profile.get("samples", [])
        if head is not None:
            taken = taken[: round(len(taken) * min(max(head, 0.0), 1.0))]
        for idx in taken:
            stack = tuple(frames[i] for i in idx)
            stacks.append((thread, tuple(f for f in stack if not _is_pseudo(f))))
    return _aggregate(stacks)


def read_speedscope(
    path: Path, main_tid: int | None = None, head: float | None = None
) -> tuple[Sample, ...]:
    """``parse_speedscope`` of a file."""
    return parse_speedscope(json.loads(path.read_text(encoding="utf-8")), main_tid, head)


def frame_text(frame: Frame) -> str:
    """A frame as py-spy's collapsed format writes it: ``function (file:line)``."""
    function = frame.function.replace(";", ":")
    if frame.native or frame.line <= 0:
        return f"{function} ({frame.file})"
    return f"{function} ({frame.file}:{frame.line})"


def parse_collapsed(text: str, main_tid: int | None = None) -> tuple[Sample, ...]:
    """Samples of collapsed-stack text (py-spy ``--format raw``, or ``to_collapsed`` output).

    A leading ``thread (<id>)`` element names the thread (py-spy ``--threads``); a numeric id
    equal to ``main_tid`` becomes ``main``. Lines without a thread element go to ``main``.
    """
    stacks: list[tuple[str, tuple[Frame, ...]]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        body, _, count_text = line.rpartition(" ")
        if not count_text.isdigit():
            raise ValueError(f"collapsed line without a count: {line[:80]!r}")
        parts = body.split(";") if body else []
        thread = MAIN_THREAD
        if parts and (m := re.fullmatch(r"thread \((.*)\)", parts[0])):
            ident = m.group(1)
            is_main = ident == MAIN_THREAD or (main_tid is not None and ident == str(main_tid))
            # py-spy writes a numeric id; to_collapsed writes our own label back.
            thread = MAIN_THREAD if is_main else (f"thread {ident}" if ident.isdigit() else ident)
            parts = parts[1:]
        frames = []
        for part in parts:
            fm = _COLLAPSED_FRAME.fullmatch(part)
            if fm is None:
                frames.append(Frame(function=part, native=True))
                continue
            file, line_no = fm.group("file"), int(fm.group("line") or 0)
            frames.append(
                Frame(fm.group("function"), file, line_no, is_native(fm.group(1), file, line_no))
            )
        stacks.extend([(thread, tuple(frames))] * int(count_text))
    return _aggregate(stacks)


def short_file(path: str) -> str:
    """A path shortened for display: from the package (``numpy/_core/fromnumeric.py``)."""
    p = path.replace("\\", "/")
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in p:
            return p.split(marker, 1)[1]
    m = re.search(r"/lib/python\d\.\d+/(.*)$", p)
    if m:
        return m.group(1)
    parts = [x for x in p.split("/") if x]
    return "/".join(parts[-2:]) if len(parts) > 2 else p


def frame_label(frame: Frame) -> str:
    """A frame for people: ``function (short/file.py:line)``."""
    file = short_file(frame.file)
    if frame.native or frame.line <= 0:
        return f"{frame.function} ({file})" if file else frame.function
    return f"{frame.function} ({file}:{frame.line})"
