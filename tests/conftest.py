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
