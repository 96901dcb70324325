"""RunMetadata.step_stats -> per-op table: TF1 kernel times from ``RunOptions(FULL_TRACE)`` steps.

Place in the pipeline: the collector edge of the framework phase's FULL_TRACE steps. The phase
(``profiler.capture.phases.framework``) runs a few extra TF1 steps with ``RunOptions(trace_level=
FULL_TRACE)``, saves each step's raw ``RunMetadata`` (``write_run_metadata``), and builds its
``data["op_table"]`` with ``op_table``; tests recompute the same figures from the saved files.

Times come from the ``*_nanos`` fields (the ``*_micros`` ones are whole microseconds, mostly 0 or
1 for these kernels). A node's kernel time is ``op_end_rel_nanos - op_start_rel_nanos``; its kernel
type is parsed from ``timeline_label`` (``"add = _MklNativeFusedMatMul(x, w)"``), because Grappler
rewrites and renames nodes, so the graph's own op types no longer match what ran.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profiler.capture.collectors import op_table as op_table_mod
from profiler.capture.collectors.xplane import union_ns
from profiler.model import median_ns
from profiler.model.records import OpTable

_LABEL = re.compile(r"^[^=]*= (?P<kernel>[A-Za-z0-9_.]+)\(")


@dataclass(frozen=True, slots=True)
class NodeTime:
    """One node's execution in one step (nanoseconds since the epoch for ``start_ns``)."""

    op: str
    kernel: str
    device: str
    start_ns: int
    op_ns: int
    thread: int


def kernel_of(label: str, fallback: str = "") -> str:
    """The kernel type in a ``timeline_label`` (``"n = Pow(a, b)"`` -> ``Pow``)."""
    m = _LABEL.match(label)
    return m.group("kernel") if m else fallback


def node_times(run_metadata: Any) -> list[NodeTime]:
    """Every node execution of one step's ``RunMetadata``, all devices."""
    out = []
    for dev in run_metadata.step_stats.dev_stats:
        for ns in dev.node_stats:
            out.append(
                NodeTime(
                    op=ns.node_name,
                    kernel=kernel_of(ns.timeline_label, ns.node_name),
                    device=dev.device,
                    start_ns=ns.all_start_nanos + ns.op_start_rel_nanos,
                    op_ns=max(0, ns.op_end_rel_nanos - ns.op_start_rel_nanos),
                    thread=ns.thread_id,
                )
            )
    return out


def op_table(run_metadatas: Sequence[Any]) -> OpTable:
    """The per-op table of these steps, plus the median per-step kernel union.

    ``kernel_union_ns_per_step`` is the median over steps of the time at least one node's
    kernel ran (parallel kernels counted once), comparable to the xplane's ``kernel_union_ns``.
    """
    per_step = [node_times(md) for md in run_metadatas]
    unions = [union_ns((n.start_ns, n.start_ns + n.op_ns) for n in nodes) for nodes in per_step]
    return op_table_mod.build(
        ((n.op, n.kernel, n.op_ns) for nodes in per_step for n in nodes),
        source="step_stats",
        steps=len(per_step),
        kernel_union_ns_per_step=median_ns(unions) if unions else 0,
    )


def write_run_metadata(folder: Path, steps: Iterable[tuple[int, Any]]) -> list[Path]:
    """Save each ``(global step, RunMetadata)`` as ``folder/step_<step>.pb``; returns the paths.

    One serialized ``tensorflow.core.protobuf.config_pb2.RunMetadata`` per file, readable with
    ``RunMetadata.FromString(path.read_bytes())`` (``read_run_metadata``).
    """
    from profiler.model.atomic import atomic_write_bytes

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for step, md in steps:
        path = folder / f"step_{step:08d}.pb"
        atomic_write_bytes(path, md.SerializeToString())
        paths.append(path)
    return paths


def read_run_metadata(paths: Iterable[Path]) -> list[Any]:
    """The ``RunMetadata`` protos saved by ``write_run_metadata`` (imports TensorFlow)."""
    from tensorflow.core.protobuf import config_pb2

    return [config_pb2.RunMetadata.FromString(Path(p).read_bytes()) for p in paths]
