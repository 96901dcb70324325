"""The toolkit installed into a user's own environment: their TensorFlow stays theirs.

A fresh virtual environment gets TensorFlow 2.20 (not the 2.21 the project develops against),
then this package by a plain ``pip install <repo>`` (no extras, not editable): pip must leave the
2.20 in place. A small TF2 ``tf.function`` script is then profiled with no options and the
network off (``unshare -n``, loopback only, where this user may; otherwise the run has the
network and says so): every phase that applies is measured, or steps aside with a note naming
the TensorFlow version, the terminal shows no traceback, and the report's charts render in
headless Chromium from the file alone. A second environment, without TensorFlow, profiles a
numpy script, its TensorBoard scalars included.

Speed: the environments are made with ``python -m venv --without-pip`` and filled by this
virtualenv's pip (``pip --python``): ``ensurepip`` alone took ~20 s here. Packages are installed
``--no-compile``: Python then compiles the modules a run imports, not TensorFlow's whole tree
(installing TensorFlow took 47 s so and 240 s compiled, on a loaded 2-core machine, with the
same first import). pip kept no download cache where this was written, so TensorFlow 2.20 and
its dependencies are downloaded once into a wheel folder (``PROFILER_TEST_WHEELS``, default
``~/.cache/training-loop-profiler/wheels``) and installed from it offline. Each test prints
the seconds of each stage. On 2 cores: TensorFlow's ~105 s (~60 s of them the profiled run,
~34 s of that TensorFlow's first import and the script's set-up), ~190 s beside other test
runs; numpy's ~27 s (~50 s).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import REPO

#: The user's TensorFlow: another minor version than the one pinned in the ``tf`` extra.
USER_TF = "2.20"
TF_REQUIREMENT = f"tensorflow-cpu=={USER_TF}.*"
WHEELS = Path(
    os.environ.get("PROFILER_TEST_WHEELS")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    / "training-loop-profiler"
    / "wheels"
)
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
TRACEBACK = "Traceback (most recent call last)"

#: ~12,000 steps of ~0.5-1 ms: every phase fits into one run of the script (a second run would
#: cost another TensorFlow start-up).
TF2_SCRIPT = '''\
"""A user's TF2 loop: linear regression, one tf.function step per iteration."""
import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
X = tf.constant(rng.normal(size=(256, 8)), dtype=tf.float32)
y = X @ tf.constant(rng.normal(size=(8, 1)), dtype=tf.float32)
w = tf.Variable(tf.zeros((8, 1)))
opt = tf.keras.optimizers.SGD(0.05)


@tf.function
def train_step(x, t):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(x @ w - t))
    opt.apply_gradients([(tape.gradient(loss, w), w)])
    return loss


for step in range(12_000):
    loss = train_step(X, y)
print("final loss", float(loss))
'''

NUMPY_SCRIPT = '''\
"""A user's numpy loop: linear regression by full-batch gradient descent."""
import numpy as np

rng = np.random.default_rng(0)
X = rng.normal(size=(512, 16))
y = X @ rng.normal(size=16)
w = np.zeros(16)
for step in range(40_000):
    err = X @ w - y
    w -= 0.05 * (X.T @ err) / len(y)
