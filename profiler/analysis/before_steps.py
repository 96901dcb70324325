"""What a script did before its first step: imports, and its own functions by where they spent
their time.

Place in the pipeline: pure analysis of a script trace's ``before_steps`` samples (the start-up
capture's main-thread stacks from the script's start to its first step,
``profiler.capture.script.startup``). The summary's ``before_steps``, the terminal's time
budget line and the ``slow_start`` finding (``profiler.diagnoses.before_steps``) read it.

Each sample is one of three parts: importing modules (a frame of Python's import machinery on
the stack), a function of the user's own code (the innermost frame outside installed packages,
the standard library and this toolkit: a data-preparation function, the model's build), or
other (the runner's start, the interpreter). An own function's samples say what it ran in: its
own Python (its frame is the innermost Python frame), numpy, TensorFlow, or another package.
Seconds are shares of the samples times the time the capture covered (``sampled_s``): the
script's start before py-spy attached (or re-attached when a framework's import switched off
native sampling) is not sampled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from profiler.analysis import auto_step
from profiler.model import Frame, Sample, is_own_frame

IMPORTS = "imports"
OWN = "own"
OTHER = "other"
#: The automatic step's loop iterations watched before the first step (steps all the same:
#: the time budget counts them with the steps, ``script.time.watched_s``).
WATCHED = "watched"
#: What an own function ran in, when its frame is the innermost Python frame: its Python, or a
#: C function it calls (without native frames, numpy's ``np.random.randn`` is its line's).
OWN_PYTHON = "its own code"
#: Packages named as what an own function ran in (the first package frame below it).
PACKAGES = {"tensorflow": "TensorFlow", "keras": "Keras", "numpy": "numpy", "tf_keras": "Keras"}


@dataclass(frozen=True)
class Part:
    """One part of the time before the first step.

    Attributes:
        kind: ``imports``, ``own`` (a function of the user's code), ``watched`` (the chosen
            loop's iterations watched to choose it: a frame in it on the stack) or ``other``.
        function, file, line: an own function, its file's name and its line with the most
            samples (empty and 0 for the other kinds).
        inside: what an own function's samples ran in most (``its own code``, ``numpy``,
            ``TensorFlow``, ``Keras`` or a package's name).
        samples: main-thread samples.
        share: of the samples before the first step.
        seconds: ``share`` of the sampled time.
    """

    kind: str
    function: str
    file: str
    line: int
    inside: str
    samples: int
    share: float
    seconds: float


@dataclass(frozen=True)
class BeforeSteps:
    """The time before the first step, in parts (largest first).

    Attributes:
        before_s: the script's time before its first step (``script.time.before_s``).
        sampled_s: the part of it the capture covered.
        samples: main-thread samples in it.
        parts: imports, each own function, other: largest first.
    """

    before_s: float
    sampled_s: float
    samples: int
    parts: tuple[Part, ...]

    def own(self) -> tuple[Part, ...]:
        return tuple(p for p in self.parts if p.kind == OWN)


def _is_import(f: Frame) -> bool:
    return f.file.startswith("<frozen importlib")


#: Frames of a function's comprehensions and generator expressions: their function's own.
_INNER = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>", "<lambda>")


def _own_index(frames: Sequence[Frame]) -> int | None:
    """The innermost frame of the user's own code, a comprehension's taken as the function
    holding it (its next own frame out, where there is one)."""
    found = None
    for i in range(len(frames) - 1, -1, -1):
        f = frames[i]
        if not is_own_frame(f):
            continue
        if found is None:
            found = i
        if not f.function.endswith(_INNER):
            return i
    return found


def _inside(frames: Sequence[Frame], i: int) -> str:
    """What the own frame ``frames[i]`` ran in: the first package frame below it, or its own
    Python when no Python frame is below it."""
    for f in frames[i + 1 :]:
        if f.native or not f.file:
            continue
        if "-packages/" in f.file:
            top = f.file.split("-packages/", 1)[1].split("/", 1)[0]
            return PACKAGES.get(top, top)
        if "/lib/python3." in f.file:
            return "the standard library"
    return OWN_PYTHON


def _chosen_loop(script: Mapping[str, Any]) -> tuple[str, str, int, int] | None:
    """The automatic step's loop, if one was chosen: its file's name, function and lines."""
    auto = script.get("auto_step") or {}
    line = auto.get("chosen_line")
    loop = auto_step.chosen_loop(auto)
    if not line or loop is None:
        return None
    file = str(auto.get("chosen_file") or script.get("path") or "").rsplit("/", 1)[-1]
    return file, str(loop.get("function") or ""), int(line), int(loop.get("end_line") or line)


def _in_loop(f: Frame, loop: tuple[str, str, int, int]) -> bool:
    file, function, first, last = loop
    return (
        not f.native
        and f.file.rsplit("/", 1)[-1] == file
        and f.function == function
        and first <= f.line <= last
    )


def analyse(samples: Sequence[Sample], script: Mapping[str, Any]) -> BeforeSteps | None:
    """The parts of a script's time before its first step (None without samples or time)."""
    startup = script.get("startup") or {}
    sampled_s = float(startup.get("sampled_s") or 0.0)
    before_s = float((script.get("time") or {}).get("before_s") or 0.0)
    main = [s for s in samples if s.thread in ("main", "")]
    total = sum(s.count for s in main)
    if not total or not sampled_s or not before_s:
        return None
    sampled_s = min(sampled_s, before_s)
    imports = other = watched = 0
    own: dict[tuple[str, str], dict[str, Any]] = {}
    loop = _chosen_loop(script)
    for s in main:
        if any(_is_import(f) for f in s.frames):
            imports += s.count
            continue
        if loop is not None and any(_in_loop(f, loop) for f in s.frames):
            watched += s.count
            continue
        i = _own_index(s.frames)
        if i is None:
            other += s.count
            continue
        f = s.frames[i]
        g = own.setdefault((f.file, f.function), {"n": 0, "lines": {}, "inside": {}})
        g["n"] += s.count
        g["lines"][f.line] = g["lines"].get(f.line, 0) + s.count
        where = _inside(s.frames, i)
        g["inside"][where] = g["inside"].get(where, 0) + s.count

    def part(kind: str, n: int, **kw: Any) -> Part:
        share = n / total
        base = {"function": "", "file": "", "line": 0, "inside": ""}
        return Part(kind=kind, samples=n, share=share, seconds=share * sampled_s, **{**base, **kw})

    parts = [part(IMPORTS, imports)] if imports else []
    for (file, function), g in own.items():
        line = max(g["lines"].items(), key=lambda kv: (kv[1], -kv[0]))[0]
        inside = max(g["inside"].items(), key=lambda kv: kv[1])[0]
        parts.append(
            part(
                OWN,
                g["n"],
                function=function,
                file=file.rsplit("/", 1)[-1],
                line=line,
                inside=inside,
            )
        )
    if other:
        parts.append(part(OTHER, other))
    if watched:
        parts.append(part(WATCHED, watched))
    parts.sort(key=lambda p: -p.samples)
    return BeforeSteps(before_s=before_s, sampled_s=sampled_s, samples=total, parts=tuple(parts))


def label(kind: str, function: str = "", file: str = "", line: int = 0, inside: str = "") -> str:
    """A part in words (a ``Part``'s fields, or the summary's): ``importing modules``,
    ``make_data (train.py line 42) in its own code``."""
    if kind == IMPORTS:
        return "importing modules"
    if kind == OTHER:
        return "other (the script's start, the interpreter)"
    if kind == WATCHED:
        return "the loop's first iterations, watched to choose it"
    if function == "<module>":
        return f"{file}'s top level (line {line}) in {inside}"
    return f"{function} ({file} line {line}) in {inside}"


def to_json(b: BeforeSteps | None) -> dict[str, Any] | None:
    """The summary's ``before_steps`` (None: not sampled)."""
    if b is None:
        return None
    return {
        "before_s": round(b.before_s, 3),
        "sampled_s": round(b.sampled_s, 3),
        "samples": b.samples,
        "parts": [
            {
                "kind": p.kind,
                "function": p.function,
                "file": p.file,
                "line": p.line,
                "inside": p.inside,
                "samples": p.samples,
                "share": round(p.share, 4),
                "seconds": round(p.seconds, 3),
            }
            for p in b.parts
        ],
    }
