"""The stack classification table (profiler.rules), row by row, on built and recorded stacks."""

from __future__ import annotations

import re

import pytest

from profiler.analysis import stacks as rules
from profiler.capture.collectors.pyspy import parse_collapsed
from profiler.model import CATEGORIES, Frame
from tests.own_files import (
    DETECT,
    DRIVER_FILE,
    HOOKS_PHASE,
    LOOP_FILE,
    SAMPLED_PHASE,
    SCHEDULE,
    SCRIPT_WORKER,
    SEGMENT,
    WINDOW,
    WORKER,
)

SP = "/venv/lib/python3.11/site-packages"
SESSION = f"{SP}/tensorflow/python/client/session.py"
NUMPY_SO = f"{SP}/numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so"
FROMNUMERIC = f"{SP}/numpy/_core/fromnumeric.py"
LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
EAGER = f"{SP}/tensorflow/python/eager"
POLY = f"{EAGER}/polymorphic_function"


def py(function: str, file: str, line: int = 10) -> Frame:
    return Frame(function=function, file=file, line=line, native=False)


def nat(function: str, file: str = "") -> Frame:
    return Frame(function=function, file=file, line=0, native=True)


#: What every in-step stack of the workload process starts with (root first).
DRIVER = (
    nat("0x7f0000001234", LIBC),
    py("<module>", WORKER, 400),
    py("run_workload", WORKER, 250),
    py("run_phase", SCHEDULE, 280),
    py(WINDOW, SCHEDULE, 150),
    py(SEGMENT, SCHEDULE, 128),
    py("Loop.run", LOOP_FILE, 149),
)
NP_STEP = (*DRIVER, py("build.<locals>.step", "/repo/profiler/workloads/numpy_gd.py", 56))
NP_SUM = (*NP_STEP, py("sum", FROMNUMERIC, 2425), py("_wrapreduction", FROMNUMERIC, 83))
TF1_RUN = (
    *DRIVER,
    py("build.<locals>.step", "/repo/profiler/workloads/tf1_gd.py", 105),
    py("BaseSession.run", SESSION, 977),
    py("BaseSession._run", SESSION, 1190),
)
TF1_DO_RUN = (
    *TF1_RUN,
    py("BaseSession._do_run", SESSION, 1400),
    py("BaseSession._do_call", SESSION, 1407),
    py("BaseSession._do_run.<locals>._run_fn", SESSION, 1390),
)
TF2_CALL = (
    *DRIVER,
    py("Function.__call__", f"{POLY}/polymorphic_function.py", 833),
    py("ConcreteFunction._call_flat", f"{POLY}/concrete_function.py", 1322),
    py("AtomicFunction.call_flat", f"{POLY}/atomic_function.py", 251),
    py("Context.call_function", f"{EAGER}/context.py", 1688),
)
#: A user's script under ``python -m profiler run``: its loop calls a detected Session.run.
SCRIPT_DRIVER = DRIVER_FILE
SCRIPT = (
    nat("0x7f0000001234", LIBC),
    py("ScriptRun.run", SCRIPT_WORKER, 250),
    py("<module>", "/home/me/train.py", 54),
    py("wrap_session_run.<locals>.session_run", DETECT, 90),
)
GEN_MATH = f"{SP}/tensorflow/python/ops/gen_math_ops.py"
TF2_OP = (*DRIVER, py("Model.train_step", "/repo/profiler/workloads/tf2_common.py", 51))

