"""Multi-worker jobs: ``run --workers 2`` on a real MultiWorkerMirroredStrategy loop (two
workers on loopback), ``capture`` of two workers that started their profiler servers, and the
faults: a worker that raises, an address that does not answer."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from profiler.analysis import attribution
from profiler.model import CATEGORIES, WorkloadTrace
from profiler.processes.workers import free_ports
from profiler.reports import summary
from tests.conftest import REPO, python_env
from tests.test_script_run import cli, only_run

LOOP = REPO / "tests" / "data" / "mw_loop.py"
#: The injected straggler: worker 1 sleeps this long after every step.
SLOW_MS = 8.0


#: The fault tests' phases: no framework phase, whose stop TensorFlow crashes a non-chief
#: worker with now and then (profiler/docs/tensorflow.md, "Multi-worker jobs on TensorFlow 2.21");
#: they
#: test how a job ends, not what it traced.
NO_TRACE = ("--phases", "timed,sampled,hooks")


def _run_job(
    tmp_path: Path, *args: str, **env: str
) -> tuple[subprocess.CompletedProcess[str], dict]:
    os.environ.update(env)
    try:
        out = cli(tmp_path, "--workers", "2", *args, str(LOOP), timeout=400)
    finally:
        for k in env:
            os.environ.pop(k, None)
    run = only_run(tmp_path)
    doc = json.loads((run / "summary.json").read_text())
    summary.validate(doc)
    return out, doc


def _leftovers(tmp_path: Path) -> list[str]:
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [
        line
        for line in ps.splitlines()
        if (str(tmp_path) in line and "profiler" in line) or "sleep 2147483647" in line
    ]


@pytest.fixture(scope="module")
def straggler_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, str]:
    # A worker lost to TensorFlow 2.21's profiler service mid-trace (the other then reads "stopped
    # sending heartbeats": 2 clean-clone suites in about 15 here) is TensorFlow's crash, not the
    # job's: the job is run again, once.
    for attempt in range(2):
        tmp = tmp_path_factory.mktemp(f"job{attempt}")
        out, doc = _run_job(tmp, MW_STEPS="500", MW_SLOW_WORKER="1", MW_SLOW_MS=str(SLOW_MS))
        if out.returncode == 0 or "stopped sending heartbeats" not in out.stderr:
            break
    assert out.returncode == 0, out.stderr[-3000:]
    return only_run(tmp), doc, out.stdout


pytestmark = [pytest.mark.tf, pytest.mark.slow]


def test_both_workers_are_profiled_in_one_run_folder(straggler_job) -> None:
    run, doc, _ = straggler_job
    ws = doc["workloads"]
    assert [w["worker"]["index"] for w in ws] == [0, 1]
    assert all(w["status"] == "ok" for w in ws)
    assert {w["worker"]["count"] for w in ws} == {2}
    for w in ws:
        phases = {p["name"]: p["status"] for p in w["phases"]}
        assert phases["timed"] == phases["framework"] == phases["sampled"] == "ok", phases
        # A what-if would change one worker's collectives alone.
        assert phases["whatif"] == "skipped"
        assert w["script"]["detection"]["source"] == "tf_function"
        # The first call held back while the loop was watched is a step all the same.
        held = (w["script"]["auto_step"] or {}).get("held_calls", 0)
        assert w["script"]["steps"] + held == 500
        # One TensorBoard run per worker, with its capture for the profile plugin.
        tb = run / "tensorboard" / w["slug"]
        assert list(tb.glob("plugins/profile/*/*.xplane.pb")), w["slug"]
    assert {w["slug"] for w in ws} == {"mw_loop.py-worker-0", "mw_loop.py-worker-1"}


def test_communication_is_measured_and_every_step_is_conserved(straggler_job) -> None:
    run, doc, _ = straggler_job
    for w in doc["workloads"]:
        att = w["attribution"]
        assert set(att["typical_us"]) == set(CATEGORIES)
        assert att["typical_us"]["communication"] > 0, w["name"]
        assert sum(att["typical_us"].values()) == pytest.approx(att["reference_us"], abs=0.01)
        trace = WorkloadTrace.load(run / "workloads" / w["slug"] / "model.json.gz")
        a = attribution.attribute(trace)
        assert a is not None
        units = trace.phase("timed").window.durations_ns()
        assert [sum(row) for row in a.steps] == list(units)
    # The worker that waits for the straggler spends more of its step communicating.
    w0, w1 = (w["attribution"]["typical_us"]["communication"] for w in doc["workloads"])
    assert w0 > w1


def test_the_injected_straggler_is_named_with_its_reason(straggler_job) -> None:
    _run, doc, stdout = straggler_job
    job = doc["job"]
    assert job["straggler"] == 1
    # The injected sleep is the straggler's Python, beyond the other worker's: the bench holds
    # it to 20%; on a loaded 2-core machine a test only bounds it.
    py = [w["attribution"]["typical_us"]["python"] for w in doc["workloads"]]
    assert 0.5 * SLOW_MS * 1e3 < py[1] - py[0] < 2.0 * SLOW_MS * 1e3, py
    # Known misfire beside another test's process: in the capture both workers are slowed,
    # the straggler's run call holds ~7 ms that is neither kernels, collectives nor executor
    # (12.3 ms against 3.7 + 1.4), and that time is booked as dispatch, which can then lead
    # the reason by a few hundred µs (6.1 ms against Python's 6.0 ms).
    assert job["reason"] in ("python", "dispatch"), job
    assert 0.5 * SLOW_MS * 1e3 < job["reason_us"] < 2.0 * SLOW_MS * 1e3
    # The busy-time excess is the noisier figure (the bench: +27-32% of the delay); beside
    # another test's process it measured 2.5 ms of the 8 ms over the one step both windows
    # shared: a test asserts its sign.
    assert job["excess_us"] > 0
    w1 = job["workers"][1]
    assert w1["straggler_steps"] >= 0.8 * len(job["steps"]) > 0
    found = [d for d in doc["diagnoses"] if d["rule"] == "straggler"]
    assert found and found[0]["message"].startswith("Worker 1 is the straggler")
    assert job["reason"] != "python" or "Python" in found[0]["message"]
    assert "Worker 1 is the straggler" in stdout
    assert job["isolation"]


def test_a_worker_that_raises_stops_the_job_and_keeps_what_was_measured(tmp_path: Path) -> None:
    out, doc = _run_job(
        tmp_path, *NO_TRACE, MW_STEPS="3000", MW_RAISE_WORKER="1", MW_RAISE_AT="200"
    )
    assert out.returncode == 1, out.stderr[-3000:]
    w0, w1 = doc["workloads"]
    assert w1["status"] == "failed"
    assert "RuntimeError" in w1["script"]["message"], w1["script"]["message"]
    assert "worker 1 failed at step 200" in w1["error"]
    # The other worker waits for it in the all-reduce: stopped (or it failed by itself).
    assert w0["status"] == "failed"
    assert w0["script"]["steps"] < 3000
    # What the phases measured before the failure is kept.
    assert any(p["status"] == "ok" for p in w1["phases"])
    assert not _leftovers(tmp_path)


def _wait_for_port(port: int, procs: list[subprocess.Popen[str]], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for p in procs:
            assert p.poll() is None, p.stderr.read() if p.stderr else ""
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"port {port} never answered")


def _two_free_ports_in_a_row(taken: set[int]) -> int:
    """A port free on 127.0.0.1 whose next port is free too (the workers' profiler servers
    listen on port + task index; a next port held by another test's server answered the
    capture in its place)."""
    for _ in range(50):
        (port,) = free_ports(1)
        if {port, port + 1} & taken or port + 1 > 65535:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise AssertionError("no two free ports in a row on 127.0.0.1")


def _capture_two_workers(
    tmp_path: Path,
) -> tuple[subprocess.CompletedProcess[str], list[int | None]]:
    ports = free_ports(2)
    cluster = [f"127.0.0.1:{p}" for p in ports]
    profiler_port = _two_free_ports_in_a_row(set(ports))
    procs = []
    try:
        for i in range(2):
            env = dict(
                python_env(),
                TF_CONFIG=json.dumps(
                    {"cluster": {"worker": cluster}, "task": {"type": "worker", "index": i}}
                ),
                MW_STEPS="100000",
                MW_SLOW_WORKER="1",
                MW_SLOW_MS=str(SLOW_MS),
            )
            # Profiler servers on two ports chosen free (this one and the next).
            env["MW_PROFILER_PORT"] = str(profiler_port)
            procs.append(
                subprocess.Popen(
                    [sys.executable, str(LOOP)],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                    start_new_session=True,
                )
            )
        for i in range(2):
            _wait_for_port(profiler_port + i, procs, 120)
        time.sleep(2)  # past the job's first steps
        addrs = ",".join(f"grpc://127.0.0.1:{profiler_port + i}" for i in range(2))
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "profiler",
                "capture",
                addrs,
                "--duration-ms",
                "1500",
                "--out",
                str(tmp_path / "runs"),
            ],
            cwd=tmp_path,
            env=python_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        ended = [p.poll() for p in procs]
        for p in procs:
            p.kill()
        tails = [(p.communicate()[1] or "")[-600:] for p in procs]
    if out.returncode != 0:
        # What the workers said: a worker TensorFlow's profiler service crashed ends by itself.
        out.stderr += "".join(
            f"\n--- worker {i} (ended by itself: {e}) ---\n{t}"
            for i, (e, t) in enumerate(zip(ended, tails, strict=True))
        )
    return out, ended


#: Captures of a fresh job tried before the test gives up on TensorFlow's crash.
CAPTURE_ATTEMPTS = 4


def test_capture_of_two_running_workers_writes_a_run_with_both(tmp_path: Path) -> None:
    # TensorFlow 2.21's profiler service crashes task 1 of a running job now and then while both
    # workers are traced at once (here: 1-3 captures of 6 of this job, 0 of 8 when task 1 alone
    # was traced; CI saw it 3 times in a row): a host that sent nothing is recorded as failed,
    # and the capture is tried on a fresh job. Where every attempt lost a worker so, what the
    # run kept of it is checked, and the test is skipped with the count.
    failures = []
    for attempt in range(CAPTURE_ATTEMPTS):
        where = tmp_path / f"attempt-{attempt}"
        where.mkdir()
        out, ended = _capture_two_workers(where)
        if out.returncode == 0:
            break
        failures.append(out.stdout[-800:] + out.stderr[-1500:])
        crashed = [i for i, e in enumerate(ended) if e is not None and e < 0]
        assert crashed, "\n=== next attempt ===\n".join(failures)
    tmp_path = where
    doc = json.loads((only_run(tmp_path) / "summary.json").read_text())
    summary.validate(doc)
    ws = doc["workloads"]
    assert [w["worker"]["index"] for w in ws] == [0, 1]
    if out.returncode != 0:
        # The worker TensorFlow crashed is failed with what it sent; the other is analysed.
        lost = ws[crashed[0]]
        assert lost["status"] == "failed"
        assert "sent no capture" in lost["error"], lost["error"]
        assert any(w["status"] == "ok" for w in ws), out.stdout
        pytest.skip(
            f"TensorFlow's profiler service crashed worker {crashed[0]} in all "
            f"{CAPTURE_ATTEMPTS} captures (the failed host was recorded as such)"
        )
    assert all(w["status"] == "ok" for w in ws)
    for w in ws:
        assert w["attribution"]["typical_us"]["communication"] > 0
        assert w["attribution"]["steps"] >= 10
    assert doc["job"]["straggler"] == 1
    assert "Worker 1 is the straggler" in out.stdout


@pytest.mark.parametrize(
    ("address", "says"),
    [
        ("127.0.0.1:6009", "is not an address of the form grpc://host:port"),
        ("grpc://127.0.0.1:{port}", "does not answer"),
        ("grpc://127.0.0.1:{port},grpc://127.0.0.1:{port}", "is given twice"),
    ],
)
def test_a_bad_capture_address_is_one_line_and_exit_2(
    tmp_path: Path, address: str, says: str
) -> None:
    (port,) = free_ports(1)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "profiler",
            "capture",
            address.format(port=port),
            "--out",
            str(tmp_path / "runs"),
        ],
        cwd=tmp_path,
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: capture: ") and says in lines[0]
    assert not (tmp_path / "runs").exists()


@pytest.mark.browser
def test_the_report_draws_each_worker_and_the_stragglers(straggler_job) -> None:
    import shutil

    from playwright.sync_api import sync_playwright

    from profiler.bench import CHROMIUM_ARGS
    from profiler.reports import viewmodel

    run, doc, _ = straggler_job
    vm = viewmodel.build(doc)
    assert {"chart-job", "chart-job-steps"} <= set(vm["chart_ids"])
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=shutil.which("chromium") or "/usr/bin/chromium",
            args=list(CHROMIUM_ARGS),
        )
        page = browser.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto((run / "report.html").as_uri())
        page.wait_for_function(
            "document.body.getAttribute('data-charts-rendered') !== null", timeout=60_000
        )
        rendered = int(page.evaluate("document.body.getAttribute('data-charts-rendered')"))
        bars = page.locator("#chart-job .barlayer .point path").count()
        points = page.locator("#chart-job-steps .scatterlayer .point").count()
        section = page.locator("#job").inner_text()
        browser.close()
    assert errors == []
    assert rendered == len(vm["charts"])
    assert bars >= 4  # two workers, at least two categories each
    assert points == 2 * len(doc["job"]["steps"])
    assert "Worker 1 is the straggler" in section


def test_a_hung_worker_stops_the_job_and_each_worker_is_recorded_as_hung(tmp_path: Path) -> None:
    # It hangs after every phase's window: no profiler is running in the other worker then.
    os.environ.update(MW_STEPS="3000", MW_HANG_WORKER="1", MW_HANG_AT="700")
    try:
        out = cli(
            tmp_path, "--workers", "2", "--worker-stall", "8", *NO_TRACE, str(LOOP), timeout=400
        )
    finally:
        for k in ("MW_STEPS", "MW_HANG_WORKER", "MW_HANG_AT"):
            os.environ.pop(k, None)
    assert out.returncode == 1, out.stderr[-3000:]
    doc = json.loads((only_run(tmp_path) / "summary.json").read_text())
    summary.validate(doc)
    for w in doc["workloads"]:
        assert w["status"] == "failed"
        assert w["error"].startswith("hung: no worker finished a step for"), w["error"]
        assert any(p["status"] == "ok" for p in w["phases"])
    assert not _leftovers(tmp_path)


def test_sigterm_keeps_each_workers_measurements_in_the_partial_run(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "profiler", "run", "--out", str(tmp_path / "runs")),
            *("--workers", "2", "--no-progress", *NO_TRACE, str(LOOP)),
        ],
        cwd=tmp_path,
        env=dict(python_env(), MW_STEPS="1000000"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Each worker writes its trace before its script runs and after every phase: wait
        # until both traces hold a measured timed window.
        from profiler.model import WorkloadTrace

        def timed_ok(path: Path) -> bool:
            rec = WorkloadTrace.load(path).phase("timed")
            return rec is not None and rec.status == "ok"

        deadline = time.monotonic() + 300
        while (
            sum(
                timed_ok(t) for t in (tmp_path / "runs").glob("*.partial/workloads/*/model.json.gz")
            )
            < 2
        ):
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the workers never measured a timed window"
            time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 143, err[-3000:]
    (run,) = (tmp_path / "runs").glob("*.partial")
    doc = json.loads((run / "summary.json").read_text())
    summary.validate(doc)
    assert doc["run"]["status"] == "interrupted"
    ws = doc["workloads"]
    assert [w["slug"] for w in ws] == ["mw_loop.py-worker-0", "mw_loop.py-worker-1"]
    assert [w["worker"]["index"] for w in ws] == [0, 1]
    for w in ws:
        assert w["script"]["steps"] > 0, w["script"]
        assert next(p for p in w["phases"] if p["name"] == "timed")["status"] == "ok"
    assert [x["index"] for x in doc["job"]["workers"]] == [0, 1]
    assert not _leftovers(tmp_path)
