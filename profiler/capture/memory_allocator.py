"""TensorFlow's own allocator figures over a script's steps, read from the memory thread.

Place in the pipeline: inside the script process, called by ``profiler.capture.memory``'s
sampling thread every ``memory_causes.EVERY_S`` and once at the end. Each read asks
``tf.config.experimental.get_memory_info`` for every device TensorFlow set up: the bytes its
allocator has handed out now (``current``) and the most it ever had (``peak``).

What is available (measured here, TensorFlow 2.21 CPU): on ``CPU:0`` both figures, counting
eager tensors, variables and a TF1 session's buffers (a 4 MB tensor reads as 4,000,000
bytes), ~1.2 µs a read; on CPU only buffers of 256 KB and more are counted (a 128 KB tensor
reads as 0 bytes, a 256 KB one as 262,144: smaller ones come from another allocator).
TensorFlow's documentation says only GPU and TPU answer; a version
whose CPU device raises is recorded with its reason, not as zero. A GPU adds its own devices
(``GPU:0`` ...): the bytes TensorFlow uses there, which resident memory never shows.

A read never starts TensorFlow's eager context: a script that sets its devices or threads
after importing TensorFlow would fail if the profiler started it first. Until the script
starts it, nothing is read and the record says why.
"""

from __future__ import annotations

import sys
from typing import Any

#: Reads kept per device: beyond this, every other one is dropped (the span stays covered).
MAX_POINTS = 256

NOT_STARTED = (
    "TensorFlow's context was never started by the script (the profiler does not start it)"
)
NO_TENSORFLOW = "the script did not import TensorFlow"


def imported(name: str) -> Any:
    """The module ``name`` once its import has finished, else None: this thread must never
    import a module, nor read one the script's thread is still importing (a circular import
    the script would see)."""
    mod = sys.modules.get(name)
    if mod is None or getattr(getattr(mod, "__spec__", None), "_initializing", False):
        return None
    return mod


def _context_started() -> bool:
    ctx_mod = imported("tensorflow.python.eager.context")
    handle = getattr(ctx_mod, "_context", None) if ctx_mod is not None else None
    return bool(getattr(handle, "_initialized", False))


class AllocatorProbe:
    """Reads every device's allocator figures; ``read`` is called from the sampling thread."""

    def __init__(self) -> None:
        self.devices: list[str] | None = None
        #: device -> [(time ns, steps done, current bytes, peak bytes)]
        self.points: dict[str, list[tuple[int, int, int, int]]] = {}
        self.errors: dict[str, str] = {}
        self.reads = 0
        self._every = 1
        self._seen = 0

    def _devices(self, tf: Any) -> list[str]:
        names = ["CPU:0"]
        try:
            for d in tf.config.list_logical_devices("GPU"):
                names.append(d.name.split("device:")[-1])
        except Exception:  # a device list that cannot be read: the CPU alone
            pass
        return names

    def read(self, t_ns: int, step: int) -> None:
        """One read of every device (never raises; a device that cannot answer says why)."""
        tf = imported("tensorflow")
        if tf is None or not _context_started():
            return
        try:
            if self.devices is None:
                self.devices = self._devices(tf)
            info = tf.config.experimental.get_memory_info
        except Exception as exc:
            self.errors.setdefault("*", f"{type(exc).__name__}: {exc}"[:200])
            return
        self._seen += 1
        keep = self._seen % self._every == 0
        for name in self.devices:
            if name in self.errors:
                continue
            try:
                got = info(name)
                point = (t_ns, step, int(got["current"]), int(got["peak"]))
            except Exception as exc:
                self.errors[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"[:200]
                continue
            series = self.points.setdefault(name, [])
            if keep or not series:
                series.append(point)
            else:
                series[-1] = point  # the newest always kept
        self.reads += 1
        if any(len(s) > MAX_POINTS for s in self.points.values()):
            self.points = {k: s[::2] for k, s in self.points.items()}
            self._every *= 2

    def record(self) -> dict[str, Any]:
        """The memory record's ``allocator`` (``profiler.analysis.memory.allocator_of``)."""
        why = ""
        if not self.points and not self.errors:
            why = NO_TENSORFLOW if "tensorflow" not in sys.modules else NOT_STARTED
        return {
            "reads": self.reads,
            "why": why,
            "errors": dict(self.errors),
            "devices": {
                name: {
                    "t_ns": [p[0] for p in s],
                    "steps": [p[1] for p in s],
                    "current_bytes": [p[2] for p in s],
                    "peak_bytes": max(p[3] for p in s),
                }
                for name, s in self.points.items()
                if s
            },
        }
