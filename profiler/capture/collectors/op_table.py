"""The per-op table: kernel executions grouped by op, with count, mean, total and share.

Place in the pipeline: shared by two collectors, ``step_stats`` (TF1 ``RunMetadata.step_stats``
of FULL_TRACE steps) and ``xplane`` (kernel events of a TF profiler capture), so both sources
give the framework phase's ``data["op_table"]`` the same shape. Pure: no I/O, no TensorFlow.

A table is an ``OpTable`` (``profiler.model.records``) of ``OpRow`` rows; ``share`` is the op's
total over the sum of every op's total (kernel time as the kernels themselves report it; parallel
kernels count in full here, unlike the per-step union).
"""

from __future__ import annotations

from collections.abc import Iterable

from profiler.model.records import OpRow, OpTable

#: Rows kept in a table (ordered by total time); the rest are counted in ``rows_omitted``.
MAX_ROWS = 60


def build(
    executions: Iterable[tuple[str, str, int] | tuple[str, str, int, bool]],
    *,
    source: str,
    steps: int,
    kernel_union_ns_per_step: int | None = None,
) -> OpTable:
    """Group kernel executions ``(op, kernel, dur_ns[, input_thread])`` into a table over
    ``steps`` steps (an op's executions on the input pipeline's threads are a row of their own).

    Rows are ordered by total time, then by op name, so ties are stable.
    """
    totals: dict[tuple[str, str, bool], list[int]] = {}
    for op, kernel, dur, *rest in executions:
        entry = totals.setdefault((op, kernel, bool(rest and rest[0])), [0, 0])
        entry[0] += 1
        entry[1] += max(0, int(dur))
    kernel_ns = sum(t for _c, t in totals.values())
    ordered = sorted(totals.items(), key=lambda kv: (-kv[1][1], kv[0][0], kv[0][1], kv[0][2]))
    rows = [
        OpRow(
            op=op,
            kernel=kernel,
            count=count,
            mean_ns=total // count if count else 0,
            total_ns=total,
            share=round(total / kernel_ns, 6) if kernel_ns else 0.0,
            input_thread=pipeline,
        )
        for (op, kernel, pipeline), (count, total) in ordered
    ]
    top = rows[0] if rows else None
    return OpTable(
        source=source,
        steps=steps,
        kernel_ns=kernel_ns,
        kernel_ns_per_step=kernel_ns // steps if steps else 0,
        top_op=top.op if top else None,
        top_kernel=top.kernel if top else None,
        top_share=top.share if top else None,
        rows=tuple(rows[:MAX_ROWS]),
        rows_omitted=max(0, len(rows) - MAX_ROWS),
        kernel_union_ns_per_step=kernel_union_ns_per_step,
    )
