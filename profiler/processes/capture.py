"""``capture grpc://host:port[,...] --duration-ms D``: profile a job already running elsewhere.

Place in the pipeline: called by ``cli`` instead of the runner. Each worker of the job started
TensorFlow's profiler server (``tf.profiler.experimental.server.start(port)``). This asks all of
them at once for ``D`` ms of trace through TensorFlow's own profiler client
(``tf.profiler.experimental.client.trace`` with the comma-separated addresses: XProf's
multi-host capture), then turns each host's ``.xplane.pb`` into one workload of a run folder,
through the same collector as the framework phase (``profiler.capture.collectors.xplane``).

A job profiled from outside has no step markers of ours: each host's steps are the calls of the
``tf.function`` called most often in its capture (``xplane.inferred_steps``). Its timed window
is those steps' wall times, and its attribution comes from the kernels only (the Python side
cannot be measured from outside: it is reported as not measured). The workers are task
``0..N-1`` in the order the addresses are given; the job analysis (``profiler.analysis.job``)
then names the straggler as for ``run --workers``.

Errors: a malformed address or one that does not accept a connection is a ``CaptureError``
(one line, exit status 2) before anything is written; a capture that fails after that keeps
the run folder with what was captured.
"""

from __future__ import annotations

import re
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profiler.capture.collectors import xplane
from profiler.capture.loop import Params, WorkloadSpec
from profiler.model import FAILED, OK, PhaseRecord, Segment, Window, WorkDecl, WorkloadTrace
from profiler.model.records import ClockAlignment, FrameworkData, ProfilerSession, SpanCount
from profiler.processes import rundir
from profiler.processes.launch import MODEL_FILE, RunOptions, WorkloadOutcome

ADDRESS = re.compile(r"^grpc://(?P<host>[A-Za-z0-9.\-]+|\[[0-9A-Fa-f:]+\]):(?P<port>\d{1,5})$")
#: Seconds to wait for each address to accept a connection before the capture.
CONNECT_S = 3.0
#: Capture attempts TensorFlow's client makes (a host that is between steps retries).
ATTEMPTS = 3


class CaptureError(Exception):
    """A bad ``capture`` argument or an address that does not answer (one line, exit 2)."""


@dataclass(frozen=True)
class Address:
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"grpc://{self.host}:{self.port}"

    @property
    def file_stem(self) -> str:
        """The name TensorFlow gives this host's capture file (``host_port``)."""
        return f"{self.host.strip('[]')}_{self.port}"


def parse_addresses(text: str) -> list[Address]:
    out = []
    for part in [p.strip() for p in text.split(",")]:
        m = ADDRESS.match(part)
        if not m or not 0 < int(m.group("port")) < 65536:
            raise CaptureError(
                f"{part or '(empty)'!r} is not an address of the form grpc://host:port"
            )
        addr = Address(m.group("host"), int(m.group("port")))
        if addr in out:
            raise CaptureError(f"{addr.url} is given twice")
        out.append(addr)
    return out


def check_reachable(addresses: list[Address], timeout_s: float = CONNECT_S) -> None:
    """Every address accepts a TCP connection, or ``CaptureError`` naming the first that does
    not."""
    for a in addresses:
        try:
            with socket.create_connection((a.host.strip("[]"), a.port), timeout=timeout_s):
                pass
        except OSError as exc:
            why = exc.strerror or type(exc).__name__
            raise CaptureError(
                f"{a.url} does not answer ({why}): is its profiler server started "
                "(tf.profiler.experimental.server.start(port)) and the address reachable?"
            ) from None


def check_tensorflow() -> None:
    """CaptureError where TensorFlow is not installed: its profiler client does the capture."""
    import importlib.util

    if importlib.util.find_spec("tensorflow") is None:
        raise CaptureError(
            "capturing a running worker needs TensorFlow's profiler client, and TensorFlow is "
            "not installed in this environment (install tensorflow, or the package's tf extra)"
        )


def trace(addresses: list[Address], duration_ms: int, logdir: Path) -> list[Path]:
    """Capture every address at once; the ``.xplane.pb`` files written (a host that sent
    nothing has none)."""
    import tensorflow as tf

    tf.profiler.experimental.client.trace(
        ",".join(a.url for a in addresses),
        str(logdir),
        duration_ms,
        num_tracing_attempts=ATTEMPTS,
    )
    return sorted((logdir / "plugins" / "profile").glob(f"*/*{xplane.XPLANE_SUFFIX}"))


