"""The numpy what-if (``numpy_float32``): a numpy MLP trained in float64 gets its arrays as
float32 in the variant's blocks, measured against the loop as written; a script already in
float32 gets the reason it does not apply; float64 arrays that are a running function's locals
are rebound too (or named as left); the script runs to its end with its arrays float64 again.

The scripts pin BLAS to one thread: on this shared two-core machine a two-thread BLAS step's
time depends on the other processes' load more than on its dtype. Measured without the
profiler (``OPENBLAS_NUM_THREADS=1``, the MLP below, 2000 x 256 -> 128 -> 1): a step takes
8.5-9.1 ms in float64 and 3.8-4.1 ms in float32, 2.2x (two runs of 12 alternating 10-step
blocks, medians); the whole script at 400 steps 3.41 s against 1.59 s, 2.14x, and ``MLP``
below as the test runs it (800 steps) 7.25 s against 3.21 s, 2.26x (3 runs each, medians,
start-up included, load average ~3). With BLAS's default two threads the whole script's medians were
6.58 s against 5.26 s (1.25x): the other processes' load, not the dtype.
"""

from __future__ import annotations

import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest

from profiler.capture import whatifs, whatifs_numpy
from tests.test_script_run import cli, only_run, phase, workload, write

#: The step's speed-up the what-if may measure: 2.2x per step measured without the profiler
#: (see above), bounds wide enough for a loaded machine.
RATIO_LOW, RATIO_HIGH = 1.3, 3.5

MLP = """
import os
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np

rng = np.random.default_rng(0)
X = rng.standard_normal((2000, 256)).astype(np.{dtype})
y = (X[:, :8].sum(axis=1, keepdims=True) > 0).astype(np.{dtype})
W1 = (rng.standard_normal((256, 128)) * 0.05).astype(np.{dtype})
b1 = np.zeros(128, dtype=np.{dtype})
W2 = (rng.standard_normal((128, 1)) * 0.05).astype(np.{dtype})
b2 = np.zeros(1, dtype=np.{dtype})
lr = 0.05

for step in range(800):
    h = np.maximum(X @ W1 + b1, 0)
    out = h @ W2 + b2
    err = out - y
    loss = float((err * err).mean())
    g_out = 2 * err / len(X)
    g_h = (g_out @ W2.T) * (h > 0)
    W2 -= lr * (h.T @ g_out)
    b2 -= lr * g_out.sum(axis=0)
    W1 -= lr * (X.T @ g_h)
    b1 -= lr * g_h.sum(axis=0)
print(f"final loss {{loss:.6f}} weights {{W1.dtype}} {{W2.dtype}}")
"""

LOCALS = """
import os
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np


def train(steps):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2000, 256))
    y = (X[:, :8].sum(axis=1, keepdims=True) > 0) * 1.0
    params = [rng.standard_normal((256, 128)) * 0.05, rng.standard_normal((128, 1)) * 0.05]
    for step in range(steps):
        W1, W2 = params
        h = np.maximum(X @ W1, 0)
        err = h @ W2 - y
        loss = float((err * err).mean())
        g_out = 2 * err / len(X)
        g_h = (g_out @ W2.T) * (h > 0)
        W2 -= 0.05 * (h.T @ g_out)
        W1 -= 0.05 * (X.T @ g_h)
    return loss, X.dtype, params[0].dtype


loss, xd, wd = train(800)
print(f"final loss {loss:.6f} X {xd} W1 {wd}")
"""


def _run(tmp_path: Path, name: str, body: str, *args: str) -> tuple[dict, str]:
    script = write(tmp_path, name, body)
    out = cli(tmp_path, *args, str(script))
    assert out.returncode == 0, out.stderr[-3000:]
    return workload(only_run(tmp_path)), out.stdout