print("final loss", float(np.mean((X @ w - y) ** 2)))
'''


class Stages:
    """Wall seconds per stage of a test, printed at its end."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.t0 = time.perf_counter()

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = round(time.perf_counter() - t, 1)

    def report(self, test: str) -> str:
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in self.seconds.items())
        return f"{test}: {time.perf_counter() - self.t0:.1f} s in all ({parts})"


def _run(cmd: list[str], timeout: float, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, **kw
    )


def _ok(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, f"{proc.args}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


def _venv(path: Path) -> Path:
    """A fresh virtual environment without pip (this virtualenv's pip fills it)."""
    _ok(_run([sys.executable, "-m", "venv", "--without-pip", str(path)], 120))
    return path / "bin" / "python"


def _pip(python: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    proc = _run(
        [sys.executable, "-m", "pip", "--python", str(python), *args, "--no-compile"], timeout
    )
    _ok(proc)
    return proc


def _tf_wheels() -> Path:
    """The wheel folder holding TensorFlow 2.20 and its dependencies (downloaded the first
    time; pip's own cache is not there on every machine)."""
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    folder = WHEELS / f"tensorflow-cpu-{USER_TF}-{tag}"
    complete = folder / ".complete"
    if not complete.exists():
        folder.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "-q", "-d", str(folder), TF_REQUIREMENT]
        _ok(_run(cmd, 1800))
        complete.touch()
    return folder


def _version(python: Path, dist: str) -> str | None:
    code = (
        "import importlib.metadata as m, sys\n"
        "try:\n    print(m.version(sys.argv[1]))\n"
        "except m.PackageNotFoundError:\n    print('')"
    )
    proc = _run([str(python), "-c", code, dist], 60)
    _ok(proc)
    return proc.stdout.strip() or None


def _offline() -> tuple[list[str], str]:
    """The command prefix that runs a command with the network off (a network namespace of
    its own, loopback up), as ``profiler.processes.workers`` makes one; ``([], why)`` where
    this user may not."""
    try:
        probe = _run(["unshare", "-n", "--", "true"], 30)
    except OSError as exc:
        return [], f"unshare is not available ({exc})"
    if probe.returncode != 0:
        return [], f"unshare -n refused ({probe.stderr.strip()[-200:]})"
    script = 'ip link set lo up 2>/dev/null; exec "$@"'
    return ["unshare", "-n", "--", "sh", "-c", script, "sh"], ""


def _profile(python: Path, folder: Path, script: str, stages: Stages) -> tuple[Path, str]:
    """``python -m profiler run SCRIPT`` in ``folder`` with the network off: (run folder,
    terminal output)."""
    (folder / "train.py").write_text(script)
    prefix, why = _offline()
    if why:
        print(f"the profiled run has the network: {why}")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    with stages.stage("profile"):
        proc = _run(
            [*prefix, str(python), "-m", "profiler", "run", "train.py"], 900, cwd=folder, env=env
        )
    terminal = proc.stdout + proc.stderr
    assert proc.returncode == 0, terminal[-4000:]
    assert TRACEBACK not in terminal, terminal[-4000:]
    return (folder / "runs" / "latest").resolve(), terminal


def _charts(report: Path) -> tuple[int, list[str], list[str]]:
    """(charts rendered, console errors, URLs requested) of the report in headless Chromium."""
    from playwright.sync_api import sync_playwright

    from profiler.bench import CHROMIUM_ARGS

    assert shutil.which("chromium"), "Debian's chromium is missing: `make test` installs it"
    errors: list[str] = []
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(report.as_uri())
        page.wait_for_function(
            "document.body.getAttribute('data-charts-rendered') !== null", timeout=60_000
        )
        rendered = int(page.evaluate("document.body.getAttribute('data-charts-rendered')"))
        browser.close()
    return rendered, errors, requests


@pytest.fixture
def venv_dir(tmp_path: Path) -> Iterator[Path]:
    """Where the test's environment goes: removed after the test (~1 GB with TensorFlow; pytest
    keeps its last runs' folders), the run folder beside it kept."""
    path = tmp_path / "venv"
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.tf
@pytest.mark.browser
def test_a_users_tensorflow_2_20_is_kept_and_its_script_profiled_offline(
    tmp_path: Path, venv_dir: Path, record_property: Callable[[str, object], None]
) -> None:
    stages = Stages()
    with stages.stage("wheels"):
        wheels = _tf_wheels()
    with stages.stage("venv"):
        python = _venv(venv_dir)
    with stages.stage("install tensorflow"):
        _pip(python, "install", "-q", "--no-index", "--find-links", str(wheels), TF_REQUIREMENT)
    before = _version(python, "tensorflow-cpu")
    assert before is not None and before.startswith(f"{USER_TF}."), before
    with stages.stage("install profiler"):
        _pip(python, "install", "-q", str(REPO))
    # pip kept the user's TensorFlow: no second distribution written over it.
    assert _version(python, "tensorflow-cpu") == before
    assert _version(python, "tensorflow") is None
    assert _version(python, "training-loop-profiler") == "0.1.0"

    work = tmp_path / "work"
    work.mkdir()
    run_dir, _terminal = _profile(python, work, TF2_SCRIPT, stages)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["environment"]["packages"]["tensorflow"] == before
    (w,) = summary["workloads"]
    assert w["status"] == "ok", w.get("error")
    from profiler.capture.phases import registry

    phases = {p["name"]: p for p in w["phases"]}
    assert set(registry.DEFAULT_PHASES) <= set(phases)
    for p in phases.values():
        # Measured, not applicable, or stepped aside with a note naming this TensorFlow.
        assert p["status"] in ("ok", "skipped") or (
            p["status"] == "unavailable" and f"TensorFlow {USER_TF}." in p["reason"]
        ), p
    assert phases["timed"]["status"] == "ok"

    with stages.stage("browser"):
        rendered, errors, requests = _charts(run_dir / "report.html")
    summary_line = stages.report("tensorflow 2.20 install test")
    print(summary_line)
    record_property("stage_seconds", json.dumps(stages.seconds))
    # The report works from the file alone: nothing fetched at view time.
    assert all(u.startswith(("file://", "data:")) for u in requests), requests
    assert errors == []
    if rendered == 0 and 'id="charting-library"' not in (run_dir / "report.html").read_text():
        pytest.xfail(
            "no chart: the installed report has no charting library; the charts from the "
            "installed plotly package are a change not yet landed when this test was written"
        )
    assert rendered >= 1


@pytest.mark.slow
def test_without_tensorflow_a_numpy_script_is_profiled_offline(
    tmp_path: Path, venv_dir: Path, record_property: Callable[[str, object], None]
) -> None:
    stages = Stages()
    with stages.stage("venv"):
        python = _venv(venv_dir)
    with stages.stage("install profiler"):
        _pip(python, "install", "-q", str(REPO))
    for dist in ("tensorflow", "tensorflow-cpu", "tensorboard"):
        assert _version(python, dist) is None, dist

    work = tmp_path / "work"
    work.mkdir()
    run_dir, _terminal = _profile(python, work, NUMPY_SCRIPT, stages)
    print(stages.report("numpy-only install test"))
    record_property("stage_seconds", json.dumps(stages.seconds))
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["environment"]["packages"]["tensorflow"] is None
    (w,) = summary["workloads"]
    assert w["status"] == "ok", w.get("error")
    phases = {p["name"]: p["status"] for p in w["phases"]}
    assert phases["timed"] == "ok" and phases["hooks"] == "skipped", phases
    assert "failed" not in phases.values(), phases
    assert (run_dir / "report.html").stat().st_size > 0
    # TensorBoard's scalars are written without TensorBoard (read here with this
    # virtualenv's).
    from profiler.reports import tensorboard

    (events,) = (run_dir / "tensorboard" / w["slug"]).glob("events.out.tfevents.*")
    assert "step_time_us" in {p["tag"] for p in tensorboard.read(events)}
