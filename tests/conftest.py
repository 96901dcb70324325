"""Shared fixtures: the repository root as working directory, and output folders."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# An error in a finding's analysis fails the test (users get the rest of the answer).
os.environ["PROFILER_STRICT"] = "1"
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
        experiment_overrides={"blocks": 4, "block_s": 0.05, "pair_max_s": 0.3},
        efficiency_overrides={
            "seeds": [0],
            "budgets": {"numpy": 20_800, "keras": 12_480, "keras_adam_zeroinit": 12_480},
        },
    )
    return pipeline.execute(opts)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """``make realworld``: the corpus table (case, truth, verdict, right or wrong) at the end."""
    import sys

    module = sys.modules.get("tests.test_corpus_truths")
    rows = getattr(module, "ROWS", None)
    if not rows:
        return
    tr = terminalreporter
    tr.section("corpus: each verdict against its truth, measured without the profiler")
    for r in rows:
        tr.write_line(f"{'right' if r.right else 'WRONG'}  {r.case}")
        tr.write_line(f"    truth:   {r.truth}")
        tr.write_line(f"    verdict: {r.verdict or '(none)'}")
        if r.why:
            tr.write_line(f"    wrong:   {r.why}")
    tr.write_line(f"{sum(r.right for r in rows)} of {len(rows)} right")


# --- `make test`'s two workers (pytest-xdist, --dist loadfile) -----------------------------------
# A unit of work goes whole to one worker: a module (its module fixtures are built once), all the
# modules reading tests.tf_capture's shared run (made once per process), or, in the modules of
# ONE_BY_ONE, each test. The units are handed out longest first, so that the two workers finish
# together on short ones rather than one of them starting a long module at the end. (xdist's
# loadgroup cannot do this under pytest 9: the group it appends to a test's id is not sent.)

#: Modules whose tests each profile a script of their own and share nothing: a unit a test.
ONE_BY_ONE = frozenset({"test_whatif.py"})
#: Seconds a unit took, for the order only (this machine, -n 2, load 2-3: the 10 modules of issue
#: 27 measured, the rest from its list); a unit not named is estimated from its marks.
UNIT_SECONDS = {
    "test_job.py": 140,
    "test_default_run.py": 100,
    "test_suite_run.py": 80,
    "test_memory_corpus.py": 65,
    "test_install.py": 50,
    "test_script_fit.py": 47,
    "test_auto_step.py": 37,
    "tf_capture": 30,
    "test_quiet.py": 27,
}


@functools.cache
def _reads_tf_capture(path: str) -> bool:
    try:
        text = (REPO / path).read_text()
    except OSError:
        return False
    return "from tests.tf_capture import" in text or "from tests import tf_capture" in text


def _unit(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    if path.rsplit("/", 1)[-1] in ONE_BY_ONE:
        return nodeid
    return "tf_capture" if _reads_tf_capture(path) else path


def _estimate(item: pytest.Item) -> float:
    marks = {m.name for m in item.iter_markers()}
    if "slow" in marks:
        return 20.0 if "tf" in marks else 8.0
    return 5.0 if "tf" in marks else 0.3


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In an xdist worker, the units longest first (the scheduler hands them out in this
    order); a plain run keeps the collection's order."""
    if not hasattr(config, "workerinput"):
        return
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        units.setdefault(_unit(item.nodeid), []).append(item)
    cost = {
        u: UNIT_SECONDS.get(u.rsplit("/", 1)[-1]) or sum(map(_estimate, unit))
        for u, unit in units.items()
    }
    items[:] = [i for u in sorted(units, key=lambda u: -cost[u]) for i in units[u]]


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # type: ignore[no-untyped-def]
    """--dist loadfile with ``_unit``'s units, in the workers' order (longest first)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Units(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    config.option.loadscopereorder = False  # the workers' order, not the units' test counts
    return Units(config, log)
