"""Every way a run can end leaves no process behind and loses nothing measured: signals to the
profiler, a second Ctrl-C, a script that forks, exits outside Python or crashes, a full disk,
bad input, secrets on the script's command line, odd summaries given to ``report``."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import REPO, python_env
from tests.test_script_run import cli, only_run, workload, write

#: A script that writes its pid, then runs marked steps of ~20 ms for as long as it is let.
FOREVER = """
import os
import sys
import time

open(sys.argv[1], "w").write(str(os.getpid()))


def step():
    time.sleep(0.02)


for i in range(100000):
    step()
"""


_STARTED: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _no_profiler_outlives_its_test():
    """A failed test leaves no run behind (SIGKILL: the workers die with their parent)."""
    yield
    while _STARTED:
        proc = _STARTED.pop()
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)


def _start(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "profiler", "run", "--out", str(tmp_path / "runs"), *args],
        cwd=tmp_path,
        env=python_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _STARTED.append(proc)
    return proc


def _wait_for(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)


def _gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # a zombie whose parent is gone counts as gone
            state = Path(f"/proc/{pid}/stat").read_text().split()[2]
            if state == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.1)
    return False


def _partial(tmp_path: Path) -> Path:
    (run,) = [p for p in (tmp_path / "runs").iterdir() if p.name.endswith(".partial")]
    return run


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_and_sighup_keep_the_partial_run_and_leave_no_process(tmp_path, sig, status):
    script = write(tmp_path, "forever.py", FOREVER)
    pidfile = tmp_path / "pid"
    proc = _start(tmp_path, "--step-function", "step", str(script), str(pidfile))
    _wait_for(pidfile)
    time.sleep(3)  # some steps measured
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == status, err[-2000:]
    run = _partial(tmp_path)
    doc = json.loads((run / "summary.json").read_text())
    assert doc["run"]["status"] == "interrupted"
    assert doc["workloads"][0]["script"]["steps"] > 10
    assert _gone(int(pidfile.read_text()))
    assert not (tmp_path / "runs" / "latest").exists()


@pytest.mark.slow
def test_sigkill_of_the_profiler_takes_its_processes_with_it(tmp_path):
    script = write(tmp_path, "forever.py", FOREVER)
    pidfile = tmp_path / "pid"
    proc = _start(tmp_path, "--step-function", "step", str(script), str(pidfile))
    _wait_for(pidfile)
    proc.kill()
    proc.communicate(timeout=30)
    assert _gone(int(pidfile.read_text()))


#: A script that survives SIGTERM (it swallows every exception in its loop).
STUBBORN = """
import os
import sys
import time

open(sys.argv[1], "w").write(str(os.getpid()))


def step():
    time.sleep(0.02)


while True:
    try:
        step()
    except BaseException:
        pass
"""


@pytest.mark.slow
def test_a_second_ctrl_c_kills_a_script_that_will_not_stop(tmp_path):
    script = write(tmp_path, "stubborn.py", STUBBORN)
    pidfile = tmp_path / "pid"
    proc = _start(tmp_path, "--step-function", "step", str(script), str(pidfile))
    _wait_for(pidfile)
    time.sleep(2)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    # At once: well inside the first Ctrl-C's 5 s grace period.
    assert time.monotonic() - t0 < 4.0
    assert proc.returncode == 130
    assert _gone(int(pidfile.read_text()))


@pytest.mark.slow
def test_ctrl_c_during_the_experiments_keeps_the_run_partial_and_starts_nothing_more(tmp_path):
    # numpy_gd selects the size sweep (a cheap experiments process), adam_minibatch the
    # efficiency process that would come next.
    proc = _start(
        tmp_path,
        "--workloads",
        "numpy_gd,adam_minibatch",
        "--phases",
        "timed",
        "--experiments",
        "--sweep-sizes",
        "10,100,1000,10000,100000",
        "--no-progress",
    )
    deadline = time.monotonic() + 120
    while not list((tmp_path / "runs").glob("*.partial/experiments/spec.json")):
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "the experiments process never started"
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    run = _partial(tmp_path)
    doc = json.loads((run / "summary.json").read_text())
    assert doc["run"]["status"] == "interrupted"
    assert "interrupted during the experiments process" in doc["run"]["notes"]
    # What finished before it is kept; the efficiency process never started.
    assert [w["status"] for w in doc["workloads"]] == ["ok", "ok"]
    assert not (run / "efficiency").exists()
    assert not (tmp_path / "runs" / "latest").exists()


def _process_of(module: str, under: Path) -> int | None:
    """The pid of ``python -m module`` whose command line names a path under ``under``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if module in argv and any(str(under) in a for a in argv):
            return int(entry.name)
    return None


