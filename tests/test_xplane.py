"""xplane collector: hand-built captures with figures checked by hand, and broken files."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from profiler.capture.collectors import xplane
from profiler.capture.collectors.xplane import XPlaneError, normalise_kernel, union_ns

pytestmark = pytest.mark.tf


class _Builder:
    """A minimal XSpace: a /host:CPU plane whose events are given in nanoseconds."""

    def __init__(self) -> None:
        from tensorflow.tsl.profiler.protobuf import xplane_pb2

        self.space = xplane_pb2.XSpace()
        self.plane = self.space.planes.add(name=xplane.HOST_PLANE)
        self._events: dict[tuple[str, str], int] = {}
        self._stats: dict[str, int] = {}

    def _stat_id(self, name: str) -> int:
        if name not in self._stats:
            sid = len(self._stats) + 1
            self._stats[name] = sid
            self.plane.stat_metadata[sid].id = sid
            self.plane.stat_metadata[sid].name = name
        return self._stats[name]

    def _event_id(self, name: str, display: str) -> int:
        key = (name, display)
        if key not in self._events:
            eid = len(self._events) + 1
            self._events[key] = eid
            self.plane.event_metadata[eid].id = eid
            self.plane.event_metadata[eid].name = name
            self.plane.event_metadata[eid].display_name = display
        return self._events[key]

    def line(self, name: str, timestamp_ns: int = 0):  # type: ignore[no-untyped-def]
        return self.plane.lines.add(
            id=len(self.plane.lines) + 1, name=name, timestamp_ns=timestamp_ns
        )

    def event(self, line, name, start_ns, dur_ns, display="", **stats):  # type: ignore[no-untyped-def]
        ev = line.events.add(
            metadata_id=self._event_id(name, display),
            offset_ps=(start_ns - line.timestamp_ns) * 1000,
            duration_ps=dur_ns * 1000,
        )
        for key, value in stats.items():
            st_ = ev.stats.add(metadata_id=self._stat_id(key))
            if isinstance(value, str):
                st_.ref_value = self._stat_id(value)
            else:
                st_.int64_value = value
        return ev

    def write(self, path: Path) -> Path:
        path.write_bytes(self.space.SerializeToString())
        return path


def _tf1_capture(tmp_path: Path) -> Path:
    """Two TF1 steps (5 and 6) and a re-warm step (4), times in ns."""
    b = _Builder()
    py = b.line("python", timestamp_ns=100)
    c0 = b.line("tf_Compute/-123", timestamp_ns=100)
    c1 = b.line("tf_Compute/456", timestamp_ns=100)
    b.event(py, "train", 100, 500, step_num=4, _r=1)
    b.event(c0, "pow:Pow", 200, 100, display="Pow")  # in step 4: not asked for
    for step, t in ((5, 1_000), (6, 20_000)):
        b.event(py, "train", t, 10_000, step_num=step, _r=1)
        b.event(py, "SessionRun", t + 1_000, 7_000)
        b.event(c0, "ExecutorState::Process", t + 1_500, 4_500)
        b.event(c0, "add:_MklNativeFusedMatMul", t + 2_000, 2_000, display="_MklNativeFusedMatMul")
        b.event(c1, "ExecutorState::Process", t + 2_500, 1_000)
        b.event(c1, "grad/Pow:Pow", t + 3_000, 2_000, display="Pow")  # overlaps by 1,000
        b.event(c0, "ExecutorDoneCallback", t + 6_000, 500)
        b.event(c0, "ThreadpoolListener::Record", t + 6_600, 0)
    return b.write(tmp_path / "host.xplane.pb")


def test_tf1_steps_are_split_into_run_call_executor_and_kernels(tmp_path):
    cap = xplane.parse(_tf1_capture(tmp_path), [5, 6, 7])
    assert sorted(cap.steps) == [5, 6]
    assert cap.missing == (7,)
    assert cap.steps[5] == (1_000, 11_000)
    cols = xplane.step_table(cap)
    assert cols.step == (
        5,
        6,
    )
    assert cols.wall_ns == (
        10_000,
        10_000,
    )
    assert cols.run_call_ns == (
        7_000,
        7_000,
    )
    # kernels [2000, 4000) and [3000, 5000) relative to the step: union 3,000, sum 4,000
    assert cols.kernel_union_ns == (
        3_000,
        3_000,
    )
    assert cols.kernel_sum_ns == (
        4_000,
        4_000,
    )
    assert cols.kernels == (
        2,
        2,
    )
    # executor [1500, 6000) ∪ [2500, 3500) ∪ done [6000, 6500) = 5,000
    assert cols.executor_ns == (
        5_000,
        5_000,
    )
    assert cols.function_call_ns == (
        0,
        0,
    ) and cols.eager_ops == (
        0,
        0,
    )


def test_tf1_op_table_and_normalised_names(tmp_path):
    cap = xplane.parse(_tf1_capture(tmp_path), [5, 6])
    table = xplane.op_table(cap)
    assert table.source == "xplane" and table.steps == 2
    assert [(r.op, r.kernel, r.count, r.total_ns) for r in table.rows] == [
        ("add", "_MklNativeFusedMatMul", 2, 4_000),
        ("grad/Pow", "Pow", 2, 4_000),
    ]
    assert table.rows[0].share == 0.5 and table.kernel_ns_per_step == 4_000
    kernels = [e for e in cap.events if e.kind == "kernel"]
    assert {e.name for e in kernels} == {"FusedMatMul", "Pow"}
    assert {e.track for e in cap.events} == {"python", "compute/0", "compute/1"}


def test_spans_are_shifted_onto_our_clock_and_bounded(tmp_path):
    cap = xplane.parse(_tf1_capture(tmp_path), [5, 6])
    # Our boundaries (true offset 50,000): markers entered 300 and 100 ns after a step began,
    # left 100 and 50 ns before it ended. The offset is known to within 150 ns.
    offset, uncertainty = xplane.clock_offset(cap, {5: (50_700, 61_100), 6: (69_900, 80_050)})
    assert offset == 49_900 and uncertainty == 150
    spans = xplane.spans(cap, offset)
    steps = [s for s in spans if s.name == "step"]
    assert [(s.step, s.start_ns, s.dur_ns, s.track) for s in steps] == [
        (5, 50_900, 10_000, "tf/python"),
        (6, 69_900, 10_000, "tf/python"),
    ]
    kinds = {(s.name, s.category) for s in spans}
    assert ("run_call", "dispatch") in kinds and ("Pow", "compute") in kinds
    assert len(xplane.spans(cap, offset, max_spans=7)) == 7  # step 5 whole, step 6 left out


def test_eager_ops_and_function_calls_are_classified(tmp_path):
    b = _Builder()
    py = b.line("python")
    c0 = b.line("tf_Compute/1")
    b.event(py, "train", 0, 10_000, step_num=0, _r=1)
    b.event(py, "EagerExecute", 100, 900, eager_op="MatMul", is_func=0)
    b.event(py, "KernelAndDeviceFunc::Run", 300, 400)
    b.event(py, "train_step", 2_000, 7_000, tf_function_call="notTraced-nonXla")
    b.event(py, "EagerExecute", 3_000, 5_000, eager_op="__inference_train_step_5", is_func=1)
    b.event(py, "KernelAndDeviceFunc::Run", 3_100, 4_800)  # the function's run: not a kernel
    b.event(c0, "sub:Sub", 4_000, 600, display="Sub")
    cap = xplane.parse(b.write(tmp_path / "e.xplane.pb"))
    cols = xplane.step_table(cap)
    assert cols.eager_ops == (1,) and cols.eager_op_ns == (900,)
    assert cols.function_call_ns == (7_000,) and cols.run_call_ns == (5_000,)
    assert cols.kernels == (2,) and cols.kernel_sum_ns == (1_000,)
    table = xplane.op_table(cap)
    assert {(r.op, r.kernel) for r in table.rows} == {("MatMul", "MatMul"), ("sub", "Sub")}


def test_kernel_names_lose_their_implementation_prefix():
    assert normalise_kernel("_MklNativeFusedMatMul") == "FusedMatMul"
    assert normalise_kernel("_MklMatMul") == "MatMul"
    assert normalise_kernel("Pow") == "Pow"
    assert normalise_kernel("_Mkl") == "_Mkl"


def test_union_of_intervals_by_hand():
    assert union_ns([(0, 10), (5, 15), (20, 25)]) == 20
    assert union_ns([(0, 10), (2, 3)]) == 10
    assert union_ns([]) == 0
    assert union_ns([(5, 5), (7, 6)]) == 0


@given(st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 500)), max_size=30))
def test_union_is_order_free_and_between_longest_and_sum(pairs):
    intervals = [(s, s + d) for s, d in pairs]
    u = union_ns(intervals)
    assert u == union_ns(list(reversed(intervals)))
    assert max((d for _s, d in pairs), default=0) <= u <= sum(d for _s, d in pairs)


# --- broken files ------------------------------------------------------------------------------


def _message(path: Path) -> str:
    with pytest.raises(XPlaneError) as info:
        xplane.parse(path)
    message = str(info.value)
    assert message.startswith(str(path)), message
    assert "\n" not in message
    return message


def test_truncated_capture_names_the_file(tmp_path):
    good = _tf1_capture(tmp_path).read_bytes()
    cut = tmp_path / "cut.xplane.pb"
    cut.write_bytes(good[: len(good) // 2 + 3])
    message = _message(cut)
    assert "corrupt or truncated" in message or "step marker" in message


def test_garbage_empty_missing_and_foreign_files_name_the_file(tmp_path):
    garbage = tmp_path / "garbage.xplane.pb"
    garbage.write_bytes(b"\xff\xff\xff\xff not a protobuf")
    assert "corrupt or truncated" in _message(garbage)
    empty = tmp_path / "empty.xplane.pb"
    empty.write_bytes(b"")
    assert "empty" in _message(empty)
    assert "cannot read" in _message(tmp_path / "absent.xplane.pb")
    b = _Builder()
    b.space.planes[0].name = "/device:GPU:0"
    assert "no /host:CPU plane" in _message(b.write(tmp_path / "gpu.xplane.pb"))
    b = _Builder()
    b.event(b.line("python"), "SessionRun", 0, 10)
    assert "no 'train' step marker" in _message(b.write(tmp_path / "nomarks.xplane.pb"))


def test_kernels_on_tf_datas_threads_are_rows_of_their_own_marked_input_thread(tmp_path):
    # A Keras PyDataset's __getitem__ runs as a PyFunc on tf.data's thread, beside the step: it
    # is not the step's kernel time (it was "compute-bound ... PyFunc 40%").
    b = _Builder()
    py = b.line("python")
    c0 = b.line("tf_Compute/1")
    data = b.line("tf_data_private_threadpool/7")
    b.event(py, "train", 0, 10_000, step_num=0, _r=1)
    b.event(c0, "conv:Conv2D", 1_000, 4_000, display="Conv2D")
    b.event(data, "PyFunc:PyFunc", 500, 6_000, display="PyFunc")
    b.event(c0, "call:PyFunc", 6_000, 1_000, display="PyFunc")
    cap = xplane.parse(b.write(tmp_path / "d.xplane.pb"))
    rows = {(r.kernel, r.input_thread): r.total_ns for r in xplane.op_table(cap).rows}
    assert rows == {("PyFunc", True): 6_000, ("Conv2D", False): 4_000, ("PyFunc", False): 1_000}
    (med,) = [xplane.medians(xplane.step_table(cap))]
    assert med.compute_union_ns == 5_000 and med.data_op_ns == 6_000
