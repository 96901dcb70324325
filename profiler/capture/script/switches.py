"""Debugging switches a script leaves on that can only be read from its own thread.

Place in the pipeline: the script process. ``tf.debugging.enable_check_numerics()`` keeps its
callback among the eager context's op callbacks, which are thread-local: the step driver reads
it when the first step begins, on the script's thread (the schedule describes the steps from a
thread of its own, where it always read "off").
"""

from __future__ import annotations

import sys


def check_numerics() -> bool | None:
    """Whether ``tf.debugging.enable_check_numerics()`` is on in this thread (its callback
    among the eager context's op callbacks, thread-local); None: no TensorFlow, or a
    TensorFlow without them."""
    if "tensorflow" not in sys.modules:
        return None
    try:
        from tensorflow.python.eager import context

        callbacks = context.context().op_callbacks
    except Exception:  # a TensorFlow without op callbacks
        return None
    return any(
        type(getattr(c, "__self__", None)).__name__ == "CheckNumericsCallback" for c in callbacks
    )
