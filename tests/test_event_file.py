"""TensorBoard event files encoded without TensorBoard: the very bytes TensorBoard writes."""

from __future__ import annotations

import io
import math
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from profiler.reports import event_file
from tests.conftest import REPO, python_env


def _tensorboard_bytes(now: float, points: list[tuple[str, int, float, float]]) -> bytes:
    """What TensorBoard's own protos and RecordWriter write for the same events."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.record_writer import RecordWriter

    buf = io.BytesIO()
    writer = RecordWriter(buf)
    header = event_pb2.Event(wall_time=now, file_version="brain.Event:2")
    header.source_metadata.writer = "training-loop-profiler"
    writer.write(header.SerializeToString())
    for tag, step, value, wall in points:
        v = summary_pb2.Summary.Value(tag=tag, simple_value=value)
        event = event_pb2.Event(wall_time=wall, step=step, summary=summary_pb2.Summary(value=[v]))
        writer.write(event.SerializeToString())
    return buf.getvalue()


def _ours(now: float, points: list[tuple[str, int, float, float]]) -> bytes:
    out = [
        event_file.record(event_file.header_event(now, "brain.Event:2", "training-loop-profiler"))
    ]
    for tag, step, value, wall in points:
        out.append(event_file.record(event_file.scalar_event(wall, step, tag, value)))
    return b"".join(out)


def test_crc32c_of_the_standard_check_string() -> None:
    # CRC-32C's check value (RFC 3720, B.4: "123456789" -> 0xE3069283).
    assert event_file.crc32c(b"123456789") == 0xE3069283
    assert event_file.crc32c(b"") == 0


def test_edge_values_encode_as_tensorboard_encodes_them() -> None:
    points = [
        ("loss/by_step", 0, 0.0, 0.0),  # defaults: no step, no wall time written
        ("µs/é", 2**40, -1.5, 1.7e9),  # UTF-8 tag, a 6-byte varint
        ("negative", -3, 2.5, 12.5),  # a 10-byte two's-complement varint
        ("", 1, math.inf, 3.0),  # an empty tag is left out
        ("nan", 7, math.nan, 4.0),
        ("too big for float32", 5, 1e39, 1.0),  # stored as an infinity
        ("tiny", 9, 1e-40, 2.0),  # a float32 subnormal
        ("x" * 300, 11, 3.25, 5.0),  # a two-byte length
    ]
    assert _ours(1796176982.25, points) == _tensorboard_bytes(1796176982.25, points)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text(max_size=40),
            st.integers(min_value=-(2**63), max_value=2**63 - 1),
            st.floats(width=32, allow_nan=False),
            st.floats(min_value=0, max_value=4e9),
        ),
        max_size=20,
    ),
    st.floats(min_value=0, max_value=4e9),
)
def test_any_scalars_encode_as_tensorboard_encodes_them(
    points: list[tuple[str, int, float, float]], now: float
) -> None:
    assert _ours(now, points) == _tensorboard_bytes(now, points)


def test_the_scalars_are_written_where_tensorboard_and_tensorflow_are_not_installed(
    tmp_path: Path,
) -> None:
    # A numpy-only environment: neither can be imported in the writing process.
    code = (
        "import sys\n"
        "class Absent:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('tensorboard', 'tensorflow'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Absent())\n"
        "from pathlib import Path\n"
        "from profiler.reports import tensorboard\n"
        "from tests.test_tensorboard import _trace\n"
        f"tensorboard.write(Path({str(tmp_path)!r}), _trace(), now=1796176982.0)\n"
        "print('ok')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
    from profiler.reports import tensorboard

    (path,) = tmp_path.glob("events.out.tfevents.*")
    # Read back with TensorBoard's own protos.
    assert ("step_time_us", 3, 3.0) in {
        (p["tag"], p["step"], p["value"]) for p in tensorboard.read(path)
    }
