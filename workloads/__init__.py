"""The workload registry: every training loop the toolkit profiles, by name.

Each module defines ``WORKLOAD`` (a ``WorkloadSpec``) and imports heavy frameworks only inside
its ``build``; importing this package is cheap.
"""

from __future__ import annotations

import importlib

from profiler.workloads.base import Params, Registry, WorkloadError, WorkloadSpec, load_ref

#: Module names in suite order (seed 000 first, then seed 004), then the non-suite variants.
MODULES: tuple[str, ...] = (
    "numpy_gd",
    "tf1_gd",
    "tf1_gd_f32feed",
    "tf1_gd_nofeed",
    "tf1_gd_trainonly",
    "tf1_gd_whileloop",
    "tf2_eager_gd",
    "tf2_function_step",
    "tf2_function_loop",
    "adam_handwritten",
    "keras_adam",
    "adam_minibatch",
    # Not in the default suite (default_suite=False): seed 004's cause-isolation variants, run
    # by the efficiency process (profiler.capture.efficiency).
    "adam_freshbatch",
    "adam_globalstep",
    "adam_meanbatch",
    "keras_adam_zeroinit",
)

REGISTRY = Registry()
for _name in MODULES:
    REGISTRY.add(importlib.import_module(f"profiler.workloads.{_name}").WORKLOAD)


def get(name: str) -> WorkloadSpec:
    """The spec registered as ``name`` (``workloads.`` prefix allowed); KeyError if none."""
    return REGISTRY.get(name)


def resolve(target: str) -> WorkloadSpec:
    """A registered name, or ``package.module[:ATTRIBUTE]`` defining a ``WorkloadSpec``.

    Raises:
        LookupError: nothing by that name (the message lists the registered names).
    """
    try:
        return REGISTRY.get(target)
    except KeyError:
        pass
    module = target.partition(":")[0]
    if module.replace(".", "").replace("_", "").isalnum() and not module.startswith("workloads."):
        try:
            return load_ref(target)
        except (ImportError, LookupError):
            pass
    raise LookupError(f"unknown workload {target!r}; registered: {', '.join(names())}")


def names() -> list[str]:
    return REGISTRY.names()


def default_suite() -> list[str]:
    return [s.name for s in REGISTRY.specs.values() if s.default_suite]


__all__ = [
    "REGISTRY",
    "Params",
    "WorkloadError",
    "WorkloadSpec",
    "default_suite",
    "get",
    "names",
    "resolve",
]
