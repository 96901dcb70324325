"""The step driver's hand-off between a script and the phase schedule, on a fake clock; plans.

The "script" here is the test's main thread calling the driver as a detector would; the
schedule runs on a thread of its own through ``ScriptLoop``, as in a script process.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from profiler.capture import schedule
from profiler.capture.phases import PhaseContext, registry
from profiler.capture.script.driver import ScriptLoop, StepDriver, StopScript
from profiler.capture.script.spec import ScriptSpec
from profiler.clock import FakeClock
from profiler.model import WorkDecl
from profiler.workloads.base import LoopEnded, LoopInfo

STEP = 1_000


class Ctx:
    """A step wrapper that logs its enter and exit."""

    def __init__(self, log: list[tuple[str, int]], i: int) -> None:
        self.log, self.i = log, i

    def __enter__(self) -> None:
        self.log.append(("enter", self.i))

    def __exit__(self, *exc: object) -> None:
        self.log.append(("exit", self.i))


def start(target: Callable[[], Any]) -> threading.Thread:
    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t


def script(d: StepDriver, clock: FakeClock, steps: int) -> None:
    """What a detector does per step: step i takes STEP + i ns."""
    for i in range(steps):
        if not d.started:
            d.begin()
        d.open_wrap()
        clock.advance(STEP + i)
        d.boundary()


def test_requests_are_filled_with_back_to_back_steps_and_wrapped() -> None:
    clock = FakeClock(start_ns=1_000_000)
    d = StepDriver(clock)
    loop = ScriptLoop(d, work=WorkDecl(1, 1, 1, 0, 0))
    got: dict[str, Any] = {}
    log: list[tuple[str, int]] = []

    def sched() -> None:
        got["first"] = loop.first_segment()
        clock.advance(50_000)  # the schedule's own work: a gap, in no step
        got["a"] = marks = [clock()]
        loop.run(3, marks, clock)
        got["b"] = marks = [clock()]
        loop.run(2, marks, clock, lambda i: Ctx(log, i))
        got["log_at_handoff"] = list(log)
        got["thread"] = loop.in_loop_thread(threading.get_ident)
        loop.finish()

    t = start(sched)
    script(d, clock, 10)
    t.join(5)
    first, a, b = got["first"], got["a"], got["b"]
    assert first == [1_000_000, 1_000_000 + STEP]
    # The next request starts when the script resumes, after the schedule's 50 µs.
    assert a[0] == first[1] + 50_000
    assert [y - x for x, y in itertools.pairwise(a)] == [STEP + 1, STEP + 2, STEP + 3]
    assert b[0] == a[-1]  # the fake clock stood still during the hand-off
    assert [y - x for x, y in itertools.pairwise(b)] == [STEP + 4, STEP + 5]
    # Wrapped by global step index, and the last wrapper left before the schedule resumed.
    assert got["log_at_handoff"] == [("enter", 4), ("exit", 4), ("enter", 5), ("exit", 5)]
    assert got["thread"] == threading.get_ident()
    assert loop.steps_done == 6 and d.done == 10 and d.freed


def test_a_request_with_a_time_limit_ends_after_its_fewest_steps_once_the_time_is_up() -> None:
    # A DQN's steps turned 10,000x slower after its replay memory filled: the timed window
    # planned from the fast ones ends at its time limit (``Request.max_ns``), not after all of
    # the run's steps.
    clock = FakeClock(start_ns=1_000_000)
    d = StepDriver(clock)
    loop = ScriptLoop(d, work=WorkDecl(1, 1, 1, 0, 0))
    got: dict[str, Any] = {}

    def sched() -> None:
        loop.first_segment()
        got["cut"] = marks = [clock()]
        loop.run(1_000, marks, clock, None, 10 * STEP, 4)  # 10 steps' time, at least 4 steps
        got["few"] = marks = [clock()]
        loop.run(1_000, marks, clock, None, 2 * STEP, 5)  # the time is up first: 5 steps
        got["plain"] = marks = [clock()]
        loop.run(3, marks, clock)  # no limit: the next request is not cut
        loop.finish()

    t = start(sched)
    script(d, clock, 40)
    t.join(5)
    # Steps of ~1,000 ns: the 10th boundary is the first at or past 10 steps' time.
    assert len(got["cut"]) - 1 == 10
    assert len(got["few"]) - 1 == 5
    assert len(got["plain"]) - 1 == 3


def test_max_steps_stops_the_script_and_ends_the_requests() -> None:
    clock = FakeClock()
    d = StepDriver(clock, max_steps=5)
    loop = ScriptLoop(d, work=WorkDecl(1, 1, 1, 0, 0))
    got: dict[str, Any] = {}

    def sched() -> None:
        loop.first_segment()
        got["a"] = marks = [clock()]
        loop.run(10, marks, clock)  # only 4 more steps come
        got["ended"] = loop.ended
        try:
            loop.run(1, [clock()], clock)
        except LoopEnded:
            got["raised"] = True
        loop.finish()

    t = start(sched)
    with pytest.raises(StopScript):
        script(d, clock, 100)
    d.script_ended("max_steps")
    t.join(5)
    assert len(got["a"]) == 5 and got["ended"] and got["raised"]
    assert (d.done, d.end_reason) == (5, "max_steps")


def test_the_script_ending_mid_request_returns_what_ran() -> None:
    clock = FakeClock()
    d = StepDriver(clock)
    loop = ScriptLoop(d, work=WorkDecl(1, 1, 1, 0, 0))
    got: dict[str, Any] = {}

    def sched() -> None:
        loop.first_segment()
        got["a"] = marks = [clock()]
        loop.run(10, marks, clock)
        try:
            loop.run(5, [clock()], clock)
        except LoopEnded:
            got["more"] = "ended"
        loop.finish()

    t = start(sched)
    script(d, clock, 3)
    d.script_ended("completed")
    t.join(5)
    assert len(got["a"]) == 3  # steps 1 and 2 of the 10 asked for
    assert got["more"] == "ended"


def test_a_variant_on_for_the_steps_is_off_while_the_script_runs_its_code_after_the_loop() -> None:
    # CI: a float32 what-if block held the script's last steps, and the script's print after
    # its loop read its weights as float32. The loop's end mark turns the variant off on the
    # script's thread, before the code after the loop; coming back to the loop turns it on.
    from profiler.capture.script import detect

    clock = FakeClock()
    d = StepDriver(clock)
    loop = ScriptLoop(d, work=WorkDecl(1, 1, 1, 0, 0))
    line, line_end = detect.step_line_marks(d)
    state = {"on": False}
    seen: list[tuple[str, bool]] = []
    got: dict[str, Any] = {}

    def sched() -> None:
        loop.first_segment()
        loop.in_loop_thread(lambda: state.update(on=True))
        loop.hold(lambda: state.update(on=False), lambda: state.update(on=True))
        got["a"] = marks = [clock()]
        loop.run(100, marks, clock)  # more steps than the script's loop holds
        loop.hold(None)
        loop.finish()

    t = start(sched)
    for epoch in range(2):
        for _ in range(3):
            line()
            seen.append((f"step {epoch}", state["on"]))
            clock.advance(STEP)
        line_end()
        seen.append((f"after loop {epoch}", state["on"]))
    d.script_ended("completed")
    t.join(5)
    assert seen == [
        ("step 0", False),  # the first step, before the schedule turned the variant on
        ("step 0", True),
        ("step 0", True),
        ("after loop 0", False),
        ("step 1", True),
        ("step 1", True),
        ("step 1", True),
        ("after loop 1", False),
    ]
    assert len(got["a"]) == 6 and d.held is None


def test_no_step_at_all() -> None:
    d = StepDriver(FakeClock())
    loop = ScriptLoop(d, work=WorkDecl(1, 1, 1, 0, 0))
    got: dict[str, Any] = {}

    def sched() -> None:
        try:
            loop.first_segment()
        except LoopEnded:
            got["first"] = "ended"
        loop.finish()

    t = start(sched)
    d.script_ended("completed")
    t.join(5)
    assert got["first"] == "ended" and not d.started


# --- plans ----------------------------------------------------------------------------------


def _ctx(tmp_path: Path, kind: str, step_ns: int) -> PhaseContext:
    loop = ScriptLoop(
        StepDriver(FakeClock()),
        work=WorkDecl(1, 1, 1, 0, 0),
        info=LoopInfo(kind=kind, session=object() if kind == "tf1" else None),
    )
    spec = ScriptSpec.for_worker("s.py")
    return PhaseContext(
        spec=dataclasses.replace(spec, framework=kind),
        loop=loop,
        workload_dir=tmp_path,
        tensorboard_dir=tmp_path,
        clock=FakeClock(),
        step_ns=step_ns,
    )


def _phases() -> list[Any]:
    return [registry.make(p, {}) for p in registry.DEFAULT_PHASES]


def test_plan_without_a_limit_is_each_phase_budget(tmp_path: Path) -> None:
    phases = _phases()
    slots = schedule.plan(phases, _ctx(tmp_path, "tf1", 200_000), timed_steps=None, available=None)
    assert slots["timed"].window == 5_000  # 1 s of 200 µs steps
    assert slots["sampled"].window == 7_500 and slots["sampled"].rewarm == 20
    assert slots["framework"].window == 200 and slots["framework"].extra == 20
    assert slots["hooks"].extra == 5 * 2 * 200  # on/off blocks of 40 ms
    by = {p.name: p for p in phases}
    assert by["lines"].budget.steps == slots["lines"].window


def test_plan_fits_into_max_steps(tmp_path: Path) -> None:
    phases = _phases()
    slots = schedule.plan(phases, _ctx(tmp_path, "tf1", 200_000), timed_steps=None, available=550)
    total = sum(s.window + s.rewarm + s.extra for s in slots.values())
    assert total <= 550
    assert all(s.rewarm <= schedule.TIGHT_REWARM for s in slots.values())
    by = {p.name: p for p in phases}
    assert by["framework"].full_trace_steps == 5 and by["hooks"].cost_pairs == 0
    assert slots["framework"].window >= 5 and slots["hooks"].window >= by["hooks"].min_window
    # The windows keep their budgets' proportions.
    assert slots["sampled"].window > slots["timed"].window > slots["lines"].window


def test_a_plan_of_few_slow_steps_shrinks_the_windows_to_what_each_phase_needs(
    tmp_path: Path,
) -> None:
    # The segmentation tutorial: 18 steps of 0.8 s, 12 after the warm-up; the sampled window
    # kept its floor of 10 steps and, with its re-warm, all 12, run after run.
    from profiler.capture.script.schedule import SCRIPT_FLOORS, need_steps

    step_ns = 800_000_000
    phases = _phases()
    tight = {p.name: min(SCRIPT_FLOORS.get(p.name, 10), need_steps(p, step_ns, {})) for p in phases}
    assert tight["sampled"] == 3 and tight["framework"] == 3
    ctx = _ctx(tmp_path, "tf2", step_ns)
    slots = schedule.plan(phases, ctx, available=12, floors=SCRIPT_FLOORS, rewarm_s=0.15)
    assert slots["sampled"].window == 10  # the floor, without the tight ones
    slots = schedule.plan(
        _phases(), ctx, available=12, floors=SCRIPT_FLOORS, rewarm_s=0.15, tight_floors=tight
    )
    assert slots["sampled"].window == 3 and slots["framework"].window == 3
    assert slots["sampled"].window + slots["sampled"].rewarm + slots["framework"].window <= 12


def test_numpy_scripts_plan_no_framework_phases(tmp_path: Path) -> None:
    slots = schedule.plan(
        _phases(), _ctx(tmp_path, "numpy", 10_000), timed_steps=300, available=None
    )
    # ... and the what-if phase (numpy_float32 is a numpy what-if; whether it applies is
    # decided when it runs).
    assert set(slots) == {"timed", "sampled", "lines", "whatif"}
    assert slots["timed"].window == 300


def test_a_jobs_workers_plan_with_the_chiefs_figures(tmp_path: Path) -> None:
    from profiler.capture.script.agree import Agreement

    plan = tmp_path / "plan.json"
    chief = Agreement(plan, chief=True)
    other = Agreement(plan, chief=False, wait_s=5.0)
    got: list[int] = []
    waiting = threading.Thread(target=lambda: got.append(other.agree("step_ns", 15_900_000)))
    waiting.start()  # the other worker reaches the point first and waits for the chief
    assert chief.agree("step_ns", 16_400_000) == 16_400_000
    waiting.join(5.0)
    assert got == [16_400_000]
    assert chief.agree("warmup_steps", 40) == 40 and other.agree("warmup_steps", 38) == 40
    # A chief that never writes: the worker plans with its own figure.
    assert Agreement(plan, chief=False, wait_s=0.05).agree("timed_step_ns", 7) == 7


def test_a_graph_grown_by_part_of_the_run_names_the_steps_that_grew_it() -> None:
    # CS20's convnet: 100 training steps make no op, its test loop makes 4 a step.
    from profiler.capture.script.driver import Facts

    facts = Facts()
    facts.graph_versions = [(s, 411 if s <= 100 else 411 + 4 * (s - 100)) for s in range(0, 145, 4)]
    growth = facts.graph_growth(8)
    assert growth is not None
    assert (growth["from_step"], growth["to_step"]) == (8, 144)
    assert (growth["grew_from"], growth["grew_to"]) == (100, 144)
    assert growth["ops_to"] - growth["ops_from"] == 176
    facts.graph_versions = [(s, 411 + s) for s in range(0, 145, 4)]
    steady = facts.graph_growth(8)
    assert steady is not None and (steady["grew_from"], steady["grew_to"]) == (8, 144)


@pytest.mark.tf
def test_a_tf1_graphs_constants_are_read_from_their_shapes() -> None:
    from types import SimpleNamespace

    import numpy as np
    import tensorflow as tf

    from profiler.capture.script.driver import Facts

    g = tf.Graph()
    with g.as_default():
        tf.constant(np.zeros((300, 100), np.float32), name="data")  # 120,000 bytes
        tf.constant(np.zeros(10, np.int64))  # 80 bytes
        tf.constant("a string")  # not counted
    facts = Facts()
    assert facts.graph_constants() is None  # no session
    facts.session = SimpleNamespace(graph=g)
    got = facts.graph_constants()
    assert got is not None and got["bytes"] == 120_080
    assert got["largest"] == {"name": "data", "dtype": "float32", "shape": [300, 100],
                              "bytes": 120_000}  # fmt: skip


def test_fits_data_is_told_apart_arrays_from_a_dataset() -> None:
    from types import SimpleNamespace

    import numpy as np

    from profiler.capture.script.detect import _input_kind

    x = np.zeros((4, 3), np.float32)
    assert _input_kind(x) == "arrays"
    assert _input_kind((x, x[:, 0])) == "arrays"  # validation_data=(x_val, y_val)
    assert _input_kind({"a": x, "b": x}) == "arrays"
    assert _input_kind(SimpleNamespace(element_spec=None)) == "dataset"
    assert _input_kind([1.0, 2.0]) == "list"
    assert _input_kind(None) is None


def test_a_fit_called_inside_a_loop_of_the_script_is_told_so(tmp_path, monkeypatch) -> None:
    import sys
    import types

    from profiler.capture.script import detect

    # 60 fit(epochs=1) calls in a loop: the first fit's 32 batches bounded the plan, and every
    # phase was packed into the run's first 67 steps.
    script = tmp_path / "loop_fit.py"
    script.write_text(
        "import sys\n"
        "def fit():\n"
        "    return caller(sys._getframe(1))\n"
        "once = fit()\n"
        "seen = []\n"
        "for epoch in range(2):\n"
        "    seen.append(fit())\n"
    )
    main = types.ModuleType("__main__")
    main.__file__ = str(script)
    main.caller = detect._called_in_loop
    monkeypatch.setitem(sys.modules, "__main__", main)
    exec(compile(script.read_text(), str(script), "exec"), main.__dict__)
    assert main.once is False and main.seen == [True, True]


def test_a_session_run_called_through_the_toolkits_wrapper_is_judged_by_its_outside_caller() -> (
    None
):
    import sys

    from profiler.capture.script import detect

    # Saver.save calls session.run; with the hooks phase's wrapper between them, the saves
    # were counted as steps in that window alone (a slow step every 21 there, every 20
    # elsewhere: no period found).
    def script_line():  # stands for the script's (or saver.py's) frame
        return detect._outside_caller(sys._getframe(0))

    assert detect._outside_caller(sys._getframe(0)).co_name == (
        "test_a_session_run_called_through_the_toolkits_wrapper_is_judged_by_its_outside_caller"
    )
    assert script_line().co_name == "script_line"
    # Frames of the toolkit's own files are passed over.
    namespace: dict = {"detect": detect, "sys": sys}
    wrapper = compile(
        "def wrapper():\n    return detect._outside_caller(sys._getframe(0))\n",
        detect.__file__,
        "exec",
    )
    exec(wrapper, namespace)
    assert namespace["wrapper"]().co_name == (
        "test_a_session_run_called_through_the_toolkits_wrapper_is_judged_by_its_outside_caller"
    )


def test_the_instrumented_phases_time_is_their_steps_wall_time_counted_once() -> None:
    from profiler.capture.script.driver import phases_time

    ends = [10 * (i + 1) * 10**9 for i in range(200)]  # 200 10 s steps from 0
    held = {"timed": (0, 3), "framework": (3, 5), "hooks": (4, 6), "whatif": (100, 212)}
    seconds, steps = phases_time(0, ends, held)
    # Steps 3-5 (overlapping spans once) and 100-199 (the span past the last step cut).
    assert (seconds, steps) == (1030.0, 103)
    assert phases_time(0, ends, {"timed": (0, 10)}) == (0.0, 0)
    # A few steps between two phases (the next one installed, its re-warm, a reference block)
    # are the phases' too: a fit's phase switches were most of its time "not told apart".
    # Beyond BRIDGE_STEPS (64) the script's own steps lie between them.
    held = {"timed": (0, 3), "framework": (3, 5), "hooks": (20, 30), "whatif": (95, 100)}
    assert phases_time(0, ends, held) == (270.0 + 50.0, 27 + 5)
    assert phases_time(0, ends, {**held, "whatif": (94, 100)}) == (970.0, 97)


def test_a_functions_last_arguments_are_kept_unless_one_is_an_iterator() -> None:
    """The what-ifs trace with the last call's arguments; an iterator among them is not kept
    (fit's validation iterator, held until the next validation, slowed it 2-4.5 s)."""
    from profiler.capture.script import detect

    class Function:
        """Stands in for a tf.function: the detector also reads its tracing counter."""

        python_function = staticmethod(lambda *a: None)

        def experimental_get_tracing_count(self) -> int:
            return 1

    d = StepDriver(FakeClock(tick_ns=10))
    d.started = True
    d._arm(None)  # free-running: boundaries counted, nothing handed off
    call = detect.wrap_function_call(lambda self, *a, **k: None, d)
    fn = Function()
    call(fn, 1.0, [2, 3])
    assert d.facts.functions[id(fn)].last_call == ((1.0, [2, 3]), {})
    call(fn, iter([1, 2]))
    assert d.facts.functions[id(fn)].last_call is None
    call(fn, [iter(()), 1], scale=2)
    assert d.facts.functions[id(fn)].last_call is None
    call(fn, 4, it=(x for x in ()))
    assert d.facts.functions[id(fn)].last_call is None
    call(fn, 5, scale=2)
    assert d.facts.functions[id(fn)].last_call == ((5,), {"scale": 2})


def test_a_generation_function_called_after_fits_batches_is_no_step() -> None:
    """TF's text generation tutorial: after fit's 48 batches, 2,000 calls of the script's own
    ``generate_one_step`` were steps ("323.6x faster than the timed window")."""
    from profiler.capture.script import detect

    def generate_one_step(*_a: object) -> None:
        return None

    class Function:
        python_function = staticmethod(generate_one_step)

        def experimental_get_tracing_count(self) -> int:
            return 1

    d = StepDriver(FakeClock(tick_ns=10))
    d.started = True
    d._arm(None)
    call = detect.wrap_function_call(lambda self, *a, **k: None, d)
    fn = Function()
    call(fn, 1)  # no training seen yet: a step
    assert d.done == 1
    d.detector("keras_fit").steps = 48
    for _ in range(5):
        call(fn, 1)
    assert d.done == 1 and d.detectors["tf_function_evaluation"].calls == 5
    assert d.facts.functions[id(fn)].to_json()["outside_calls"] == 5


def test_the_sampled_window_has_a_time_limit_as_the_timed_one_has() -> None:
    """A loop fitting a new model per trial (each first batch tracing for 2 s among 3 ms ones):
    its sampled window of 292 planned steps took 25 s of a 35 s run, and the framework, hooks,
    lines and what-if phases got none. The schedule limits the sampled window's time as the
    timed one's (``CAPPED``), and the windows pass their phase's limit to the loop."""
    from profiler.capture.script import schedule

    class Loop:
        steps_done = 0

        def __init__(self) -> None:
            self.calls: list[tuple[int, int, int]] = []

        def run(self, n, marks, clock, wrap, max_ns, min_n) -> None:
            self.calls.append((n, max_ns, min_n))
            marks.extend([1, 2])

    assert schedule.CAPPED == ("timed", "sampled")
    loop = Loop()
    windows = schedule.ScriptWindows(loop, lambda: 0, lambda info: None, "t")  # type: ignore[arg-type]
    windows.caps["sampled"] = (5_000_000_000, schedule.SCRIPT_FLOORS["sampled"])
    windows.window("sampled", 300)
    windows.window("framework", 40)
    assert loop.calls == [(300, 5_000_000_000, 10), (40, 0, 0)]
