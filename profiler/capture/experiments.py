"""The experiments process: every pair and every sweep size, timed in one process.

Place in the pipeline: ``profiler.processes.launch.run_process`` starts ``python -m
profiler.capture.experiments SPEC.json``; this module builds the loops, warms them, times them in
alternating blocks (a pair: ``profiler.model.blocks.sized_pairs``, as many block pairs as its
saving's interval needs within ``pair_max_s``; the sweep: ``block_medians``) and writes
``experiments.json`` (rewritten after every pair and every sweep workload, so a crash keeps
what was measured).
TF1 graphs are built in their own ``tf.Graph``, so TF1 and TF2 loops share this process.

Output (per-step nanoseconds, per *training* step)::

    {"pairs": [{"name", "baseline", "variant", "status", "error",
                "baseline_ns", "variant_ns", "resolution_ns", "steps": [na, nb],
                "pairs": block pairs timed, "interval_ns": [low, high] of the saving}],
     "sweep": {"<workload>": {"status", "error", "sizes": [...], "median_ns": [...]}}}
"""

from __future__ import annotations

import itertools
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from profiler.capture.loop import Loop
from profiler.capture.schedule import typical_step_ns
from profiler.clock import Clock, now_ns
from profiler.model import median_ns
from profiler.model.blocks import block_medians, measured, sized_pairs
from profiler.workloads.casestudy import PAIRS

RESULT_FILE = "experiments.json"


@dataclass
class ExperimentSpec:
    """What the runner asks the experiments process to do."""

    out_dir: str
    pairs: list[str] = field(default_factory=lambda: [p.id for p in PAIRS])
    sweep_workloads: list[str] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    #: the sweep's blocks, and each block's seconds (pairs and sweep).
    blocks: int = 6
    block_s: float = 0.1
    #: A pair's block pairs stop at this many seconds (``profiler.model.blocks.sized_pairs``).
    pair_max_s: float = 2.0
    warmup_steps: int = 30

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)


def _steps_for(loop: Loop, target_s: float, clock: Clock, warmup: int) -> int:
    """Warm the loop and return the units per block that take about ``target_s``."""
    marks = [clock()]
    loop.run(warmup, marks, clock)
    unit = typical_step_ns([b - a for a, b in itertools.pairwise(marks)])
    return max(5, min(20_000, int(target_s * 1e9 / max(unit, 1))))


def _build(name: str, n: int | None = None) -> Loop:
    from profiler import workloads

    spec = workloads.get(name)
    params = spec.defaults if n is None else spec.defaults.with_(n=n)
    return spec.build(params)


def run(spec: ExperimentSpec, clock: Clock = now_ns, progress: Any = lambda _e: None) -> dict:
    out: dict[str, Any] = {"pairs": [], "sweep": {}}
    path = Path(spec.out_dir) / RESULT_FILE
    loops: dict[str, Loop] = {}

    def save() -> None:
        from profiler.model.atomic import atomic_write_text

        atomic_write_text(path, json.dumps(out, indent=1))

    pairs = [p for p in PAIRS if p.id in spec.pairs]
    total = len(pairs) + len(spec.sweep_workloads)
    for i, pair in enumerate(pairs):
        progress({"workload": "experiments", "phase": pair.name, "done": i, "total": total})
        entry: dict[str, Any] = {
            "id": pair.id,
            "name": pair.name,
            "baseline": pair.baseline,
            "variant": pair.variant,
            "status": "ok",
            "error": "",
        }
        try:
            for name in (pair.baseline, pair.variant):
                if name not in loops:
                    loops[name] = _build(name)
            a, b = loops[pair.baseline], loops[pair.variant]
            sa_n, sb_n = (_steps_for(x, spec.block_s, clock, spec.warmup_steps) for x in (a, b))
            timed = sized_pairs(
                (a.run, b.run),
                (a.work.units_per_step, b.work.units_per_step),
                (sa_n, sb_n),
                clock,
                spec.pair_max_s,
            )
            m = measured(timed.base_steps, timed.var_steps)
            stats = timed.interval_ns()
            entry.update(
                baseline_ns=m.baseline_ns,
                variant_ns=m.variant_ns,
                resolution_ns=m.resolution_ns,
                steps=[len(timed.base_steps), len(timed.var_steps)],
                pairs=timed.pairs,
                interval_ns=None if stats is None else [stats[1], stats[2]],
            )
        except Exception as exc:  # one broken pair must not lose the others
            entry.update(status="failed", error=f"{type(exc).__name__}: {exc}")
        out["pairs"].append(entry)
        save()
    for j, name in enumerate(spec.sweep_workloads):
        progress({"workload": "sweep", "phase": name, "done": len(pairs) + j, "total": total})
        entry = {"status": "ok", "error": "", "sizes": list(spec.sizes), "median_ns": []}
        try:
            sized = [_build(name, n) for n in spec.sizes]
            steps = [_steps_for(x, spec.block_s, clock, spec.warmup_steps) for x in sized]
            per = block_medians(
                [x.run for x in sized],
                [x.work.units_per_step for x in sized],
                blocks=spec.blocks,
                steps_per_block=steps,
                clock=clock,
            )
            entry["median_ns"] = [median_ns(p) for p in per]
            for x in sized:
                x.close()
        except Exception as exc:
            entry.update(status="failed", error=f"{type(exc).__name__}: {exc}")
        out["sweep"][name] = entry
        save()
    progress({"workload": "experiments", "phase": "done", "done": total, "total": total})
    for loop in loops.values():
        loop.close()
    save()
    return out


def main(argv: list[str] | None = None) -> int:
    from profiler.capture.worker import measurement_main

    return measurement_main(lambda text: ExperimentSpec(**json.loads(text)), run, argv)


if __name__ == "__main__":
    sys.exit(main())
