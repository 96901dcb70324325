"""Views of a sampled phase's stacks: py-spy's collapsed-stack text and a flame graph SVG.

Place in the pipeline: a renderer. The pipeline writes both into a workload's folder from the
trace's samples (``pyspy.collapsed.txt``, ``flamegraph.svg``); ``profiler report RUN`` writes them
again from the saved trace. The collapsed text is py-spy's "raw" format (one line per distinct
stack, ``flamegraph.pl`` compatible; ``profiler.capture.collectors.pyspy.parse_collapsed`` reads
it back); the flame graph is coloured by the label ``profiler.analysis.stacks`` gives each stack.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

from profiler.capture.collectors.pyspy import MAIN_THREAD, frame_label, frame_text
from profiler.model import Frame, Sample

COLLAPSED_FILE = "pyspy.collapsed.txt"
FLAME_FILE = "flamegraph.svg"


def to_collapsed(samples: Iterable[Sample]) -> str:
    """py-spy's raw format: ``thread (<label>);frame;frame... count`` per distinct stack."""
    out = []
    for s in samples:
        parts = [f"thread ({s.thread or MAIN_THREAD})", *(frame_text(f) for f in s.frames)]
        out.append(f"{';'.join(parts)} {s.count}")
    return "\n".join(out) + ("\n" if out else "")


# --- flame graph ----------------------------------------------------------------------------

#: Fill colours by label (categories, temporary labels, instrumentation).
COLOURS: dict[str, str] = {
    "compute": "#4caf50",
    "dispatch": "#ff9800",
    "feed_fetch": "#2196f3",
    "python": "#fdd835",
    "tracing": "#9c27b0",
    "communication": "#00acc1",
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
    foot = (
        f"{total} samples; colour = the label most of a box's samples carry (its stack's rule)"
        + (f"; {hidden} samples in boxes under {min_px} px not drawn" if hidden else "")
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