#: One stack per row of the table: (stack, the label it must get). The row is the dict key.
EXAMPLES: dict[str, tuple[tuple[Frame, ...], str]] = {
    "sleep": (
        (
            *NP_STEP,
            nat("time_sleep", "/usr/lib/libpython3.11.so.1.0"),
            nat("clock_nanosleep", LIBC),
        ),
        "other",
    ),
    "data-loading": (
        (
            *NP_STEP,
            py("load", "/venv/site-packages/numpy/lib/_npyio_impl.py", 483),
            py("_read_array_header", "/venv/site-packages/numpy/lib/_format_impl.py", 658),
            py("literal_eval", "/usr/lib/python3.11/ast.py", 64),
        ),
        "feed_fetch",
    ),
    "data-loading-native": (
        (
            *NP_STEP,
            py("load", "/venv/site-packages/numpy/lib/_npyio_impl.py", 483),
            py("read_array", "/venv/site-packages/numpy/lib/_format_impl.py", 847),
            nat("PyArray_FromFile", NUMPY_SO),
            nat("read", LIBC),
        ),
        "feed_fetch",
    ),
    "pool-stream": (
        (
            *NP_STEP,
            py("IMapIterator.next", "/usr/lib/python3.11/multiprocessing/pool.py", 856),
            py("Condition.wait", "/usr/lib/python3.11/threading.py", 320),
        ),
        "feed_fetch",
    ),
    "pool-wait": (
        (
            *NP_STEP,
            py("Pool.map", "/usr/lib/python3.11/multiprocessing/pool.py", 367),
            py("ApplyResult.get", "/usr/lib/python3.11/multiprocessing/pool.py", 768),
            py("Event.wait", "/usr/lib/python3.11/threading.py", 622),
        ),
        "other",
    ),
    "queue-wait": (
        (
            *NP_STEP,
            py("Queue.get", "/usr/lib/python3.11/queue.py", 171),
            py("Condition.wait", "/usr/lib/python3.11/threading.py", 320),
            nat("0x7f2cd7a9f220", LIBC),
        ),
        "feed_fetch",
    ),
    # libc memcpy inside a numpy kernel: the kernel decides.
    "system-library": (
        (*NP_SUM, nat("PyUFunc_GenericReduction", NUMPY_SO), nat("malloc", LIBC)),
        "dispatch",
    ),
    "unresolved-address": (
        (*NP_SUM, nat("DOUBLE_pairwise_sum", NUMPY_SO), nat("0x7fbe1f0b45ce")),
        "compute",
    ),
    "interpreter-native": (
        (*NP_STEP, nat("_PyEval_EvalFrameDefault", "/usr/lib/libpython3.11.so.1.0")),
        "python",
    ),
    "numpy-scalar-alloc": ((*NP_STEP, nat("gentype_alloc", NUMPY_SO)), "python"),
    "tf1-session-call": (
        (*TF1_DO_RUN, py("BaseSession._call_tf_sessionrun", SESSION, 1483)),
        "native_session",
    ),
    "tf1-session-call-native": (
        (
            *TF1_DO_RUN,
            py("BaseSession._call_tf_sessionrun", SESSION, 1483),
            nat("TF_SessionRun_wrapper_helper", f"{SP}/tensorflow/python/_pywrap_tf_session.so"),
            nat("tensorflow::DirectSession::Run", f"{SP}/tensorflow/libtensorflow_cc.so.2"),
        ),
        "native_session",
    ),
    "tf-execute-native": (
        (*TF2_CALL, py("quick_execute", f"{EAGER}/execute.py", 53), nat("TFE_Py_Execute")),
        "native_function",
    ),
    "tf2-eager-fastpath-native": (
        (*TF2_OP, py("mat_mul", GEN_MATH, 6236), nat("TFE_Py_FastPathExecute_C")),
        "native_eager",
    ),
    "tf2-function-call": (
        (*TF2_CALL, py("quick_execute", f"{EAGER}/execute.py", 53)),
        "native_function",
    ),
    "tf2-eager-execute": (
        (
            *TF2_OP,
            py("mat_mul_eager_fallback", GEN_MATH, 6260),
            py("quick_execute", f"{EAGER}/execute.py", 53),
        ),
        "native_eager",
    ),
    "tf-data-ops": (
        (
            *DRIVER,
            py("DatasetV2.__iter__", f"{SP}/tensorflow/python/data/ops/dataset_ops.py", 501),
            py("make_iterator", f"{SP}/tensorflow/python/ops/gen_dataset_ops.py", 3478),
        ),
        "feed_fetch",
    ),
    "tf2-eager-op": ((*TF2_OP, py("mat_mul", GEN_MATH, 6236)), "native_eager"),
    "tf2-eager-tensor-conversion": (
        (
            *TF2_OP,
            py(
                "convert_to_eager_tensor",
                f"{SP}/tensorflow/python/framework/constant_op.py",
                108,
            ),
        ),
        "dispatch",
    ),
    "tf2-tape-gradient": (
        (
            *TF2_OP,
            py("GradientTape.gradient", f"{EAGER}/backprop.py", 1066),
            py("imperative_grad", f"{EAGER}/imperative_grad.py", 67),
        ),
        "dispatch",
    ),
    # A generic TF frame deep inside the fetch mapper takes the mapper's cause.
    "tf1-fetch-handling": (
        (
            *TF1_RUN,
            py("_FetchHandler.__init__", SESSION, 470),
            py("_ElementFetchMapper.__init__", SESSION, 320),
            py("Graph.as_graph_element", f"{SP}/tensorflow/python/framework/ops.py", 3000),
            py("Tensor.__getattr__", f"{SP}/tensorflow/python/framework/tensor.py", 250),
        ),
        "feed_fetch",
    ),
    "tf1-feed-expansion": (
        (*TF1_RUN, py("BaseSession._run.<locals>._feed_fn", SESSION, 1138)),
        "feed_fetch",
    ),
    "tf1-feed-conversion": (
        (
            *TF1_RUN,
            py("np_asarray", f"{SP}/tensorflow/python/util/numpy_compat.py", 76),
            py("NumpyVersion.__init__", f"{SP}/numpy/lib/_version.py", 55),
            py("match", "/usr/lib/python3.11/re/__init__.py", 166),
        ),
        "feed_fetch",
    ),
    "tf1-session-do-run": (
        (
            *TF1_RUN,
            py("BaseSession._do_run", SESSION, 1390),
            py("Tensor._as_tf_output", f"{SP}/tensorflow/python/framework/tensor.py", 300),
        ),
        "python",
    ),
    "tf1-feed-fetch-callee": (
        (
            *TF1_RUN,
            py("TensorShape.is_compatible_with", f"{SP}/tensorflow/python/framework/ts.py", 9),
            py("as_shape", f"{SP}/tensorflow/python/framework/ts.py", 1550),
        ),
        "feed_fetch",
    ),
    "tf1-session-python": (TF1_RUN, "python"),
    "tf-function-tracing": (
        (
            *DRIVER,
            py("Function.__call__", f"{POLY}/polymorphic_function.py", 833),
            py("_create_concrete_function", f"{POLY}/tracing_compilation.py", 300),
            py("Graph.create_op", f"{SP}/tensorflow/python/framework/ops.py", 2000),
        ),
        "tracing",
    ),
    "tf-autograph": (
        (*DRIVER, py("converted_call", f"{SP}/tensorflow/python/autograph/impl/api.py", 400)),
        "tracing",
    ),
    # In graph mode the generated wrapper calls _apply_op_helper: not the eager fast path.
    "tf-graph-building": (
        (
            *TF2_OP,
            py("mat_mul", GEN_MATH, 6270),
            py("_apply_op_helper", f"{SP}/tensorflow/python/framework/op_def_library.py", 778),
        ),
        "tracing",
    ),
    "tf-data": (
        (
            *DRIVER,
            py("OwnedIterator.__next__", f"{SP}/tensorflow/python/data/ops/iterator_ops.py", 820),
        ),
        "feed_fetch",
    ),
    "keras-data": (
        (
            *DRIVER,
            py("TensorFlowTrainer.fit", f"{SP}/keras/src/backend/tensorflow/trainer.py", 397),
            py("EpochIterator._enumerate_iterator", f"{SP}/keras/src/trainers/epoch_iterator.py"),
        ),
        "feed_fetch",
    ),
    # python float * np.float64 runs a whole 0-d ufunc: still scalar math, kernel included.
    "numpy-scalar-math-callee": (
        (
            *NP_STEP,
            nat("gentype_multiply", NUMPY_SO),
            nat("ufunc_generic_fastcall", NUMPY_SO),
            nat("DOUBLE_multiply_X86_V3", NUMPY_SO),
        ),
        "python",
    ),
    "numpy-kernel": (
        (*NP_SUM, nat("PyUFunc_GenericReduction", NUMPY_SO), nat("DOUBLE_pairwise_sum", NUMPY_SO)),
        "compute",
    ),
    "numpy-simd-kernel": ((*NP_STEP, nat("simd_binary_add_f64", NUMPY_SO)), "compute"),
    "numpy-cast-copy-loop": (
        (*NP_STEP, nat("_aligned_strided_to_strided_size8_srcstride0", NUMPY_SO)),
        "compute",
    ),
    "blas-library": (
        (
            *NP_STEP,
            nat("dgemm_kernel_HASWELL", f"{SP}/numpy.libs/libscipy_openblas64_-ff651d7f.so"),
        ),
        "compute",
    ),
    "blas-symbol": ((*NP_STEP, nat("cblas_dgemm", "/usr/lib/libfoo.so")), "compute"),
    "numpy-scalar-math": ((*NP_STEP, nat("double_multiply", NUMPY_SO)), "python"),
    "numpy-native": (
        (*NP_STEP, nat("ufunc_generic_fastcall", NUMPY_SO), nat("fetestexcept", LIBC)),
        "dispatch",
    ),
    "numpy-wrappers": (NP_SUM, "dispatch"),
    "tf-function-call-python": (
        (*TF2_CALL[:-1], py("FunctionType.bind", f"{SP}/tensorflow/core/function/ft.py", 9)),
        "python",
    ),
    "keras-python": (
        (
            *DRIVER,
            py("TensorFlowTrainer.fit", f"{SP}/keras/src/backend/tensorflow/trainer.py", 397),
        ),
        "python",
    ),
    "loop-driver": (NP_STEP, "python"),
    # A Loop subclass's own run (Keras) is not Loop.run: the segment that called it decides.
    "step-segment": (
        (*DRIVER[:-1], py("KerasLoop.run", "/repo/profiler/workloads/keras_adam.py", 115)),
        "python",
    ),
    # A user's script (profiler.script): waiting at a step boundary while phases switch ...
    "script-handoff": (
        (
            *SCRIPT,
            py("StepDriver.boundary", SCRIPT_DRIVER, 140),
            py("StepDriver._event", SCRIPT_DRIVER, 190),
            py("StepDriver._serve", SCRIPT_DRIVER, 205),
            py("Condition.wait", "/usr/lib/python3.11/threading.py", 320),
        ),
        "instrumentation",
    ),
    # ... and the detector's own code, when it is the innermost Python frame.
    "script-detector": (
        (*SCRIPT, py("StepDriver.boundary", SCRIPT_DRIVER, 140)),
        "instrumentation",
    ),
    "instrumentation": (
        (*DRIVER, py("HooksPhase.wrapper.__enter__", HOOKS_PHASE, 30)),
        "instrumentation",
    ),
    "any-python": (
        (py("<module>", "/home/me/script.py", 3), py("helper", "/home/me/x.py")),
        "python",
    ),
    "no-python": ((nat("0x7f00", LIBC), nat("start_thread", "/usr/lib/libfoo.so")), "other"),
}


