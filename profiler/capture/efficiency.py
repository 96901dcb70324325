"""The efficiency process: seed 004's implementations trained on a sample budget, loss logged.

Place in the pipeline: ``profiler.processes.pipeline.run_efficiency`` starts ``python -m
profiler.capture.efficiency SPEC.json`` (like the experiments process); this module builds each
implementation of the case study (``profiler.workloads.casestudy.EFFICIENCY``) once per seed, trains
it for its sample budget and records *checkpoints* on a schedule in samples;
``profiler.analysis.efficiency`` analyses them. ``efficiency.json`` is rewritten atomically after
every run, so a crash or a time-out keeps what was measured.

A checkpoint is the work done so far and the loss on the fixed evaluation set (the full data,
``profiler.workloads.seed004.eval_loss``): samples, updates, epochs (as the implementation defines
them), the optimizer's own step counter, distinct samples seen (cumulative and in the current
epoch), training wall time and the loss. Logging is measured and excluded: time-stamps are taken
around every checkpoint and every coverage observation, and the wall-time axis is the sum of the
training intervals between them. The first update (fit's set-up and graph tracing for Keras) is a
one-off, reported on its own (``first_update_ns``) and not on the axis.

Distinct samples: numpy loops expose the indices of their current batch
(``Loop.probes["batch_indices"]``); the driver runs them one batch at a time and marks those
indices after each batch (outside the timed intervals). Keras's shuffling is internal: ``fit``
draws a fresh permutation of all the data every epoch, so after ``s`` samples it has seen
``min(s, n)`` distinct ones, and ``s mod n`` in the current epoch. That is by construction, not
instrumented. Keras's printed loss (``History``) is recorded per epoch.

Output (``RESULT_FILE``)::

    {"spec": {...}, "status", "error",
     "runs": {"<implementation>": {"framework", "work", "initializer", "budget_samples",
              "seeds": [{"seed", "status", "error", "run_s", "floor", "first_update_ns", "log_ns",
                         "log_points", "observe_ns", "reuse": {"<passes>": count}, "printed",
                         "checkpoints": {"samples": [...], "updates", "epochs", "counter",
                                         "distinct", "distinct_epoch", "wall_ns", "loss"}}]}}}
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from profiler.capture.loop import Loop
from profiler.clock import Clock, now_ns
from profiler.model.studies import COLUMNS, DEFAULT_SEEDS, DEFAULT_TARGET_EXCESS, schedule
from profiler.workloads.casestudy import EFFICIENCY

RESULT_FILE = "efficiency.json"

Progress = Callable[[dict[str, Any]], None]


@dataclass
class EfficiencySpec:
    """What the runner asks the efficiency process to do.

    Attributes:
        out_dir: where ``efficiency.json`` goes.
        implementations: registered workload names, in run order.
        seeds: data, initialisation and shuffling seeds; every implementation runs each.
        n: samples in the data set (the evaluation set is all of them).
        budgets: samples to train, by implementation name or else by framework.
        points: geometric checkpoints per run (plus the reference points and epoch ends).
        ref_samples: the "equal samples" comparison point.
        ref_updates: the "equal updates" comparison point.
        target_excess: the target excess loss over the noise floor.
    """

    out_dir: str
    implementations: list[str] = field(
        default_factory=lambda: [i.name for i in EFFICIENCY.implementations]
    )
    seeds: list[int] = field(default_factory=lambda: list(DEFAULT_SEEDS))
    n: int = 4160
    budgets: dict[str, int] = field(default_factory=lambda: dict(EFFICIENCY.budgets))
    points: int = 200
    ref_samples: int = EFFICIENCY.ref_samples
    ref_updates: int = EFFICIENCY.ref_updates
    target_excess: float = DEFAULT_TARGET_EXCESS

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)


def noise_floor(x: Any, y: Any) -> float:
    """The best MSE any line ``w x + b`` reaches on ``(x, y)``: the exact least-squares fit."""
    import numpy as np

    a = np.stack([x, np.ones_like(x)], axis=1)
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    return float(np.mean((y - a @ coef) ** 2))


class _Recorder:
    """Checkpoint columns of one run, and the logging time spent filling them."""

    COLUMNS = COLUMNS

    def __init__(self, loop: Loop, clock: Clock) -> None:
        self.loop = loop
        self.clock = clock
        self.cols: dict[str, list[Any]] = {c: [] for c in self.COLUMNS}
        self.log_ns = 0
        self.counter = loop.probes.get("optimizer_step", lambda: 0)

    def record(
        self,
        samples: int,
        updates: int,
        epochs: float,
        distinct: int,
        distinct_epoch: int,
        wall_ns: int,
    ) -> None:
        """Evaluate the loss and read the optimizer's counter; the time it takes is logging."""
        t0 = self.clock()
        loss = self.loop.loss()
        counter = int(self.counter())
        c = self.cols
        c["samples"].append(samples)
        c["updates"].append(updates)
        c["epochs"].append(epochs)
        c["counter"].append(counter)
        c["distinct"].append(distinct)
        c["distinct_epoch"].append(distinct_epoch)
        c["wall_ns"].append(wall_ns)
        c["loss"].append(loss)
        self.log_ns += self.clock() - t0