@pytest.mark.slow
@pytest.mark.parametrize(
    ("workload", "module", "section"),
    [
        # numpy_gd selects the size sweep alone, adam_minibatch the efficiency study alone.
        ("numpy_gd", "profiler.capture.experiments", "experiments"),
        ("adam_minibatch", "profiler.capture.efficiency", "efficiency"),
    ],
)
def test_a_killed_measurement_process_fails_the_run_in_one_line(
    tmp_path, workload, module, section
):
    proc = _start(
        tmp_path, "--workloads", workload, "--phases", "timed", "--quick", "--experiments"
    )
    deadline = time.monotonic() + 120
    while (pid := _process_of(module, tmp_path)) is None:
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.monotonic() < deadline, f"{module} never started"
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err[-2000:]
    said = [line for line in out.splitlines() if line.startswith(f"{section} process")]
    assert said == [f"{section} process: failed: killed by signal 9 (SIGKILL)"], out
    run = only_run(tmp_path)
    assert not run.name.endswith(".partial")
    doc = json.loads((run / "summary.json").read_text())
    assert doc["run"]["status"] == "failed"
    assert doc[section]["status"] == "failed"
    assert doc[section]["error"] == "killed by signal 9 (SIGKILL)"
    assert [w["status"] for w in doc["workloads"]] == ["ok"]
    assert _gone(pid)


FORKS = """
import os
import signal
import time

for i in range(300):
    time.sleep(0.005)
    if i == 100:
        child = os.fork()
        if child == 0:
            open("child.pid", "w").write(str(os.getpid()))
            time.sleep(60)  # outlives the script: the run's end must end it
    if i == 150:
        worker = os.fork()
        if worker == 0:
            time.sleep(60)
            os._exit(0)
    if i == 200:  # ended by the script, as a pool ends its workers
        os.kill(worker, signal.SIGTERM)
        _, status = os.waitpid(worker, 0)
        open("worker.status", "w").write(str(os.WTERMSIG(status) if os.WIFSIGNALED(status) else -1))
"""


@pytest.mark.slow
def test_a_forked_child_never_writes_the_outputs_and_does_not_outlive_the_run(tmp_path):
    script = write(tmp_path, "forks.py", FORKS)
    out = cli(tmp_path, "--step-line", "7", "--phases", "timed", str(script))
    assert out.returncode == 0, out.stderr[-2000:]
    w = workload(only_run(tmp_path))
    # The parent's 300 steps; a child's own ending would have written its ~200.
    assert w["script"]["steps"] == 300
    assert _gone(int((tmp_path / "child.pid").read_text()), timeout=5)
    assert any("forked children" in n for n in w["script"]["notes"])
    # A child the script ends with SIGTERM (a PyDataset's pool, each epoch) inherited the
    # profiler's handler, which printed its own traceback in each (23 in one fit) and left
    # them running the script's code: it ends as without the profiler.
    assert (tmp_path / "worker.status").read_text() == str(int(signal.SIGTERM))
    assert "stopped by the runner" not in out.stderr, out.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("os._exit(5)", r"exited with status 5 outside Python"),
        # Python's faulthandler names the frame the native crash happened under, and the
        # script's line that called it.
        (
            "import ctypes; ctypes.string_at(0)",
            r"killed by signal 11 \(SIGSEGV\) in string_at \(ctypes/__init__.py:\d+\), from "
            r"<module> \(ends.py:8\)",
        ),
    ],
)
def test_a_script_that_ends_outside_python_says_how_and_keeps_its_steps(tmp_path, body, words):
    script = write(
        tmp_path,
        "ends.py",
        f"""
        import os
        import time

        for i in range(400):
            time.sleep(0.005)
            if i == 300:
                {body}
        """,
    )
    out = cli(tmp_path, "--step-line", "6", "--phases", "timed", str(script))
    assert out.returncode == 1
    run = only_run(tmp_path)
    w = json.loads((run / "summary.json").read_text())["workloads"][0]
    assert w["status"] == "failed" and re.match(words, w["error"]), w["error"]
    assert w["script"]["ended"] == "exited" and re.search(words, w["script"]["message"])
    # The terminal's line is the error's headline, not the last line of stderr.
    assert re.search(f"ends.py: failed: {words}", out.stdout), out.stdout
    # The heartbeat's count: at most ~0.5 s of steps (~100 here) lost.
    assert w["script"]["steps"] >= 200