def test_every_row_has_an_example() -> None:
    assert set(EXAMPLES) == {r.name for r in (*rules.RULES, *rules.FALLBACK_RULES)}


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_row_decides_its_example(name: str) -> None:
    stack, label = EXAMPLES[name]
    m = rules.match(stack)
    row = next(r for r in (*rules.RULES, *rules.FALLBACK_RULES) if r.name == name)
    if row.category == rules.CALLER:
        # The row fits the leaf and passes the decision to an outer frame.
        assert rules.rule_for(stack, len(stack) - 1) == row
        assert m.frame < len(stack) - 1
        assert m.label == label
    else:
        assert (m.rule, m.label) == (name, label)
    assert rules.classify(stack) == label


def test_rows_use_known_labels_and_unique_names() -> None:
    table = (*rules.RULES, *rules.FALLBACK_RULES)
    assert len({r.name for r in table}) == len(table)
    assert {r.category for r in table} <= {*rules.LABELS, rules.CALLER}
    assert set(rules.LABELS) == {*CATEGORIES, *rules.TEMPORARY_LABELS, rules.INSTRUMENTATION}
    assert all(r.note for r in table)


def test_within_names_an_existing_row() -> None:
    withins = [r.within for r in rules.RULES if r.within]
    assert withins and set(withins) <= {r.name for r in rules.RULES if not r.within}


