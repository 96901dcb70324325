"""One small real run of ``tf1_gd`` and ``tf2_function_step`` shared by several test modules.

The framework, hooks, TensorBoard and Chrome-trace tests all read the same run, produced once
per test session by the real pipeline (one workload process each, small windows), so the
TensorFlow cost is paid once: ~20–30 s in all.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

#: Window sizes of the shared run (steps).
TIMED_STEPS = 300
FRAMEWORK_STEPS = 60
HOOKS_STEPS = 300
FULL_TRACE_STEPS = 10
WORKLOADS = ("tf1_gd", "tf2_function_step")


_DONE: list[object] = []


def tf_run():  # type: ignore[no-untyped-def]
    """The ``RunResult`` of the shared run (run once, deleted when the test process exits).

    A failure is kept too: every test that needs the run fails at once with the same error
    instead of running the pipeline again.
    """
    if not _DONE:
        try:
            _DONE.append(_execute())
        except Exception as exc:
            _DONE.append(exc)
    if isinstance(_DONE[0], Exception):
        raise RuntimeError(f"the shared TF run failed: {_DONE[0]}") from _DONE[0]
    return _DONE[0]


def _execute():  # type: ignore[no-untyped-def]
    from profiler.processes.pipeline import execute
    from profiler.processes.runner import RunOptions
    from profiler.workloads import get

    out = Path(tempfile.mkdtemp(prefix="tlp-tf-capture-"))
    atexit.register(shutil.rmtree, out, True)
    specs = [get(name) for name in WORKLOADS]
    opts = RunOptions(
        workloads=specs,
        params={s.name: s.defaults.with_(steps=TIMED_STEPS) for s in specs},
        phases=["timed", "framework", "hooks"],
        out_root=out,
        timeout_s=300,
        warmup_steps=50,
        metric_points=4,
        phase_steps={"framework": FRAMEWORK_STEPS, "hooks": HOOKS_STEPS},
        options={"full_trace_steps": FULL_TRACE_STEPS},
        progress=False,
    )
    result = execute(opts)
    for o in result.outcomes:
        if o.status != "ok":
            raise RuntimeError(f"the shared TF run failed for {o.spec.name}: {o.error}")
    return result


def outcome(name: str):  # type: ignore[no-untyped-def]
    """The shared run's outcome for workload ``name``."""
    for o in tf_run().outcomes:
        if o.spec.name == name:
            return o
    raise KeyError(name)
