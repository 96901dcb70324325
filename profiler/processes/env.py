"""The environment that affects performance, and nothing else.

Place in the pipeline: read once by the runner, written into ``summary.json`` and shown in the
report. Only what is listed here leaves the machine: package versions, the Python version, the
CPU model and count, and the values of an explicit allow-list of thread-count and BLAS
variables. No other environment variable, path, user or host name is ever recorded.
"""

from __future__ import annotations

import os
import platform
from importlib import metadata
from typing import Any

#: Variables that change how many threads numerical libraries use, or which kernels they pick.
ALLOWED_VARIABLES: tuple[str, ...] = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
    "TF_ENABLE_ONEDNN_OPTS",
    "TF_CPP_MIN_LOG_LEVEL",
    "KMP_BLOCKTIME",
    "KMP_AFFINITY",
)

#: Distributions whose versions are recorded (first installed name wins for each key).
PACKAGES: dict[str, tuple[str, ...]] = {
    "numpy": ("numpy",),
    "tensorflow": ("tensorflow-cpu", "tensorflow", "tensorflow-intel"),
    "keras": ("keras",),
    "tensorboard": ("tensorboard",),
    "tensorboard-plugin-profile": ("tensorboard-plugin-profile", "xprof"),
    "py-spy": ("py-spy",),
    "line_profiler": ("line_profiler", "line-profiler"),
}


def _version(names: tuple[str, ...]) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def capture(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """The environment record for ``summary.json``."""
    env = os.environ if environ is None else environ
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = os.cpu_count() or 0
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "system": platform.system(),
        "machine": platform.machine(),
        "cpu": {"model": cpu_model(), "count": os.cpu_count() or 0, "usable": affinity},
        "packages": {key: _version(names) for key, names in PACKAGES.items()},
        "variables": {k: env[k] for k in ALLOWED_VARIABLES if k in env},
    }
