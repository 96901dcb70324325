"""Cores in use during the timed steps: the script's thread, the kernels, and the rest.

Place in the pipeline: pure analysis of the timed phase's ``ThreadCpu`` record (captured by
``profiler.capture.threads``), read by the input diagnoses (``profiler.diagnoses.input``).

A step's attribution is of the script's thread: work TensorFlow runs on its own threads shows
only through what it does to that thread (slower kernels, a wait). Here the whole process's CPU
over the timed window is set against the cores it may run on, and split into the main thread's,
the input pipeline's and the rest.

The input pipeline's: the threads started after TensorFlow's runtime started its pools, and
those that ended during the window (``ThreadCpu.late_cpu_ns``). A tf.data iterator starts its
own threads and they end with it (each epoch of ``fit`` makes a new one); the kernels run on
the runtime's pools. Measured in the Keras weather example (2 cores, threads' CPU between its
20th and 60th batch): as written, the iterator's threads used 0.59 core in epoch 1 and 0.72 in
epoch 2, the runtime's pool 0.39 and 0.44; with ``.cache()``, 0.59 in epoch 1 (which fills the
cache) and none in epoch 2, the pool 0.94. Where no runtime thread was found, the other
threads' CPU beyond the kernels' time (the attribution's ``compute`` a step times the steps) is
used instead: a weaker figure (a kernel on several threads uses more CPU than its time, and on
busy cores its time holds waits: 61 ms a step against 28 ms in two runs of that example).
The machine is shared: how busy every core was (``/proc/stat``) says whether the cores were
full when the process alone did not fill them.
"""

from __future__ import annotations

from dataclasses import dataclass

from profiler.model.records import ThreadCpu


@dataclass(frozen=True, slots=True)
class CoreUse:
    """The timed window's CPU, in cores (CPU seconds per second of wall time).

    Attributes:
        cores: the cores the process may run on.
        wall_s: the window's wall time.
        steps: the window's steps.
        busy: every thread of the process.
        main: the script's thread.
        other: every other thread but those Python's ``threading`` started.
        kernels: the kernels' CPU, a lower bound (``kernel_us`` a step over the window).
        beyond: the other threads' CPU beyond ``kernels`` (at least 0).
        busy_share, beyond_share: ``busy`` and ``beyond`` over ``cores``.
        kernel_us: the kernel time per step it was set against.
        beyond_us: ``beyond`` per step, µs of CPU.
        late: the threads started after TensorFlow's runtime started its pools, or ended in
            the window (``ThreadCpu.late_cpu_ns``: tf.data's iterators' threads), None where
            not known.
        machine: every core's busy time, this process and any other (None: not read), over
            ``machine_cores`` (every core of the machine).
    """

    cores: int
    wall_s: float
    steps: int
    busy: float
    main: float
    other: float
    kernels: float
    beyond: float
    busy_share: float
    beyond_share: float
    kernel_us: float
    beyond_us: float
    machine: float | None = None
    machine_cores: int = 0
    late: float | None = None

    @property
    def competing(self) -> float:
        """The cores the input pipeline's threads used: the threads started after TensorFlow's
        runtime (``late``) where known, else the other threads' beyond the kernels."""
        return self.late if self.late is not None else self.beyond

    @property
    def saturated_share(self) -> float:
        """How busy the cores were: the larger of the process's share of its cores and the
        machine's share of all its cores (another process's load takes cores too)."""
        machine = self.machine / self.machine_cores if self.machine and self.machine_cores else 0
        return max(self.busy_share, machine)


def core_use(cpu: ThreadCpu, steps: int, kernel_us: float | None) -> CoreUse | None:
    """The window's core use; None without a window, a step or the kernels' time."""
    if cpu.wall_ns <= 0 or steps <= 0 or kernel_us is None:
        return None
    wall = cpu.wall_ns / 1e9
    cores = max(cpu.usable_cpus or cpu.cpu_count, 1)
    busy = cpu.process_cpu_ns / 1e9 / wall
    # Threads Python started (the profiler's own: its schedule, its memory reads) are not
    # TensorFlow's: left out of the other threads' CPU.
    other = max(cpu.other_cpu_ns - cpu.python_threads_cpu_ns, 0) / 1e9 / wall
    kernels = max(kernel_us, 0.0) * steps / 1e6 / wall
    beyond = max(other - kernels, 0.0)
    return CoreUse(
        cores=cores,
        wall_s=wall,
        steps=steps,
        busy=busy,
        main=cpu.main_cpu_ns / 1e9 / wall,
        other=other,
        kernels=kernels,
        beyond=beyond,
        busy_share=busy / cores,
        beyond_share=beyond / cores,
        kernel_us=kernel_us,
        beyond_us=beyond * wall * 1e6 / steps,
        machine=cpu.machine_busy_ns / 1e9 / wall if cpu.machine_busy_ns is not None else None,
        machine_cores=max(cpu.cpu_count, cores),
        late=cpu.late_cpu_ns / 1e9 / wall if cpu.late_cpu_ns is not None else None,
    )
