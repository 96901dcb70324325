"""Issue 25's runner-side causes, each with the real script run through the real command line:
how a script's run is recorded whatever it does (``os._exit(0)``, its own KeyboardInterrupt,
reading standard input, a process that ignores SIGTERM), and that nothing it starts outlives
the run (a daemon in a session of its own) while a child that already exited (a zombie) is not
called running.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import python_env
from tests.test_faults import _gone
from tests.test_script_run import cli, only_run, workload, write


def test_os_exit_0_mid_loop_is_recorded_as_it_ended_not_as_completed(tmp_path: Path) -> None:
    script = write(
        tmp_path,
        "exit0.py",
        """
        import os
        import time

        for i in range(400):
            time.sleep(0.005)
            if i == 300:
                os._exit(0)
        """,
    )
    out = cli(tmp_path, "--step-line", "6", "--phases", "timed", str(script))
    # Python would exit 0: so does the run, saying how the script ended.
    assert out.returncode == 0, out.stderr[-2000:]
    w = workload(only_run(tmp_path))
    s = w["script"]
    assert w["status"] == "ok" and s["ended"] == "exited"
    assert "exited with status 0 outside Python (os._exit(0))" in s["message"]
    assert s["steps"] >= 200  # the heartbeat's count
    assert "os._exit(0)" in out.stdout


def test_a_scripts_own_keyboardinterrupt_is_recorded_as_it_raised(tmp_path: Path) -> None:
    script = write(
        tmp_path,
        "kbi.py",
        """
        import time

        for i in range(400):
            time.sleep(0.002)
            if i == 200:
                raise KeyboardInterrupt
        """,
    )
    out = cli(tmp_path, "--step-line", "5", "--phases", "timed", str(script))
    assert out.returncode == 1
    w = workload(only_run(tmp_path))
    assert w["script"]["ended"] == "raised"
    assert w["error"].startswith("the script raised KeyboardInterrupt after 200 steps")
    assert "Traceback" in w["error"] and 'kbi.py", line 7' in w["error"]
    assert "outside Python" not in w["error"]


def test_a_script_reading_stdin_is_told_it_is_not_connected(tmp_path: Path) -> None:
    script = write(
        tmp_path,
        "reads.py",
        """
        import sys

        data = sys.stdin.read()
        for i in range(100):
            pass
        print("got", len(data))
        """,
    )
    out = cli(tmp_path, "--phases", "timed", str(script))
    assert out.returncode == 0, out.stderr[-2000:]
    w = workload(only_run(tmp_path))
    assert w["script"]["stdin_read"] is True
    assert "standard input, which is not connected" in w["script"]["message"]
    assert "--stdin FILE" in out.stdout


@pytest.mark.slow
def test_a_daemon_the_script_started_in_its_own_session_does_not_outlive_the_run(
    tmp_path: Path,
) -> None:
    script = write(
        tmp_path,
        "daemon.py",
        """
        import subprocess
        import sys
        import time

        d = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True
        )
        open("daemon.pid", "w").write(str(d.pid))
        for i in range(200):
            time.sleep(0.002)
        """,
    )
    out = cli(tmp_path, "--repeat", "0", "--phases", "timed", str(script))
    assert out.returncode == 0, out.stderr[-2000:]
    assert _gone(int((tmp_path / "daemon.pid").read_text()), timeout=5)
    w = workload(only_run(tmp_path))
    assert any("sessions of their own" in n for n in w["script"]["notes"]), w["script"]["notes"]


def test_a_child_that_already_exited_is_not_reported_running(tmp_path: Path) -> None:
    script = write(
        tmp_path,
        "zombie.py",
        """
        import subprocess
        import sys
        import time

        subprocess.Popen([sys.executable, "-c", "pass"])  # never waited for: a zombie
        time.sleep(1.0)
        for i in range(200):
            time.sleep(0.002)
        """,
    )
    out = cli(tmp_path, "--repeat", "0", "--phases", "timed", str(script))
    assert out.returncode == 0, out.stderr[-2000:]
    w = workload(only_run(tmp_path))
    assert not any("still running" in n for n in w["script"]["notes"]), w["script"]["notes"]


@pytest.mark.slow
def test_a_script_that_ignores_sigterm_is_killed_and_not_recorded_as_completed(
    tmp_path: Path,
) -> None:
    script = write(
        tmp_path,
        "stubborn.py",
        """
        import signal
        import time

        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        open("started", "w").write("1")
        for i in range(100000):
            time.sleep(0.002)
        """,
    )
    proc = _started(tmp_path, "--step-line", "8", "--phases", "timed", str(script))
    time.sleep(2.0)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 143
    (partial,) = (tmp_path / "runs").glob("*.partial")
    w = json.loads((partial / "summary.json").read_text())["workloads"][0]
    assert w["script"]["ended"] != "completed", w["script"]
    assert "ran to its end" not in w["script"]["message"]
    assert not [p for p in os.listdir("/proc") if p.isdigit() and _runs(int(p), "stubborn.py")]


def _started(tmp_path: Path, *args: str) -> subprocess.Popen[bytes]:
    """``profiler run --out tmp_path/runs ARGS`` in the background, once its script has written
    ``started`` in ``tmp_path`` (at most 60 s)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "profiler", "run", "--out", str(tmp_path / "runs"), *args],
        cwd=tmp_path,
        env=python_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not (tmp_path / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return proc


def _runs(pid: int, name: str) -> bool:
    try:
        return name in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


def _files_with(run: Path, *secrets: str) -> list[str]:
    """The run's files (traces decompressed) that hold any of ``secrets``."""
    import gzip

    found = []
    for path in run.rglob("*"):
        if not path.is_file():
            continue
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
        if any(s.encode() in data for s in secrets):
            found.append(str(path.relative_to(run)))
    return found


@pytest.mark.slow
def test_an_interrupted_run_never_wrote_the_scripts_secret_arguments(tmp_path: Path) -> None:
    script = write(
        tmp_path,
        "waits.py",
        """
        import time

        open("started", "w").write("1")
        for i in range(100000):
            time.sleep(0.002)
        """,
    )
    secret = "sk-live0123456789abcdefSECRET"
    args = ("--phases", "timed", str(script), "--api-key", secret, "--token", "hf_abcdefgh1234")
    proc = _started(tmp_path, *args)
    # While the script runs, the spec in the run folder already holds no secret.
    (spec,) = (tmp_path / "runs").glob("*.partial/workloads/*/worker-spec.json")
    assert secret not in spec.read_text() and "hf_abcdefgh1234" not in spec.read_text()
    proc.kill()  # SIGKILL: nothing runs after it to clean up
    proc.wait(timeout=30)
    assert _files_with(tmp_path / "runs", secret, "hf_abcdefgh1234") == []


def test_secrets_in_the_scripts_exception_are_redacted_everywhere_it_is_recorded(
    tmp_path: Path,
) -> None:
    script = write(
        tmp_path,
        "leaks.py",
        """
        import os
        import sys

        for i in range(50):
            pass
        raise RuntimeError(
            f"auth failed: {os.environ['OPENAI_API_KEY']} {sys.argv[2]} hf_abcdefghijklmnop"
        )
        """,
    )
    env_secret, arg_secret = "proj-Zx9SECRETSECRET123", "mysecretvalue99"
    out = subprocess.run(
        [
            *(sys.executable, "-m", "profiler", "run", "--out", str(tmp_path / "runs")),
            *("--phases", "timed", str(script), "--api-key", arg_secret),
        ],
        cwd=tmp_path,
        env={**python_env(), "OPENAI_API_KEY": env_secret},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1, out.stderr[-2000:]
    run = only_run(tmp_path)
    w = workload(run)
    assert "auth failed: <redacted> <redacted> <redacted>" in w["error"], w["error"]
    # The summary, the report, the trace and error.txt; the logs are the script's own output,
    # as the terminal showed it.
    leaked = _files_with(run, env_secret, arg_secret, "hf_abcdefghijklmnop")
    assert [p for p in leaked if not p.endswith((".log",))] == []


@pytest.fixture
def tiny_disk(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A 2 MB tmpfs (root only: mount)."""
    where = tmp_path / "tiny"
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    got = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)])
    if got.returncode != 0:
        pytest.skip("mount -t tmpfs is not allowed here")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.slow
def test_a_script_that_fills_the_disk_with_its_output_keeps_running_and_the_run_exits_3(
    tmp_path: Path, tiny_disk: Path
) -> None:
    script = write(
        tmp_path,
        "chatty.py",
        """
        import time

        line = "x" * 200
        for i in range(40000):  # ~8 MB of output: four times the disk
            print(i, line)
        open("finished", "w").write("1")
        """,
    )
    out = subprocess.run(
        [
            *(sys.executable, "-m", "profiler", "run", "--out", str(tiny_disk)),
            *("--phases", "timed", str(script)),
        ],
        cwd=tmp_path,
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    # The script ran to its end (its output never blocked it), the run exits 3 in one line.
    assert (tmp_path / "finished").exists()
    assert out.returncode == 3, out.stderr[-2000:]
    errors = [ln for ln in out.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "No space left on device" in errors[0], out.stderr[-2000:]
    assert "Traceback" not in out.stderr


def test_a_sibling_in_the_profilers_own_session_is_never_ended_as_a_left_over(
    tmp_path: Path,
) -> None:
    # CI's make was once ended ("Terminated", exit 143): a child of the profiling process that
    # the runner had not started (the program running the profiler in-process had) was taken
    # for an orphan of the script, and its process group, the profiler's own, was killed.
    # The probe runs in a session of its own, so a regression ends it alone.
    probe = write(
        tmp_path,
        "probe.py",
        """
        import subprocess
        import sys
        import time

        from profiler.processes import orphans

        orphans.adopt()
        sibling = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        measured = subprocess.Popen(
            [sys.executable, "-c", "pass"], start_new_session=True
        )
        orphans.started(measured.pid)
        measured.wait()
        orphans.forget(measured.pid)
        alive, dead = orphans.leftovers(measured.pid)
        assert sibling.pid not in alive + dead, (alive, dead)
        assert orphans.end_leftovers(measured.pid) is False
        time.sleep(0.2)
        assert sibling.poll() is None, "the sibling was ended"
        sibling.kill()
        sibling.wait()
        print("kept")
        """,
    )
    out = subprocess.run(
        [sys.executable, str(probe)],
        capture_output=True,
        text=True,
        env=python_env(),
        start_new_session=True,
        timeout=60,
    )
    assert out.returncode == 0 and out.stdout.strip() == "kept", (out.returncode, out.stderr)