@pytest.mark.slow
def test_a_float64_mlp_is_measured_faster_in_float32(tmp_path: Path):
    # Results change only within float32 rounding in its blocks: it runs with no options.
    w, stdout = _run(tmp_path, "mlp.py", MLP.format(dtype="float64"))
    (x,) = [x for x in w["whatif"] if x["id"] == "numpy_float32"]
    assert x["status"] in ("ok", "partial") and x["pairs"] >= 2, x
    assert x["removes"] == ["compute"] and x["removes_share"] == whatifs_numpy.SHARE
    assert not x["keeps_results"] and "float32 precision" in x["results_note"]
    assert x["title"] == whatifs_numpy.TITLE
    # A saving: its whole 95% interval above zero, the verdict against the prediction.
    low, high = x["interval_us"]
    assert 0 < low <= x["measured_saving_us"] <= high
    assert x["verdict"] in ("holds", "misses")
    ratio = x["baseline_us"] / x["variant_us"]
    assert RATIO_LOW <= ratio <= RATIO_HIGH, ratio
    assert "float32 arrays (astype(np.float32))" in stdout
    assert "the top fix, measured on your loop: float32 arrays" in stdout
    # The script ran to its end, its weights float64 again after the blocks.
    assert "final loss" in stdout and "weights float64 float64" in stdout
    assert w["status"] == "ok"


@pytest.mark.slow
def test_float32_arrays_already_get_the_reason(tmp_path: Path):
    w, stdout = _run(tmp_path, "mlp32.py", MLP.format(dtype="float32"))
    assert not w.get("whatif")
    p = phase(w, "whatif")
    assert p["status"] == "skipped"
    assert "numpy_float32: no float64 arrays of the script's" in p["reason"], p["reason"]
    assert "final loss" in stdout and "weights float32 float32" in stdout


@pytest.mark.slow
def test_a_train_functions_float64_locals_are_rebound(tmp_path: Path):
    w, stdout = _run(tmp_path, "train_fn.py", LOCALS, "--whatif", "all")
    (x,) = [x for x in w["whatif"] if x["id"] == "numpy_float32"]
    assert x["status"] in ("ok", "partial"), x
    # This CPython keeps a frame's rebound locals (PyFrame_LocalsToFast): none are left.
    assert x["title"] == whatifs_numpy.TITLE
    assert x["measured_saving_us"] is not None and x["baseline_us"] > x["variant_us"]
    assert "final loss" in stdout and "X float64 W1 float64" in stdout


# --- in this process: a stand-in __main__ ------------------------------------------------------

SCRIPT = "/nonexistent/stand_in_script.py"


