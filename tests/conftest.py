"""Shared fixtures: the repository root as working directory, and output folders."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
#: Artefacts tests keep for a human to look at (screenshots, reports), git-ignored.
TESTS_OUTPUT = REPO / "tests-output"


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch: pytest.MonkeyPatch) -> None:
    # Workload processes import test workloads (tests.fake_workloads) relative to the cwd.
    monkeypatch.chdir(REPO)


@pytest.fixture(scope="session")
def keep_dir() -> Path:
    TESTS_OUTPUT.mkdir(exist_ok=True)
    return TESTS_OUTPUT


def python_env() -> dict[str, str]:
    """Environment for CLI subprocesses: the repo on the path, TensorFlow quiet."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


#: numpy, TF1 and TF2 workloads, one seed pair (experiments), the size sweep's two, and an
#: implementation of the efficiency study: every chart of the report. (Keras fit end to end:
#: tests/test_script_fit.py, tests/test_live.py; every workload: the recorded run.)
LIVE_SUITE = (
    "numpy_gd",
    "tf1_gd",
    "tf1_gd_f32feed",
    "tf2_function_step",
    "adam_minibatch",
)


@pytest.fixture(scope="session")
def suite_run(tmp_path_factory: pytest.TempPathFactory):
    """A run of every kind of workload of the default suite (``LIVE_SUITE``), every phase,
    experiments and efficiency, on short budgets.

    One real run shared by the tests that check a run end to end (every workload and phase
    ran, the report in a browser); the whole suite's analysis is checked on the recorded run
    (``tests.recorded``), and ``make profile`` / ``make soak`` run it whole. About a minute on
    2 cores.
    """
    from profiler import workloads
    from profiler.capture.phases import registry
    from profiler.processes import pipeline
    from profiler.processes.runner import RunOptions

    specs = [workloads.get(n) for n in LIVE_SUITE]
    out = tmp_path_factory.mktemp("suite") / "runs"
    opts = RunOptions(
        workloads=specs,
        params={s.name: s.defaults.with_(steps=max(s.defaults.steps // 4, 50)) for s in specs},
        phases=list(registry.DEFAULT_PHASES),
        out_root=out,
        timeout_s=300,
        progress=False,
        options={"time_scale": 0.2},
        experiments=True,
        sweep_sizes=[10, 1_000, 10_000],
        experiment_overrides={"blocks": 4, "block_s": 0.05},
        efficiency_overrides={
            "seeds": [0],
            "budgets": {"numpy": 20_800, "keras": 12_480, "keras_adam_zeroinit": 12_480},
        },
    )
    return pipeline.execute(opts)
