"""TensorBoard event-file records, encoded here: no TensorBoard, no TensorFlow, no protobuf.

Place in the pipeline: the format edge of ``profiler.reports.tensorboard`` (formatting only). An
event file is a TFRecord file of serialised ``tensorboard.Event`` protobufs. The scalars need
four of its fields, encoded by hand in protobuf's wire format
(https://protobuf.dev/programming-guides/encoding/), each record framed by its length and the
masked CRC-32C checksums of TFRecord
(https://www.tensorflow.org/tutorials/load_data/tfrecord#tfrecords_format_details).

Why by hand: TensorFlow is optional (a numpy-only environment has none), and TensorFlow 2.21 no
longer installs TensorBoard, so neither ``tf.summary`` nor TensorBoard's own ``RecordWriter``
can be relied on; the run's TensorBoard logdir is written all the same. The bytes are the ones
TensorBoard's protos and ``RecordWriter`` produce (``tests/test_event_file.py`` compares them).

The messages, with their field numbers (``tensorboard/compat/proto/event.proto``,
``summary.proto``)::

    Event   { double wall_time = 1; int64 step = 2; string file_version = 3 (oneof);
              Summary summary = 5 (oneof); SourceMetadata source_metadata = 10; }
    Summary { repeated Value value = 1; }
    Value   { string tag = 1; float simple_value = 2 (oneof); }
    SourceMetadata { string writer = 1; }

Fields are written in field-number order, as protobuf serialises them; plain proto3 fields at
their default (a 0 step, an empty tag) are left out, fields of a oneof never are.
"""

from __future__ import annotations

import math
import struct

#: Wire types.
_I64, _LEN, _VARINT, _I32 = 1, 2, 0, 5
#: CRC-32C (Castagnoli), reflected polynomial.
_POLY = 0x82F63B78
_MASK_DELTA = 0xA282EAD8
_U32 = 0xFFFFFFFF
_FLOAT32_MAX = 3.4028234663852886e38


def _crc_table() -> tuple[int, ...]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table.append(c)
    return tuple(table)


_TABLE = _crc_table()


def crc32c(data: bytes) -> int:
    """The CRC-32C checksum of ``data``."""
    crc, table = _U32, _TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ _U32


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC-32C: rotated right by 15 bits, plus a constant."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & _U32


def record(data: bytes) -> bytes:
    """One TFRecord: the length (uint64), its masked CRC, the data, the data's masked CRC."""
    header = struct.pack("<Q", len(data))
    return (
        header
        + struct.pack("<I", masked_crc32c(header))
        + data
        + struct.pack("<I", masked_crc32c(data))
    )


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # a negative int64 is its 64-bit two's complement (10 bytes)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _bytes_field(field: int, data: bytes) -> bytes:
    return _key(field, _LEN) + _varint(len(data)) + data


def _float32(value: float) -> bytes:
    # Beyond float32's range protobuf stores an infinity; struct would raise.
    if not math.isnan(value) and abs(value) > _FLOAT32_MAX:
        value = math.copysign(math.inf, value)
    return struct.pack("<f", value)


def _event(wall_time: float, step: int, rest: bytes) -> bytes:
    head = b""
    if wall_time != 0.0:
        head += _key(1, _I64) + struct.pack("<d", wall_time)
    if step != 0:
        head += _key(2, _VARINT) + _varint(step)
    return head + rest


def header_event(wall_time: float, file_version: str, writer: str) -> bytes:
    """The serialised first ``Event`` of a file: its format version and the writer's name."""
    source = _bytes_field(1, writer.encode()) if writer else b""
    rest = _bytes_field(3, file_version.encode()) + _bytes_field(10, source)
    return _event(wall_time, 0, rest)


def scalar_event(wall_time: float, step: int, tag: str, value: float) -> bytes:
    """The serialised ``Event`` of one scalar point (a ``Summary`` with one ``simple_value``)."""
    value_msg = (_bytes_field(1, tag.encode()) if tag else b"") + _key(2, _I32) + _float32(value)
    summary = _bytes_field(1, value_msg)
    return _event(wall_time, step, _bytes_field(5, summary))
