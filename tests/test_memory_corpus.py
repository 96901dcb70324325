"""The memory corpus (``tests/data/memory/``), profiled with no options: a growth named with
its cause, its figure against the truth measured without the profiler (each script's
docstring, ``tests/data/memory/truth.py``), and no growth finding where nothing grows, also
with a busy process beside the run (issue 26, item 2).

Each test reads the script's recorded run (``tests/data/recorded_scripts``, re-analysed) in
``make test``, and a live run of the script under ``make live`` (each 40-120 s on a loaded
2-core machine).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler.reports import summary
from tests.recorded import MODES, profiled

CORPUS = Path(__file__).resolve().parent / "data" / "memory"


def _profile(
    mode: str, tmp_path: Path, name: str, busy: bool = False
) -> tuple[dict, dict[str, dict]]:
    run = profiled(mode, tmp_path, CORPUS / name, busy=busy)
    summary.validate(run.doc)
    return run.workload, run.findings


@pytest.mark.parametrize("mode", MODES)
def test_ops_built_in_the_loop_are_named_with_their_line(tmp_path: Path, mode: str) -> None:
    w, found = _profile(mode, tmp_path, "tf1_assign_in_loop.py")
    m = w["memory"]
    assert m["grows"]
    # The profiler's step is one session.run (three a loop iteration); the truth is per
    # iteration (120 of them): 319,247 bytes. Measured 320,900 (0.5% over); bounds +-20%.
    per_iteration = m["growth_bytes_per_step"] * m["last_step"] / 120
    assert 0.8 * 319_247 <= per_iteration <= 1.2 * 319_247, m
    cause = m["causes"][0]
    assert cause["kind"] == "graph" and cause["line"] == 35, m["causes"]
    assert "AssignVariableOp" in cause["detail"]
    d = found["memory_growth"]
    assert "ops a step: the loop builds ops" in d["message"]
    assert "line 35: `sess.run(w.assign(new_weights))`" in d["message"]
    assert "placeholder" in d["fix"] and "float(" not in d["fix"]


@pytest.mark.parametrize("mode", MODES)
def test_tensors_kept_in_a_list_are_named_with_the_bytes_they_hold(
    tmp_path: Path, mode: str
) -> None:
    w, found = _profile(mode, tmp_path, "tf2_losses_kept_as_tensors.py")
    m = w["memory"]
    assert m["grows"]
    # Truth 5,033 bytes a step (182 with the fix); measured 4,849 (4% under); bounds +-30%
    # (the instrumented phases' own buffers are left out, not always every byte of them).
    assert 0.7 * 5_033 <= m["growth_bytes_per_step"] <= 1.3 * 5_033, m
    cause = m["causes"][0]
    assert (cause["kind"], cause["label"]) == ("container", "history"), m["causes"]
    assert cause["detail"] == "a tf.Tensor float32 (1024, 1)"
    assert 0.5 <= cause["share"] <= 1.5
    d = found["memory_growth"]
    assert "`history` gets 1 item a step, each a tf.Tensor float32 (1024, 1)" in d["message"]
    assert "float(x)" in d["fix"] and "placeholder" not in d["fix"]


@pytest.mark.parametrize("mode", MODES)
def test_a_loop_keeping_floats_gets_no_growth_finding_beside_a_busy_process(
    tmp_path: Path, mode: str
) -> None:
    # Recorded beside a busy process too (python -m tests.recorded --script ... --busy).
    w, found = _profile(mode, tmp_path, "tf2_losses_as_floats.py", busy=True)
    assert "memory_growth" not in found, found.get("memory_growth")
    m = w["memory"]
    # Truth: 177 bytes a step (a Python float and its list slot, plus noise).
    assert not m["grows"] or m["growth_bytes_per_step"] < 1_000, m


@pytest.mark.parametrize("mode", MODES)
def test_the_fix_of_a_retraced_function_is_measured_to_stop_the_growth(
    tmp_path: Path, mode: str
) -> None:
    # Issue 26, item 3, with no options (2-3 runs, ~40 s): the growth is read over the steps,
    # the fix (lr as a tensor) in alternating blocks. With the timed window and the what-ifs
    # alone (one run), the growth read as none in about 1 run of 3 in the test suite.
    w, found = _profile(mode, tmp_path, "tf2_retrace_python_lr.py")
    m = w["memory"]
    # Truth 285,957 bytes a step as written, 154 with the fix (the script's docstring).
    assert m["grows"] and 0.7 * 285_957 <= m["growth_bytes_per_step"] <= 1.3 * 285_957, m
    (x,) = [x for x in w["whatif"] if x["id"] == "tensor_args"]
    base, var = x["grew_per_step_bytes"]
    assert 0.5 * 285_957 <= base <= 1.5 * 285_957 and var <= 0.1 * base, x
    d = found["memory_growth"]
    assert "Measured on your loop, with train_step called with lr as a tensor" in d["fix"]
    assert "the growth stops" in d["fix"], d["fix"]
