"""Builders for the typed phase records (``profiler.model.records``), for hand-made traces.

Only what a test states is set; the rest takes the record's defaults, so a test reads like the
figures it checks.
"""

from __future__ import annotations

from profiler.model.records import (
    FeedCast,
    FrameworkData,
    HooksCost,
    HooksData,
    LoopFacts,
    OpRow,
    OpTable,
    ProfilerSession,
    SampledData,
    StepMedians,
)


def hooks_data(
    central: dict[str, int],
    categories: dict[str, str],
    *,
    outside: str = "outside_run",
    cost_ns: int = 0,
    cast_ns: int | None = None,
    fetches: int | None = None,
    feeds: int | None = None,
) -> HooksData:
    """A hooks record whose typical step is ``central`` (part -> ns), in that order."""
    return HooksData(
        target="test",
        hooks={},
        steps=5,
        partition=tuple(central),
        categories=categories,
        outside=outside,
        median_ns=dict(central),
        mean_ns=dict(central),
        central_mean_ns=dict(central),
        inclusive_median_ns={},
        calls_per_step={},
        per_step={},
        per_step_steps=0,
        self_cost=HooksCost(per_step_ns=cost_ns),
        feed_cast=FeedCast(cast_ns, ("float64",), "float32", "test")
        if cast_ns is not None
        else None,
        loop_info=LoopFacts(fetches=fetches, feeds=feeds),
    )


def op_table(source: str, rows: list[tuple[str, str, int]], steps: int) -> OpTable:
    """An op table of ``(op, kernel, total_ns)`` rows over ``steps`` steps."""
    from profiler.capture.collectors import op_table as build

    return build.build(rows, source=source, steps=steps)


def framework_data(
    kernel_union_ns: int,
    executor_ns: int = 0,
    *,
    op_table: OpTable | None = None,
    xplane_op_table: OpTable | None = None,
) -> FrameworkData:
    """A framework record with these per-step medians."""
    return FrameworkData(
        profiler=ProfilerSession({}, 0, 0, None, 0),
        median_ns=StepMedians(kernel_union_ns=kernel_union_ns, executor_ns=executor_ns),
        op_table=op_table,
        xplane_op_table=xplane_op_table,
    )


def sampled_data(rate_hz: int = 100, native: bool = False) -> SampledData:
    return SampledData(
        rate_hz=rate_hz, native=native, native_note="", idle=False, nonblocking=False
    )


__all__ = ["OpRow", "framework_data", "hooks_data", "op_table", "sampled_data"]
