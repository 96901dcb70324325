"""py-spy captures -> model ``Sample`` stacks, and the views derived from one capture.

Place in the pipeline: the sampled phase (``profiler.phases.sampled``) records py-spy once, in
speedscope format (structured: per-thread profiles, frames with separate file and line); this
collector turns that file into ``Sample`` objects (``profiler.model``) and derives the other
artefacts from the same samples: py-spy's "raw" collapsed-stack text (one line per distinct stack,
``flamegraph.pl`` compatible) and a flame graph SVG coloured by cause (``profiler.rules``). py-spy
writes only one format per capture, so nothing is recorded twice.

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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

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


def parse_speedscope(doc: dict[str, Any], main_tid: int | None = None) -> tuple[Sample, ...]:
    """Samples of a py-spy speedscope document (one profile per thread, stacks root first).

    Args:
        doc: the parsed JSON.
        main_tid: the workload's main thread id (its pid); that thread is labelled ``main``.

    Returns:
        Distinct stacks with their counts, most sampled first.
    """
    frames = [_frame(f) for f in doc.get("shared", {}).get("frames", [])]
    stacks: list[tuple[str, tuple[Frame, ...]]] = []
    for profile in doc.get("profiles", []):
        thread = thread_label(str(profile.get("name", "")), main_tid)
        for idx in profile.get("samples", []):
            stack = tuple(frames[i] for i in idx)
            stacks.append((thread, tuple(f for f in stack if not _is_pseudo(f))))
    return _aggregate(stacks)


def read_speedscope(path: Path, main_tid: int | None = None) -> tuple[Sample, ...]:
    """``parse_speedscope`` of a file."""
    return parse_speedscope(json.loads(path.read_text(encoding="utf-8")), main_tid)


def frame_text(frame: Frame) -> str:
    """A frame as py-spy's collapsed format writes it: ``function (file:line)``."""
    function = frame.function.replace(";", ":")
    if frame.native or frame.line <= 0:
        return f"{function} ({frame.file})"
    return f"{function} ({frame.file}:{frame.line})"


def to_collapsed(samples: Iterable[Sample]) -> str:
    """py-spy's raw format: ``thread (<label>);frame;frame... count`` per distinct stack."""
    out = []
    for s in samples:
        parts = [f"thread ({s.thread or MAIN_THREAD})", *(frame_text(f) for f in s.frames)]
        out.append(f"{';'.join(parts)} {s.count}")
    return "\n".join(out) + ("\n" if out else "")


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


# --- flame graph ----------------------------------------------------------------------------

#: Fill colours by label (categories, temporary labels, instrumentation).
COLOURS: dict[str, str] = {
    "compute": "#4caf50",
    "dispatch": "#ff9800",
    "feed_fetch": "#2196f3",
    "python": "#fdd835",
    "tracing": "#9c27b0",
    "other": "#9e9e9e",
    "native_session": "#26a69a",
    "native_eager": "#26a69a",
    "native_function": "#26a69a",
    "instrumentation": "#e0e0e0",
}


@dataclass
class _Node:
    name: str
    count: int = 0
    labels: Counter[str] = field(default_factory=Counter)
    children: dict[str, _Node] = field(default_factory=dict)


def _tree(samples: Sequence[Sample], label_of: Callable[[tuple[Frame, ...]], str]) -> _Node:
    root = _Node("all")
    by_thread = len({s.thread for s in samples}) > 1
    for s in samples:
        label = label_of(s.frames)
        path = [f"thread {s.thread}"] if by_thread else []
        path += [frame_label(f) for f in s.frames]
        node = root
        node.count += s.count
        node.labels[label] += s.count
        for name in path:
            node = node.children.setdefault(name, _Node(name))
            node.count += s.count
            node.labels[label] += s.count
    return root


def flame_svg(
    samples: Sequence[Sample],
    label_of: Callable[[tuple[Frame, ...]], str],
    *,
    title: str = "py-spy samples",
    width: int = 1200,
    row_px: int = 16,
    min_px: float = 0.5,
) -> str:
    """An icicle flame graph (root on top) of ``samples`` as one self-contained SVG.

    Each box is one frame on a path from the root; its width is its share of samples, its
    colour the label (``label_of``, e.g. ``rules.classify``) most of its samples carry, and its
    ``<title>`` tooltip gives the frame, the sample count and the labels. Boxes narrower than
    ``min_px`` are left out and counted in a footnote. Every string is XML-escaped.
    """
    root = _tree(samples, label_of)
    total = max(root.count, 1)
    scale = (width - 20) / total
    rects: list[str] = []
    hidden = 0
    depth_max = 0

    def tip(node: _Node) -> str:
        mix = ", ".join(f"{k} {v}" for k, v in node.labels.most_common())
        return f"{node.name}\n{node.count} samples ({100 * node.count / total:.1f}%)\n{mix}"

    stack: list[tuple[_Node, float, int]] = [(root, 10.0, 0)]
    while stack:
        node, x, depth = stack.pop()
        w = node.count * scale
        if w < min_px:
            hidden += node.count
            continue
        depth_max = max(depth_max, depth)
        label = node.labels.most_common(1)[0][0] if node.labels else "other"
        y = 40 + depth * row_px
        colour = COLOURS.get(label, "#bdbdbd")
        text = ""
        chars = int((w - 4) // 6.5)
        if chars >= 3:
            shown = node.name if len(node.name) <= chars else node.name[: chars - 1] + "…"
            text = f'<text x="{x + 2:.1f}" y="{y + row_px - 4}">{escape(shown)}</text>'
        rects.append(
            f"<g><title>{escape(tip(node))}</title>"
            f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{row_px - 1}" '
            f'fill="{colour}" rx="1"/>{text}</g>'
        )
        cx = x
        for child in sorted(node.children.values(), key=lambda c: c.name):
            stack.append((child, cx, depth + 1))
            cx += child.count * scale
    height = 40 + (depth_max + 1) * row_px + 40
    legend = []
    lx = 10.0
    for name, colour in COLOURS.items():
        if name.startswith("native_") and name != "native_session":
            continue
        shown = "native call (temporary)" if name == "native_session" else name
        legend.append(
            f'<rect x="{lx:.0f}" y="22" width="10" height="10" fill="{colour}"/>'
            f'<text x="{lx + 14:.0f}" y="31">{escape(shown)}</text>'
        )
        lx += 22 + 7 * len(shown)
    foot = f"{total} samples; colour = the label most of a box's samples carry (profiler.rules)" + (
        f"; {hidden} samples in boxes under {min_px} px not drawn" if hidden else ""
    )
    return "\n".join(
        [
            '<?xml version="1.0" encoding="UTF-8"?>',
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="11">',
            f"<title>{escape(title)}</title>",
            f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
            f'<text x="10" y="15" font-size="13">{escape(title)}</text>',
            *legend,
            *rects,
            f'<text x="10" y="{height - 12}" fill="#555">{escape(foot)}</text>',
            "</svg>",
            "",
        ]
    )
