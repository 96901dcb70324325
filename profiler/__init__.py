"""A profiling and tracing toolkit for training loops (numpy and TensorFlow).

``python -m profiler --help`` for the command line. This package imports nothing heavy at
import time; TensorFlow is imported only inside the workload processes that need it.
"""

__version__ = "0.1.0"