@pytest.fixture
def main(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A ``__main__`` whose file is ``SCRIPT`` (the functions compiled under that name are
    the script's), and no TensorFlow imported."""
    module = types.ModuleType("__main__")
    module.__file__ = SCRIPT
    monkeypatch.setitem(sys.modules, "__main__", module)
    monkeypatch.delitem(sys.modules, "tensorflow", raising=False)
    return module


def _script_function(main: types.ModuleType, source: str, name: str) -> types.FunctionType:
    exec(compile(textwrap.dedent(source), SCRIPT, "exec"), vars(main))
    fn = vars(main)[name]
    assert isinstance(fn, types.FunctionType)
    return fn


TRAIN = """
import numpy as np

def train(hook):
    X = np.ones((200, 100))
    pair = (np.ones((100, 10)), np.ones(10))
    seen = []
    for i in range(4):
        hook(i)
        seen.append((X.dtype.name, pair[0].dtype.name, pair[1].dtype.name))
    return seen
"""


def test_locals_globals_attributes_and_items_are_rebound_and_back(main: types.ModuleType):
    g = vars(main)
    g["W"] = np.ones((100, 100))
    g["alias"] = [g["W"], np.ones(3, np.float32)]
    g["model"] = types.SimpleNamespace(b=np.ones(50), layers={"w": np.ones(20)})
    train = _script_function(main, TRAIN, "train")
    variants: list = []

    def hook(i: int) -> None:
        if i == 1:
            variants.append(whatifs_numpy.numpy_float32(g))
            variants[0].on()
        if i == 3:
            variants[0].off()

    seen = train(hook)
    assert seen == [("float64",) * 3] + [("float32",) * 3] * 2 + [("float64",) * 3]
    assert g["W"].dtype == np.float64 and g["model"].b.dtype == np.float64
    assert g["model"].layers["w"].dtype == np.float64
    assert g["alias"][0] is g["W"]  # two names of one array still hold one array
    assert g["alias"][1].dtype == np.float32  # not the what-if's: left as it was
    assert variants[0].title == whatifs_numpy.TITLE


def test_arrays_promoted_back_to_float64_by_the_step_fail_the_what_if_with_the_operands(
    main: types.ModuleType,
):
    # A numpy L-layer net kept its 0/1 labels int64: float32 - int64 is float64, its weights
    # went back to float64 at the first update, and the blocks timed a loop of both
    # precisions ("slower, not a fix", where float32 throughout was 1.9x faster).
    g = vars(main)
    g["W"] = np.ones((200, 100))
    g["Y"] = np.ones((1, 200), dtype=np.int64)
    v = whatifs_numpy.numpy_float32(g)
    assert not isinstance(v, str)
    v.on()
    assert g["W"].dtype == np.float32
    g["W"] = g["W"] - 0.1 * g["Y"][0, :100]  # the step's update, with Y int64
    assert g["W"].dtype == np.float64
    v.off()
    assert v.errors == [
        "float32 did not hold through the steps: W were float64 again after a block, made anew "
        "in float64 by the step (from an operand, such as an integer array beside them: Y, or "
        "data read as float64); a float32 step needs those as float32 too (labels and masks "
        "included)"
    ]
    # Arrays that stayed float32 through the block: no error.
    g2 = {"W": np.ones((200, 100))}
    vars(main).clear()
    vars(main).update(g2, __file__=SCRIPT)
    ok = whatifs_numpy.numpy_float32(vars(main))
    assert not isinstance(ok, str)
    ok.on()
    vars(main)["W"] = vars(main)["W"] * 0.5
    ok.off()
    assert ok.errors == [] and vars(main)["W"].dtype == np.float64


def test_locals_that_cannot_be_rebound_are_named(
    main: types.ModuleType, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(whatifs_numpy, "write_local", lambda frame, name, value: False)
    train = _script_function(main, TRAIN, "train")
    variants: list = []

    def hook(i: int) -> None:
        if i == 1:
            variants.append(whatifs_numpy.numpy_float32(vars(main)))
            variants[0].on()
        if i == 3:
            variants[0].off()

    seen = train(hook)
    assert all(s == ("float64",) * 3 for s in seen)
    assert "left float64" in variants[0].title
    assert "train().X" in variants[0].title and "train().pair" in variants[0].title


def test_small_or_absent_float64_arrays_give_the_reason(main: types.ModuleType):
    assert whatifs_numpy.numpy_float32(None) == "no float64 arrays of the script's"
    vars(main)["w"] = np.ones(100)
    why = whatifs_numpy.numpy_float32(None)
    assert isinstance(why, str) and "100 elements" in why and "10,000" in why


def test_the_numpy_what_ifs_are_the_only_candidates_and_run_by_default(main: types.ModuleType):
    import threadpoolctl

    vars(main)["X"] = np.ones((200, 100))
    numpy_ids = ["numpy_float32", "numpy_blas_one_thread"]
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        found, not_run = whatifs.candidates(None, vars(main), allow_all=False)  # type: ignore[arg-type]
        # float32 may change results, but only by float32 rounding in its blocks
        # (BOUNDED_CHANGE); BLAS's threads change only the order of its sums.
        assert [v.id for v in found] == numpy_ids and not_run == []
        assert not found[0].keeps_results and "float32 precision" in found[0].results_note
        assert found[1].keeps_results
        found, not_run = whatifs.candidates(None, vars(main), allow_all=True)  # type: ignore[arg-type]
        assert [v.id for v in found] == numpy_ids and not_run == []
    assert set(numpy_ids) <= set(whatifs.ids())


def test_blas_on_one_thread_in_the_blocks_and_its_threads_back_after(main: types.ModuleType):
    import threadpoolctl

    from profiler.capture import whatifs_blas

    g = vars(main)
    g["x"] = np.ones((8, 8))
    assert whatifs_blas.numpy_blas_one_thread() == (
        "the script's float arrays hold 64 elements in all (fewer than 10,000: BLAS runs calls "
        "that small on one thread)"
    )
    g["W"] = np.ones((200, 100))

    def blas_threads() -> int:
        return max(
            i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"
        )

    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        assert blas_threads() == 2
        v = whatifs_blas.numpy_blas_one_thread()
        assert not isinstance(v, str) and v.keeps_results and v.removes == ()
        assert v.check.endswith("ran 2 threads as written, one in the variant's blocks")
        for _ in range(2):  # blocks of a pair, then the next pair's
            v.on()
            v.on()  # twice in a row (a pair ending with the variant, the next beginning so)
            assert blas_threads() == 1
            assert float((g["W"] @ g["W"].T).sum()) == 200 * 200 * 100.0
            v.off()
            assert blas_threads() == 2
        assert v.errors == []
    with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
        assert whatifs_blas.numpy_blas_one_thread() == "numpy's BLAS already runs on one thread"