def test_innermost_frame_decides_before_outer_ones() -> None:
    # The numpy wrapper (dispatch) encloses the kernel (compute): the kernel wins.
    stack = (*NP_SUM, nat("PyUFunc_GenericReduction", NUMPY_SO), nat("DOUBLE_add", NUMPY_SO))
    m = rules.match(stack)
    assert (m.label, m.frame) == ("compute", len(stack) - 1)


def test_caller_rows_defer_to_the_caller() -> None:
    # malloc says nothing: under numpy's allocator it is dispatch, under the step's bytecode
    # (a Python object) it is the loop's Python.
    assert rules.classify((*NP_STEP, nat("PyDataMem_UserNEW", NUMPY_SO), nat("malloc", LIBC))) == (
        "dispatch"
    )
    assert rules.classify((*NP_STEP, nat("malloc", LIBC))) == "python"
    assert rules.match((*NP_STEP, nat("malloc", LIBC))).rule == "loop-driver"


def test_leaf_rows_match_only_the_innermost_python_frame() -> None:
    # gen_math_ops.mat_mul as an outer frame (calling the tape) is not the fast-path call.
    stack = (*TF2_OP, py("mat_mul", GEN_MATH, 6236), py("record_gradient", f"{EAGER}/x.py"))
    assert rules.match(stack).rule != "tf2-eager-op"
    # Native frames below it do not stop it being the innermost *Python* frame.
    assert rules.classify((*TF2_OP, py("mat_mul", GEN_MATH), nat("0x7f01", LIBC))) == (
        "native_eager"
    )


