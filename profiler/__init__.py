"""A profiling and tracing toolkit for training loops (numpy and TensorFlow).

``python -m profiler --help`` for the command line. This package imports nothing heavy at
import time; TensorFlow is imported only inside the workload processes that need it.

In your own script, ``profiler.step`` and ``profiler.metric`` (``profiler.markers``) name its
steps and record metrics when it runs under ``python -m profiler run script.py``, and cost
next to nothing when it does not.
"""

from profiler.markers import metric, step

__version__ = "0.1.0"

__all__ = ["__version__", "metric", "step"]
