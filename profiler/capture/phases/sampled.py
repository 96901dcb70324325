"""The sampled phase: py-spy attached to the workload's own process for one window of steps.

Place in the pipeline: runs inside the measured process (``profiler.capture.worker``, or a
script's) after the timed phase. ``install`` starts ``py-spy record --pid <this process>`` and
waits until py-spy says it is sampling; the re-warm steps and the window run; ``remove`` stops
py-spy with SIGINT (it writes its file on Ctrl-C) and hands the capture to
``profiler.capture.collectors.pyspy``, which yields the phase's ``Sample`` stacks.
Classification, shares, the collapsed stacks and the flame graph come later, in the parent
(``profiler.analysis.sampling``, ``profiler.reports.flamegraph``).

Policy (numbers measured on this project's machine; profiler/docs/measuring.md, "Sampled and lines
phases: Python-level tracing"):

* rate: ``sample_rate`` option (``--sample-rate``), default ``DEFAULT_RATE_HZ``;
* ``--native`` on workloads without TensorFlow only (numpy: ~1.2x slower steps, and the only
  way to tell ufunc kernels from dispatch); never with TensorFlow loaded (~75x). Option
  ``sample_native``: ``auto`` (default) or ``off``;
* ``--idle`` always: the main thread blocked in TensorFlow's session call releases the GIL and
  would otherwise be dropped (~15% of samples); a numpy loop asleep or waiting on a loader
  thread's queue is idle too (a loop sleeping 3 ms of its 3.5 ms steps read "Python 52%,
  dispatch 26%, compute 22%" from the samples of the other 0.5 ms without it);
* blocking sampling (py-spy pauses the process for each sample; ``--nonblocking`` can read torn
  stacks and cannot be combined with ``--native``). Option ``sample_nonblocking``.

Where py-spy is missing or cannot attach (ptrace forbidden, as in many containers) the phase is
unavailable with the reason and the fix; the run goes on with everything else.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from profiler.capture.collectors import pyspy
from profiler.capture.loop import WorkloadSpec
from profiler.capture.phases import Budget, Phase, PhaseContext, PhaseUnavailable
from profiler.model import OK, PhaseRecord, Sample, Window
from profiler.model.records import PySpyReport, SampledData

#: Default sampling rate. Measured on the seed workloads (profiler/docs/measuring.md, "Sampled and
#: lines
#: phases: Python-level tracing"): blocking py-spy at 100 Hz
#: costs ≤ 10% per step without --native; every sample pauses every thread of the process,
#: so the cost grows with the rate and with TensorFlow's thread count.
DEFAULT_RATE_HZ = 100
SPEEDSCOPE_FILE = "pyspy.speedscope.json"
LOG_FILE = "pyspy.log"
ATTACH_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 60.0
#: What py-spy prints (stdout) once its sampler has attached and sampling begins.
ATTACHED_LINE = "Sampling process"

#: prctl(2) constants for Yama: let another process (py-spy, our child) ptrace this one.
PR_SET_PTRACER = 0x59616D61
PR_SET_PTRACER_ANY = ctypes.c_ulong(-1).value

PTRACE_FIX = (
    "run as root, or `sudo sysctl kernel.yama.ptrace_scope=0`, or give the container "
    "CAP_SYS_PTRACE (docker run --cap-add SYS_PTRACE)"
)


def find_pyspy() -> str | None:
    """The py-spy executable: next to this interpreter (a virtualenv's bin) or on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("py-spy")


def ptrace_scope() -> str | None:
    """``kernel.yama.ptrace_scope`` (0 = classic, 1 = descendants only, ...), None if no Yama."""
    try:
        return Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip()
    except OSError:
        return None


def set_ptracer(value: int) -> bool:
    """``prctl(PR_SET_PTRACER, value)``: who may ptrace this process under Yama scope 1.

    py-spy is our *child*, and Yama's scope 1 lets a process trace only its descendants, so
    before spawning it the workload process names it (or any process) as its tracer; 0 resets.
    Best effort: without Yama (or off Linux) the call fails harmlessly and False is returned.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        rc = libc.prctl(
            ctypes.c_int(PR_SET_PTRACER),
            ctypes.c_ulong(value),
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
        )
    except (OSError, AttributeError):
        return False
    return rc == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def unavailable_reason(log_text: str, pid: int, returncode: int | None) -> str:
    """Why py-spy could not start sampling ``pid``, and the fix, from what it printed."""
    low = log_text.lower()
    last = next((ln.strip() for ln in reversed(log_text.splitlines()) if ln.strip()), "")
    if any(k in low for k in ("permission denied", "operation not permitted", "eperm")):
        scope = ptrace_scope()
        why = (
            f"kernel.yama.ptrace_scope={scope}"
            if scope is not None
            else "this process lacks CAP_SYS_PTRACE"
        )
        return (
            f"py-spy cannot attach to the workload process (pid {pid}): ptrace is not "
            f"permitted ({why}); {PTRACE_FIX}"
        )
    gone = ("no such process", "no such file", "check that the process is running")
    if any(k in low for k in gone) or not _alive(pid):
        return (
            f"py-spy cannot attach: process {pid} is not running (it exited before sampling "
            "began); sample a live process"
        )
    status = "still starting" if returncode is None else f"exited with status {returncode}"
    return (
        f"py-spy {status} before sampling began: {last or 'no output'}; check that py-spy "
        "supports this Python and see pyspy.log in the workload's folder"
    )


@dataclass
class Capture:
    """A running ``py-spy record`` and where it writes.

    Attributes:
        proc: the py-spy process.
        output: the capture file it writes when stopped.
        log: its stdout and stderr.
        command: the command line, for the record.
        attached_ns: when it reported sampling (``time.monotonic_ns``).
    """

    proc: subprocess.Popen[bytes]
    output: Path
    log: Path
    command: list[str]
    attached_ns: int = 0
    _log_fh: IO[bytes] | None = field(default=None, repr=False)

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""


def start(
    pid: int,
    output: Path,
    log: Path,
    *,
    rate_hz: int = DEFAULT_RATE_HZ,
    native: bool = False,
    idle: bool = False,
    nonblocking: bool = False,
    timeout_s: float = ATTACH_TIMEOUT_S,
    exe: str | None = None,
) -> Capture:
    """Start ``py-spy record`` on ``pid`` (speedscope format) and wait until it samples.

    Raises:
        PhaseUnavailable: py-spy is missing, cannot attach (ptrace forbidden, process gone),
            or does not start sampling within ``timeout_s``; the message gives the fix.
    """
    exe = exe or find_pyspy()
    if exe is None:
        raise PhaseUnavailable(
            f"py-spy is not installed (looked next to {sys.executable} and on PATH); "
            "`pip install py-spy` (a dependency in pyproject.toml)"
        )
    command = [
        exe,
        "record",
        "--pid",
        str(pid),
        "--rate",
        str(int(rate_hz)),
        "--format",
        "speedscope",
        "--output",
        str(output),
        "--full-filenames",
    ]
    command += ["--idle"] * idle + ["--native"] * native + ["--nonblocking"] * nonblocking
    output.unlink(missing_ok=True)
    log_fh = open(log, "wb")  # noqa: SIM115 - closed in stop()/kill()
    if pid == os.getpid():
        set_ptracer(PR_SET_PTRACER_ANY)
    try:
        proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log_fh, stderr=subprocess.STDOUT
        )
    except OSError as exc:
        log_fh.close()
        raise PhaseUnavailable(f"py-spy could not be started ({exc}); reinstall py-spy") from exc
    cap = Capture(proc=proc, output=output, log=log, command=command, _log_fh=log_fh)
    deadline = time.monotonic() + timeout_s
    while True:
        if ATTACHED_LINE in cap.log_text():
            cap.attached_ns = time.monotonic_ns()
            return cap
        if proc.poll() is not None or time.monotonic() > deadline:
            returncode = proc.poll()
            kill(cap)
            raise PhaseUnavailable(unavailable_reason(cap.log_text(), pid, returncode))
        time.sleep(0.005)


def stop(cap: Capture, timeout_s: float = STOP_TIMEOUT_S) -> PySpyReport:
    """Stop py-spy with SIGINT (it then writes its file) and return what it reported.

    Raises:
        RuntimeError: py-spy had already exited, did not stop in time, or wrote nothing.
    """
    early = cap.proc.poll()
    if early is None:
        cap.proc.send_signal(signal.SIGINT)
        try:
            cap.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill(cap)
            raise RuntimeError(f"py-spy did not stop within {timeout_s:g} s of SIGINT") from None
    _close(cap)
    text = cap.log_text()
    if early is not None or not cap.output.exists():
        tail = " | ".join(text.strip().splitlines()[-3:])
        when = "during the window" if early is not None else "without writing its file"
        raise RuntimeError(f"py-spy exited {when} (status {cap.proc.returncode}): {tail}")
    counts: dict[str, int] = {}
    for line in text.splitlines():
        if "Samples:" in line:
            parts = line.replace(":", " ").split()
            for key in ("Samples", "Errors"):
                if key in parts:
                    with contextlib.suppress(IndexError, ValueError):
                        counts[key.lower()] = int(parts[parts.index(key) + 1])
    return PySpyReport(cap.proc.returncode, counts.get("samples"), counts.get("errors"))


def kill(cap: Capture) -> None:
    """Stop py-spy at once (after a failure); nothing is parsed."""
    if cap.proc.poll() is None:
        cap.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            cap.proc.wait(timeout=10)
    _close(cap)


def _close(cap: Capture) -> None:
    if cap._log_fh is not None:
        cap._log_fh.close()
        cap._log_fh = None
    set_ptracer(0)


#: Frameworks with large native libraries and many threads: py-spy's ``--native`` unwinds their
#: stacks at a ruinous cost (~75x measured on TensorFlow), so it is never used once one is loaded.
HEAVY_FRAMEWORKS = ("tensorflow", "torch", "jax")


def heavy_framework_loaded() -> str | None:
    """The first of ``HEAVY_FRAMEWORKS`` this process has imported (or is importing), if any."""
    return next((name for name in HEAVY_FRAMEWORKS if name in sys.modules), None)


def _uses_tensorflow(spec: WorkloadSpec) -> bool:
    # A user script's framework is unknown up front: what the process has loaded decides, at
    # the moment the capture starts.
    return spec.uses_tensorflow or heavy_framework_loaded() is not None


#: Main-thread samples a script's sampled phase needs in all, its runs' together (a share's
#: 95% interval is then at most ±14 points, 1.96 * sqrt(0.25 / 50)): with fewer, the phase is
#: thin and the script runs again within its budget, its samples added to these
#: (``combine``). A 20,000-step numpy loop of ~0.25 s got 8 samples beside two other processes.
ENOUGH_SAMPLES = 50


def main_samples(samples: tuple[Sample, ...]) -> int:
    """The main thread's samples (py-spy samples it every tick, idle or not)."""
    return sum(s.count for s in samples if s.thread in (pyspy.MAIN_THREAD, ""))


def combine(first: PhaseRecord, again: PhaseRecord, note: str) -> PhaseRecord:
    """``first`` with ``again``'s samples added (another run of the same script and steps):
    shares count every sample; the window, the reference blocks and the settings stay
    ``first``'s. Still thin while the main thread's samples are under ``ENOUGH_SAMPLES``."""
    samples = first.samples + again.samples
    data = first.data
    if isinstance(data, SampledData) and isinstance(again.data, SampledData):
        data = dataclasses.replace(
            data,
            samples=data.samples + again.data.samples,
            capture_s=round(data.capture_s + again.data.capture_s, 3),
        )
    n = main_samples(samples)
    return dataclasses.replace(
        first,
        samples=samples,
        data=data,
        artefacts=first.artefacts + again.artefacts,
        reason=f"{first.reason}; {note}" if first.reason else note,
        missed=n < ENOUGH_SAMPLES,
    )


class SampledPhase(Phase):
    """py-spy over one window (see the module docstring); its record is a ``SampledData``.

    The phase's slow-down is in the summary (``phases[].inflation``); the collapsed stacks and
    the flame graph are rendered from its samples after the run (``profiler.reports``).
    """

    name = "sampled"

    def __init__(
        self,
        budget: Budget,
        options: dict[str, Any] | None = None,
        files: tuple[str, str] = (SPEEDSCOPE_FILE, LOG_FILE),
    ) -> None:
        super().__init__(budget)
        #: Options given to this phase itself; they win over the run's (``ctx.options``).
        self.options = dict(options or {})
        #: py-spy's output and log file names in the workload's folder.
        self.files = files
        self.capture: Capture | None = None
        self.settings: SampledData | None = None

    def settings_for(self, ctx: PhaseContext) -> SampledData:
        """Rate, native, idle and nonblocking for this workload, from the options and policy."""
        opts = {**ctx.options, **self.options}
        rate = int(opts.get("sample_rate") or DEFAULT_RATE_HZ)
        if rate <= 0:
            raise ValueError(f"sample_rate must be positive, got {rate}")
        tf = _uses_tensorflow(ctx.spec)
        want = str(opts.get("sample_native", "auto"))
        if tf:
            loaded = heavy_framework_loaded() or "TensorFlow"
            native, note = False, f"off: {loaded} is loaded (--native costs ~75x there)"
        elif want == "off":
            native, note = False, "off: sample_native=off"
        else:
            native, note = True, "on: no TensorFlow (~1.2x); separates ufunc kernels from dispatch"
        nonblocking = bool(opts.get("sample_nonblocking", False)) and not native
        return SampledData(
            rate_hz=rate, native=native, native_note=note, idle=True, nonblocking=nonblocking
        )

    def install(self, ctx: PhaseContext) -> None:
        self.settings = s = self.settings_for(ctx)
        ctx.workload_dir.mkdir(parents=True, exist_ok=True)
        self.capture = start(
            os.getpid(),
            ctx.workload_dir / self.files[0],
            ctx.workload_dir / self.files[1],
            rate_hz=s.rate_hz,
            native=s.native,
            idle=s.idle,
            nonblocking=s.nonblocking,
        )

    def remove(self, ctx: PhaseContext, window: Window) -> PhaseRecord:
        cap, settings = self.capture, self.settings
        if cap is None or settings is None:
            raise RuntimeError("sampled phase removed without being installed")
        self.capture = None
        reported = stop(cap)
        capture_ns = time.monotonic_ns() - cap.attached_ns
        samples = pyspy.read_speedscope(cap.output, main_tid=os.getpid())
        return PhaseRecord(
            name=self.name,
            status=OK,
            window=window,
            artefacts=self.files,
            samples=samples,
            data=dataclasses.replace(
                settings,
                pid=os.getpid(),
                capture_s=round(capture_ns / 1e9, 3),
                samples=sum(s.count for s in samples),
                pyspy=reported,
                command=shlex.join(["py-spy", *cap.command[1:]]),
            ),
        )

    def abort(self, ctx: PhaseContext) -> None:
        if self.capture is not None:
            kill(self.capture)
            self.capture = None