def test_caller_pattern_tells_a_function_call_from_an_eager_op() -> None:
    quick = py("quick_execute", f"{EAGER}/execute.py", 53)
    assert rules.classify((*TF2_CALL, quick)) == "native_function"
    assert rules.classify((*TF2_OP, quick)) == "native_eager"


def test_do_run_is_not_feed_handling_but_what_run_calls_otherwise_is() -> None:
    assert rules.classify((*TF1_RUN, py("BaseSession._do_run", SESSION, 1390))) == "python"
    graph_lookup = py("Graph.as_graph_element", f"{SP}/tensorflow/python/framework/ops.py")
    assert rules.classify((*TF1_RUN, graph_lookup)) == "feed_fetch"


def test_script_detector_frames_leave_the_session_call_to_its_own_rows() -> None:
    # The detector wraps the script's Session.run: what runs inside it is classified as in a
    # registered workload, not as the toolkit's (the detector row fits the leaf only).
    stack = (*SCRIPT, *TF1_RUN[len(DRIVER) + 1 :])
    assert rules.match(stack).rule == rules.match(TF1_RUN).rule
    assert rules.classify(stack) != "instrumentation"


def test_step_scope() -> None:
    assert rules.in_steps(NP_STEP)
    outside = (DRIVER[1], DRIVER[2], py("SampledPhase.remove", SAMPLED_PHASE))
    assert not rules.in_steps(outside)
    assert rules.classify(outside) == "instrumentation"


def test_temporary_labels_are_documented() -> None:
    for label, text in rules.TEMPORARY_LABELS.items():
        assert rules.is_temporary(label)
        assert "framework trace" in text
    assert not rules.is_temporary("compute")


