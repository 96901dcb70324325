"""The registered suite: its members and order, and every new workload trains."""

from __future__ import annotations

import math
import subprocess
import sys
import time

import pytest

from profiler import workloads
from profiler.workloads import get
from tests.conftest import python_env

SUITE = [
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
]
NEW = SUITE[2:]


def test_default_suite_is_the_twelve_in_order():
    assert workloads.default_suite() == SUITE


def test_listing_imports_neither_tensorflow_nor_numpy():
    code = (
        "import sys, workloads; "
        "print(sorted(m for m in ('tensorflow', 'numpy', 'keras') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=python_env(), capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


#: Variants and the baseline whose one difference their docstring names.
VARIANT_OF = {
    "tf1_gd_f32feed": "tf1_gd",
    "tf1_gd_nofeed": "tf1_gd",
    "tf1_gd_trainonly": "tf1_gd",
    "tf1_gd_whileloop": "tf1_gd",
    "tf2_function_step": "tf2_eager_gd",
    "tf2_function_loop": "tf2_function_step",
    "adam_minibatch": "keras_adam",
}


@pytest.mark.parametrize("name", NEW)
def test_docstring_names_the_seed_and_a_variant_its_one_difference(name):
    spec = get(name)
    assert spec.seed == ("004" if name in SUITE[-3:] else "000")
    assert spec.doc.startswith(f"Seed {spec.seed}")
    if name in VARIANT_OF:
        assert f"Variant of ``{VARIANT_OF[name]}``" in spec.doc
        assert spec.doc.count("The one difference") == 1


@pytest.mark.tf
@pytest.mark.parametrize("name", NEW)
def test_builds_and_trains(name):
    spec = get(name)
    loop = spec.build(spec.defaults)
    work = loop.work
    assert work.flops_per_step > 0 and work.bytes_per_step > 0
    assert work.units_per_step == spec.defaults.k
    start = loop.loss()
    # A few timed units; the Keras loop runs one whole epoch.
    units = {"adam_handwritten": 320, "adam_minibatch": 130}.get(name, 5)
    marks = [time.perf_counter_ns()]
    loop.run(units, marks, time.perf_counter_ns)
    assert len(marks) - 1 == loop.steps_done >= units
    end = loop.loss()
    assert math.isfinite(end) and end < start
    assert set(loop.params()) == ({"w", "b"} if spec.seed == "004" else {"W", "b"})
    loop.close()