def test_stdin_that_is_a_folder_is_bad_input_and_nothing_is_written(tmp_path):
    script = write(tmp_path, "s.py", "print(1)\n")
    out = cli(tmp_path, "--stdin", str(tmp_path), str(script))
    assert out.returncode == 2
    assert "--stdin" in out.stderr and "folder" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_a_latest_that_is_a_folder_is_refused_before_the_run(tmp_path):
    (tmp_path / "runs" / "latest").mkdir(parents=True)
    script = write(tmp_path, "s.py", "print(1)\n")
    out = cli(tmp_path, str(script))
    assert out.returncode == 3
    assert "latest is a folder" in out.stderr
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["latest"]


FULL_DISK = """
import errno
import sys

from profiler.model import atomic

real = atomic.atomic_write_bytes


def full(path, data, *a, **k):
    if str(path).endswith("summary.json"):
        raise OSError(errno.ENOSPC, "No space left on device")
    return real(path, data, *a, **k)


atomic.atomic_write_bytes = full
from profiler import cli

sys.exit(cli.main(sys.argv[1:]))
"""


def test_a_full_disk_is_exit_3_in_one_line_with_no_truncated_file(tmp_path):
    # An injected ENOSPC where the summary is written (a tmpfs needs privileges a test
    # cannot count on).
    wrapper = tmp_path / "full_disk.py"
    wrapper.write_text(FULL_DISK)
    script = write(tmp_path, "s.py", "for i in range(50):\n    pass\n")
    out = subprocess.run(
        [sys.executable, str(wrapper), "run", "--out", str(tmp_path / "runs"), str(script)],
        cwd=tmp_path,
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 3, out.stderr[-2000:]
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "No space left on device" in last
    assert "Traceback" not in out.stderr
    # Nothing half-written: no temporary files left, no empty summary.
    leftovers = [p for p in (tmp_path / "runs").rglob("*") if ".tmp" in p.name]
    assert leftovers == []
    assert not list((tmp_path / "runs").rglob("summary.json"))


def test_secrets_on_the_scripts_command_line_are_never_written(tmp_path):
    script = write(tmp_path, "s.py", "import sys\nfor i in range(50):\n    pass\n")
    secret = "sk-live0123456789abcdefSECRET"
    out = cli(
        tmp_path,
        "--phases",
        "timed",
        str(script),
        "--api-key",
        secret,
        "--password=hunter2pass",
        "--lr",
        "0.1",
    )
    assert out.returncode == 0, out.stderr
    run = only_run(tmp_path)
    for path in run.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".html", ".txt", ".log", ".gz"):
            data = path.read_bytes()
            if path.suffix == ".gz":
                import gzip

                data = gzip.decompress(data)
            assert secret.encode() not in data, path
            assert b"hunter2pass" not in data, path
    argv = workload(run)["script"]["argv"]
    assert argv == ["--api-key", "<redacted>", "--password=<redacted>", "--lr", "0.1"]


GOLDEN = REPO / "tests" / "data" / "golden_summary.json"


def _paths(doc, prefix=()):
    """Every (path, value) of a summary, for one-field mutations."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:3]):
            yield from _paths(v, (*prefix, i))
    yield prefix, doc


_GOLDEN_PATHS = [p for p, _v in _paths(json.loads(GOLDEN.read_text())) if p]


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    where=st.sampled_from(_GOLDEN_PATHS),
    value=st.sampled_from([1e308, -1, 0, "x", "", None, [], {}, True, 10**30, -1e308]),
)
def test_report_on_an_odd_summary_never_raises(tmp_path_factory, where, value):
    from profiler import cli as profiler_cli

    doc = json.loads(GOLDEN.read_text())
    target = doc
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    run = tmp_path_factory.mktemp("odd")
    (run / "summary.json").write_text(json.dumps(doc))
    status = profiler_cli.main(["report", str(run)])
    assert status in (0, 2)


def test_a_count_out_of_range_is_one_line_and_points_to_help(tmp_path):
    out = cli(tmp_path, "--steps", "1e99", "x.py")
    assert out.returncode == 2
    (line,) = out.stderr.strip().splitlines()
    assert "--steps" in line and "--help" in line