def run_numpy(loop: Loop, n: int, points: list[int], clock: Clock) -> dict[str, Any]:
    """Train a numpy loop one batch at a time up to ``points[-1]`` samples, checkpointing.

    A "batch" is the unit whose indices ``batch_indices`` names and that the loop consumes
    whole: 32 single-sample steps for the seed's loop (one of its epochs), one step for
    mini-batch loops. After each batch its indices are marked seen (timed, excluded).
    """
    import itertools

    import numpy as np

    work = loop.work
    batch = int(loop.probes["batch_size"])
    if batch % work.samples_per_step:
        raise ValueError(f"batch {batch} is not a whole number of steps")
    per_batch = batch // work.samples_per_step
    indices: Callable[[], Any] = loop.probes["batch_indices"]
    step = loop.step
    rec = _Recorder(loop, clock)
    seen = np.zeros(n, dtype=bool)
    seen_epoch = np.zeros(n, dtype=bool)
    distinct = distinct_epoch = 0
    reuse: dict[int, int] = {}
    last: Any = None
    passes = 0
    observe_ns = 0
    epoch_of_last = 0
    rec.record(0, 0, 0.0, 0, 0, 0)
    pending = [p for p in points if p > 0]
    done = train_ns = first_ns = 0
    while pending:
        k = per_batch - done % per_batch  # steps that finish the current batch
        t0 = clock()
        if done == 0:
            # The first update alone is a one-off (first cost evaluation, first-use imports):
            # reported as first_update_ns, not on the wall-time axis.
            step()
            t1 = clock()
            first_ns, t0, k, done = t1 - t0, t1, k - 1, 1
        for _ in itertools.repeat(None, k):
            step()
        train_ns += clock() - t0
        done += k
        # Coverage: which samples the batch just finished touched (excluded from the axis).
        t0 = clock()
        idx = indices()
        epoch = (done - 1) // work.steps_per_epoch
        if epoch != epoch_of_last:
            seen_epoch[:] = False
            epoch_of_last = epoch
        seen[idx] = True
        seen_epoch[idx] = True
        if idx is last:
            passes += 1
        else:
            if last is not None:
                reuse[passes] = reuse.get(passes, 0) + 1
            last, passes = idx, 1
        samples = done * work.samples_per_step
        if samples >= pending[0]:
            distinct = int(seen.sum())
            distinct_epoch = int(seen_epoch.sum())
        observe_ns += clock() - t0
        if samples >= pending[0]:
            while pending and pending[0] <= samples:
                pending.pop(0)
            rec.record(
                samples,
                done * work.updates_per_step,
                done / work.steps_per_epoch,
                distinct,
                distinct_epoch,
                train_ns,
            )
    return {
        "first_update_ns": first_ns,
        "log_ns": rec.log_ns,
        "observe_ns": observe_ns,
        # Batches still in use at the end are not counted: their reuse is not over.
        "reuse": {str(k): v for k, v in sorted(reuse.items())},
        "printed": None,
        "checkpoints": rec.cols,
    }