#: Stacks recorded with py-spy on this project's workloads (paths shortened), as collapsed lines.
_HEAD = [
    "thread (4242)",
    f"<module> ({WORKER}:330)",
    f"Windows.segment ({SCHEDULE}:128)",
    f"Loop.run ({LOOP_FILE}:149)",
]
_NP = "build.<locals>.step (/repo/workloads/numpy_gd.py:{})"
_TF1 = [
    "build.<locals>.step (/repo/workloads/tf1_gd.py:105)",
    f"BaseSession.run ({SESSION}:977)",
]
_RECORDED_STACKS: list[tuple[list[str], int]] = [
    (
        [
            _NP.format(57),
            f"dispatcher_vectorcall ({NUMPY_SO})",
            f"sum ({FROMNUMERIC}:2425)",
            f"_wrapreduction ({FROMNUMERIC}:83)",
            f"PyUFunc_GenericReduction ({NUMPY_SO})",
            f"PyUFunc_ReduceWrapper ({NUMPY_SO})",
            f"reduce_loop ({NUMPY_SO})",
            f"DOUBLE_pairwise_sum ({NUMPY_SO})",
        ],
        7,
    ),
    ([_NP.format(56), f"ufunc_generic_fastcall ({NUMPY_SO})", f"0x7fbe1f0b45ce ({LIBC})"], 3),
    ([_NP.format(63)], 2),
    (
        [
            *_TF1,
            f"BaseSession._run ({SESSION}:1205)",
            f"_FetchHandler.__init__ ({SESSION}:479)",
            f"_ListFetchMapper.__init__ ({SESSION}:365)",
            f"_ListFetchMapper.__init__.<locals>.<listcomp> ({SESSION}:365)",
            f"_FetchMapper.for_fetch ({SESSION}:263)",
            f"_ElementFetchMapper.__init__ ({SESSION}:299)",
            f"Graph.as_graph_element ({SP}/tensorflow/python/framework/ops.py:2924)",
        ],
        5,
    ),
    (
        [
            *_TF1,
            f"BaseSession._run ({SESSION}:1220)",
            f"BaseSession._do_run ({SESSION}:1400)",
            f"BaseSession._do_call ({SESSION}:1407)",
            f"BaseSession._do_run.<locals>._run_fn ({SESSION}:1390)",
            f"BaseSession._call_tf_sessionrun ({SESSION}:1483)",
        ],
        11,
    ),
]
RECORDED = "".join(f"{';'.join(_HEAD + frames)} {n}\n" for frames, n in _RECORDED_STACKS)


def test_recorded_stacks() -> None:
    samples = parse_collapsed(RECORDED, main_tid=4242)
    got = [(rules.classify(s.frames), s.count) for s in samples]
    assert sorted(got) == sorted(
        [("compute", 7), ("dispatch", 3), ("python", 2), ("feed_fetch", 5), ("native_session", 11)]
    )
    assert all(s.thread == "main" for s in samples)


def test_the_toolkits_own_frames_are_known_by_their_modules_wherever_they_live():
    """The rows for the toolkit's own code come from its modules (names, qualified names), so
    they hold for a checkout anywhere and for an installed copy, and follow a moved module."""
    from profiler.capture.schedule import Windows

    code = Windows.segment.__code__
    here = Frame(Windows.segment.__qualname__, code.co_filename, code.co_firstlineno)
    installed = Frame(here.function, "/x/site-packages/profiler/capture/schedule.py", 10)
    elsewhere = Frame(here.function, "/home/u/src/profiler/capture/schedule.py", 10)
    assert all(rules.in_steps((f,)) for f in (here, installed, elsewhere))
    # Another module's function of the same name is not the step driver.
    assert not rules.in_steps((Frame(here.function, "/x/site-packages/other/schedule.py", 10),))
    row = next(r for r in rules.RULES if r.name == "step-segment")
    assert row.function == re.escape(Windows.segment.__qualname__)


def test_a_builtins_native_frames_under_the_scripts_line_are_python_not_other() -> None:
    # math.sin's libm frames, which no row names, under the script's line: interpreter time
    # (they were "other" in 22% of a pure-Python loop's samples); native frames alone stay other.
    stack = (py("work", "/home/me/script.py", 5), nat("math_sin"), nat("0x7fb74048b2df"))
    assert rules.match(stack).label == "python" and rules.match(stack).rule == "any-python"
    assert rules.match(stack[1:]).label == "other"
