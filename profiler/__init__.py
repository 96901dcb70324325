"""A profiling and tracing toolkit for training loops (numpy and TensorFlow).

``python -m profiler --help`` for the command line. This package imports nothing heavy at
import time; TensorFlow is imported only inside the workload processes that need it.

In your own script, ``profiler.step`` and ``profiler.metric`` (``profiler.markers``) name its
steps and record metrics when it runs under ``python -m profiler run script.py``, and cost
next to nothing when it does not.

In your own process, ``with profiler.profile():`` profiles the loop inside the block
(``profiler.live``); ``profiler.keras.ProfileCallback`` profiles a ``fit``; in IPython,
``%load_ext profiler`` gives ``%%profile_loop`` and ``%profile_run`` (``profiler.ipython``).
"""

from typing import Any

from profiler.live import profile
from profiler.markers import metric, step
from profiler.version import __version__

__all__ = ["__version__", "load_ipython_extension", "metric", "profile", "step"]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext profiler``: the ``%%profile_loop`` and ``%profile_run`` magics."""
    from profiler import ipython as magics

    magics.load(ipython)