def host_trace(
    index: int, addr: Address, path: Path | None, run_dir: Path, n: int
) -> WorkloadTrace:
    """One host's capture as a workload trace: its inferred steps as the timed window, the
    capture as its framework phase."""
    name = worker_label(index, addr)
    work = WorkDecl(1, 1, 1, 0, 0)
    worker = {"index": index, "count": n, "address": addr.url, "isolation": "captured remotely"}
    script = {"worker": worker}

    def failed(reason: str) -> WorkloadTrace:
        return WorkloadTrace(
            workload=name,
            params={"steps": 1, "n": 1},
            work=work,
            build_ns=0,
            warmup=Window("warmup", (Segment(0, (0,)),)),
            phases=(PhaseRecord("framework", FAILED, reason=reason),),
            status=FAILED,
            error=reason,
            script=script,
        )

    if path is None:
        return failed(f"{addr.url} sent no capture")
    try:
        cap = xplane.parse(path, infer=True)
    except xplane.XPlaneError as exc:
        return failed(str(exc))
    ordered = sorted(cap.steps)
    bounds = tuple([cap.steps[s][0] for s in ordered] + [cap.steps[ordered[-1]][1]])
    window = Window("timed", (Segment(ordered[0], bounds),))
    columns = xplane.step_table(cap)
    spans = xplane.spans(cap, 0)
    session = ProfilerSession(
        options={"remote": True},
        start_ns=0,
        stop_ns=0,
        xplane=str(path.relative_to(run_dir)),
        xplane_bytes=path.stat().st_size,
    )
    how = f"steps: the calls of {cap.inferred}" if cap.inferred else "steps: train markers"
    data = FrameworkData(
        profiler=session,
        steps=columns,
        median_ns=xplane.medians(columns),
        clock=ClockAlignment(0, 0),
        op_table=xplane.op_table(cap),
        notes=(
            f"captured remotely from {addr.url}; {how}",
            "in the steady state TensorFlow traces only the kernels it deems expensive: "
            "kernel time from the capture is a lower bound",
        ),
        spans=SpanCount(len(spans), len({s.step for s in spans}), xplane.MAX_SPANS),
    )
    art = (str(Path("..") / ".." / path.relative_to(run_dir)),)
    return WorkloadTrace(
        workload=name,
        params={"steps": len(ordered), "n": 1},
        work=work,
        build_ns=0,
        warmup=Window("warmup", (Segment(ordered[0], (bounds[0],)),)),
        phases=(
            PhaseRecord("timed", OK, window, reason=f"the capture's {how}"),
            PhaseRecord("framework", OK, window, "", art, spans=spans, data=data),
        ),
        status=OK,
        script=script,
    )


def worker_label(index: int, addr: Address) -> str:
    return f"worker {index} ({addr.host}:{addr.port})"


def _unbuilt(_params: Params) -> Any:
    raise RuntimeError("a captured host is never built")


def run(
    addresses: list[Address], duration_ms: int, out_root: Path, now: float | None = None
) -> Any:
    """Capture ``addresses`` into a new run folder under ``out_root``; a ``RunResult``."""
    from profiler.processes import pipeline

    opts = RunOptions(
        workloads=[],
        params={},
        phases=["framework"],
        out_root=out_root,
        options={"capture_ms": duration_ms, "capture_hosts": len(addresses)},
    )
    started = pipeline.begin(opts, now)
    run_dir = started.partial
    raw = run_dir / "capture"
    raw.mkdir(parents=True, exist_ok=True)
    outcomes: list[WorkloadOutcome] = []
    t0 = time.monotonic_ns()
    try:
        files = trace(addresses, duration_ms, raw)
    except Exception as exc:  # the job stopped answering mid-capture: keep the folder
        started.info.notes.append(f"the capture failed: {str(exc).strip().splitlines()[-1]}")
        files = []
    wall = time.monotonic_ns() - t0
    by_stem = {p.name[: -len(xplane.XPLANE_SUFFIX)]: p for p in files}
    for i, addr in enumerate(addresses):
        slug = rundir.slug(f"worker-{i}")
        wdir = run_dir / "workloads" / slug
        wdir.mkdir(parents=True, exist_ok=True)
        src = by_stem.get(addr.file_stem)
        path = None
        if src is not None:
            # TensorBoard: one run per worker, its capture where the profile plugin looks.
            dest = run_dir / "tensorboard" / slug / "plugins" / "profile" / src.parent.name
            dest.mkdir(parents=True, exist_ok=True)
            path = dest / src.name
            shutil.copyfile(src, path)
        trace_ = host_trace(i, addr, path, run_dir, len(addresses))
        trace_.save(wdir / MODEL_FILE)
        spec = WorkloadSpec(
            name=worker_label(i, addr),
            title=f"{addr.url}, captured for {duration_ms} ms",
            doc="",
            seed="",
            framework="tf2",
            defaults=Params(steps=1, n=1),
            build=_unbuilt,
        )
        outcomes.append(
            WorkloadOutcome(
                spec=spec,
                slug=slug,
                status=trace_.status,
                trace=trace_,
                error=trace_.error,
                wall_ns=wall,
                params=Params(steps=max(int(trace_.params["steps"]), 1), n=1),
            )
        )
    shutil.rmtree(raw, ignore_errors=True)
    return pipeline.finish(started, outcomes)
