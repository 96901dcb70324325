"""The numpy BLAS what-if: numpy's BLAS on one thread in the variant's blocks, its own thread
count after each.

Place in the pipeline: the script process, one of ``profiler.capture.whatifs``'s builders for a
script without TensorFlow. ``threadpoolctl`` sets the BLAS library numpy loaded (OpenBLAS,
MKL, BLIS) to one thread and back, between steps, in the script's thread.

Why: numpy's OpenBLAS starts a thread per core. On a machine where other processes keep the
cores busy, its threads wait for each other at every call: a numpy L-layer net's step took
10.7 ms quiet with its two threads and 14.5 ms on one; beside one busy process, 20-133 ms with
two and 25-31 ms on one (measured without the profiler, ``OPENBLAS_NUM_THREADS``). Whether one
thread is faster depends on the load beside the script: the what-if measures it on this run,
and its title says so.
"""

from __future__ import annotations

import sys
from typing import Any

from profiler.capture.variant import Variant, error_line
from profiler.capture.whatifs_numpy import MIN_ELEMENTS, slots

NUMPY_BLAS_ONE = "numpy_blas_one_thread"

TITLE = (
    "numpy's BLAS on one thread (threadpoolctl.threadpool_limits(1, 'blas'), or "
    "OPENBLAS_NUM_THREADS=1 before numpy is imported; a gain or loss that depends on what else "
    "runs on the machine's cores)"
)
RESULTS_NOTE = "the same arithmetic: BLAS's threads change only the order of its sums (rounding)"


def numpy_blas_one_thread() -> Variant | str:
    """The variant, or why it does not apply (no numpy, TensorFlow's own threads, a BLAS
    already on one thread, no ``threadpoolctl``)."""
    if "tensorflow" in sys.modules:
        return "the script uses TensorFlow: its kernels run on TensorFlow's own threads"
    if "numpy" not in sys.modules:
        return "the script does not use numpy"
    import numpy as np

    arrays = {id(a): a for s in slots() if isinstance(a := s.get(), np.ndarray)}
    total = sum(int(a.size) for a in arrays.values() if a.dtype.kind in "fc")
    if total < MIN_ELEMENTS:
        return (
            f"the script's float arrays hold {total:,} elements in all (fewer than "
            f"{MIN_ELEMENTS:,}: BLAS runs calls that small on one thread)"
        )
    try:
        import threadpoolctl
    except ImportError:
        return "threadpoolctl is not installed (it sets BLAS's threads at run time)"
    controller = threadpoolctl.ThreadpoolController()
    blas = controller.select(user_api="blas")
    if not blas.lib_controllers:
        return "numpy's BLAS library was not found (threadpoolctl)"
    threads = max(int(c.num_threads) for c in blas.lib_controllers)
    if threads <= 1:
        return "numpy's BLAS already runs on one thread"
    held: list[Any] = []

    def on() -> None:
        if variant.errors or held:
            return
        try:
            held.append(blas.limit(limits=1))
        except Exception as exc:  # the library refused: the step runs as written
            variant.errors.append(error_line(exc))

    def off() -> None:
        while held:
            try:
                held.pop().restore_original_limits()
            except Exception as exc:
                variant.errors.append(error_line(exc))

    # Threads waiting for a core make some steps several times longer, not every step a little:
    # a softmax classifier's 5,000 full-batch steps beside a busy process held 84% of their
    # time in steps over 3x the median, and the blocks' median steps read no gain where one
    # thread halved the loop (measured without the profiler). Each block is its mean step.
    variant = Variant(NUMPY_BLAS_ONE, TITLE, (), True, RESULTS_NOTE, on, off, block_mean=True)
    variant.check = (
        f"numpy's BLAS ({', '.join(sorted({c.internal_api for c in blas.lib_controllers}))}) "
        f"ran {threads} threads as written, one in the variant's blocks"
    )
    return variant
