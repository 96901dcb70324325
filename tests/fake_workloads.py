"""Workloads for tests: exact fake-clock steps, and ones that raise or hang.

Runner tests start these in real workload processes by reference (``tests.fake_workloads:NAME``).
"""

from __future__ import annotations

import time

from profiler.clock import FakeClock
from profiler.model import WorkDecl
from profiler.workloads.base import Loop, Params, WorkloadSpec

#: The clock the fake-clock workloads advance; tests pass the same object to the runner.
CLOCK = FakeClock(start_ns=1_000_000)
#: Fake step duration: step i (0-based) takes STEP_NS + i ns, so every duration is distinct.
STEP_NS = 1_000
WORK = WorkDecl(
    samples_per_step=8, updates_per_step=1, steps_per_epoch=4, flops_per_step=16, bytes_per_step=64
)


def build_fake(params: Params) -> Loop:
    state = {"i": 0, "w": 1.0}

    def step() -> None:
        CLOCK.advance(STEP_NS + state["i"])
        state["i"] += 1
        state["w"] *= 0.5

    return Loop(
        step=step,
        work=WORK,
        params=lambda: {"w": state["w"]},
        eval_loss=lambda p: p["w"] ** 2,
    )


def build_quick(params: Params) -> Loop:
    state = {"w": 1.0}

    def step() -> None:
        state["w"] *= 0.99

    return Loop(step=step, work=WORK, params=lambda: dict(state), eval_loss=lambda p: p["w"])


def build_raises(params: Params) -> Loop:
    count = {"i": 0}

    def step() -> None:
        count["i"] += 1
        if count["i"] > 60:
            raise RuntimeError("boom: the loop broke at step 61")

    return Loop(step=step, work=WORK, params=lambda: {"w": 0.0}, eval_loss=lambda p: 0.0)


def build_hangs(params: Params) -> Loop:
    count = {"i": 0}

    def step() -> None:
        count["i"] += 1
        if count["i"] > 60:
            time.sleep(3600)

    return Loop(step=step, work=WORK, params=lambda: {"w": 0.0}, eval_loss=lambda p: 0.0)


def build_fails_to_build(params: Params) -> Loop:
    raise ValueError("cannot build: no such model")


def _spec(name: str, build, **kw) -> WorkloadSpec:  # type: ignore[no-untyped-def]
    return WorkloadSpec(
        name=name,
        title=f"test workload {name}",
        doc="A workload for tests.",
        seed="000",
        framework="numpy",
        defaults=Params(steps=100, n=8),
        build=build,
        **kw,
    )


FAKE = _spec("fake", build_fake)
QUICK = _spec("quick", build_quick)
RAISES = _spec("raises", build_raises)
HANGS = _spec("hangs", build_hangs)
BUILD_FAILS = _spec("build_fails", build_fails_to_build)
EVIL = _spec("</script><img src=x onerror=alert(1)>", build_quick)