def run_keras(loop: Any, n: int, points: list[int], clock: Clock) -> dict[str, Any]:
    """Train a ``KerasLoop`` with one ``fit`` call up to ``points[-1]`` samples, checkpointing.

    A callback counts batches and records a checkpoint at the end of each batch that reaches
    the next point; the rest of the batches cost it an increment and a comparison. ``fit``'s
    History gives the printed (running-mean) loss per epoch.
    """
    import keras

    batch = int(loop.probes["batch_size"])
    per_epoch = -(-n // batch)
    rec = _Recorder(loop, clock)
    rec.record(0, 0, 0.0, 0, 0, 0)
    log_before_fit = rec.log_ns
    pending = [p for p in points if p > 0]
    epochs = -(-pending[-1] // n)
    state = {"batches": 0, "start": 0, "first_end": 0}

    def samples_after(batches: int) -> int:
        e, j = divmod(batches, per_epoch)
        return e * n + min(n, j * batch)

    class Checkpoints(keras.callbacks.Callback):
        def on_train_batch_end(self, batch_index: int, logs: Any = None) -> None:
            state["batches"] += 1
            b = state["batches"]
            if b == 1:
                state["first_end"] = clock()
            s = samples_after(b)
            if pending and s >= pending[0]:
                t = clock()
                while pending and pending[0] <= s:
                    pending.pop(0)
                # Training time since the first update ended, minus the logging since then.
                wall = t - state["first_end"] - (rec.log_ns - log_before_fit)
                rec.record(s, b, b / per_epoch, min(s, n), s - (b - 1) // per_epoch * n, wall)

    state["start"] = clock()
    history = loop.model.fit(
        loop.x, loop.y, batch_size=batch, epochs=epochs, verbose=0, callbacks=[Checkpoints()]
    )
    loop.steps_done += state["batches"]
    printed = [float(v) for v in history.history.get("loss", [])]
    return {
        "first_update_ns": state["first_end"] - state["start"],
        "log_ns": rec.log_ns,
        "observe_ns": 0,
        "reuse": {"1": state["batches"]},
        "printed": {"kind": "running_mean", "per_epoch": printed},
        "checkpoints": rec.cols,
    }


def budget_for(name: str, framework: str, spec: EfficiencySpec) -> int:
    """The sample budget (by name, else by framework), rounded up to whole epochs of ``fit``
    (n samples), so every run ends on an epoch boundary of every loop's own epochs."""
    budget = spec.budgets.get(name, spec.budgets.get(framework))
    if budget is None:
        raise KeyError(f"no budget for {name} ({framework})")
    return -(-budget // spec.n) * spec.n


def measure(name: str, seed: int, spec: EfficiencySpec, clock: Clock = now_ns) -> dict[str, Any]:
    """One run of implementation ``name`` with ``seed``: its checkpoints and run facts.

    Also returns the loop's declared ``work`` and ``initializer`` (the same for every seed).
    """
    from profiler import workloads
    from profiler.workloads import seed004

    wspec = workloads.get(name)
    loop = wspec.build(wspec.defaults.with_(n=spec.n, seed=seed))
    try:
        budget = budget_for(name, wspec.framework, spec)
        work = loop.work
        batch = int(loop.probes["batch_size"])
        per_update = work.samples_per_step // work.updates_per_step
        extra = [spec.ref_samples, spec.ref_updates * per_update]
        if wspec.framework == "keras":
            extra += list(range(spec.n, budget + 1, spec.n))  # epoch ends: the printed loss
        points = schedule(budget, spec.points, batch, extra)
        runner = run_keras if wspec.framework == "keras" else run_numpy
        out = runner(loop, spec.n, points, clock)
        out["floor"] = noise_floor(*seed004.data(spec.n, seed))
        out["work"] = {
            "samples_per_step": work.samples_per_step,
            "updates_per_step": work.updates_per_step,
            "steps_per_epoch": work.steps_per_epoch,
            "flops_per_step": work.flops_per_step,
            "batch_size": batch,
        }
        out["initializer"] = str(loop.probes.get("initializer", "zeros"))
        return out
    finally:
        loop.close()


def run(spec: EfficiencySpec, clock: Clock = now_ns, progress: Progress = lambda _e: None) -> dict:
    """Every implementation for every seed; ``efficiency.json`` rewritten after each run."""
    from profiler.model.atomic import atomic_write_text

    out: dict[str, Any] = {"spec": asdict(spec), "runs": {}}
    path = Path(spec.out_dir) / RESULT_FILE

    def save() -> None:
        atomic_write_text(path, json.dumps(out, indent=None, separators=(",", ":")))

    total = len(spec.implementations) * len(spec.seeds)
    done = 0
    from profiler import workloads

    for name in spec.implementations:
        framework = workloads.get(name).framework
        entry: dict[str, Any] = {
            "framework": framework,
            "budget_samples": budget_for(name, framework, spec),
            "work": None,
            "initializer": None,
            "seeds": [],
        }
        out["runs"][name] = entry
        for seed in spec.seeds:
            progress(
                {
                    "workload": "efficiency",
                    "phase": f"{name} seed {seed}",
                    "done": done,
                    "total": total,
                }
            )
            run_entry: dict[str, Any] = {"seed": seed, "status": "ok", "error": ""}
            t0 = clock()
            try:
                result = measure(name, seed, spec, clock)
                entry["work"] = result.pop("work")
                entry["initializer"] = result.pop("initializer")
                run_entry.update(result)
            except Exception as exc:  # one broken run must not lose the others
                run_entry.update(status="failed", error=f"{type(exc).__name__}: {exc}")
            # The whole run in this process: build, training, logging, one-offs.
            run_entry["run_s"] = round((clock() - t0) / 1e9, 3)
            entry["seeds"].append(run_entry)
            done += 1
            save()
    progress({"workload": "efficiency", "phase": "done", "done": total, "total": total})
    save()
    return out


def main(argv: list[str] | None = None) -> int:
    from profiler.capture.worker import measurement_main

    return measurement_main(lambda text: EfficiencySpec(**json.loads(text)), run, argv)


if __name__ == "__main__":
    sys.exit(main())
