"""``make bench`` on scripts: what profiling a script costs, and whether every phase ran.

Place in the pipeline: a benchmark, run by ``profiler.bench`` (``--scripts``). For each script
of a corpus (default: the real-world corpus in ``tests/realworld`` and the seed-000 scripts), it
measures, one after the other on the same machine:

* the script alone (``python script.py``), its wall time;
* the script under ``python -m profiler run`` with default options, its wall time, the phases
  that ran, and the time from the script's start to its first step;
* the script under ``--phases timed`` (no start-up capture), for the start-up capture's cost:
  the time to the first step with the capture over the time without it.

It prints one row per script against the goals: profiled within the re-run budget
(``profiler.processes.rerun``: 3× alone + 20 s under 30 s alone, 1.5× + 15 s from there), the
runs of the script it took, every phase that applies measured; the start-up capture under 10%
of the time before the first step. Figures, never a failure.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profiler.processes import rerun

RATIO_GOAL, SLACK_GOAL_S = rerun.LONG_BUDGET
STARTUP_GOAL = 0.10
REPO = Path(__file__).resolve().parent.parent
#: Scripts that need options to run (their header says so), by file name; the eager corpus
#: script gets --whatif all, so its what-if (tf.function) is measured too.
OPTIONS = {
    "seed000_tf1.py": ["--tf1", "--max-steps", "2000"],
    "tf2_eager_tensorboard.py": ["--whatif", "all"],
}
#: Options that only add a what-if: the script still runs alone as it is.
WHATIF_ONLY = {"tf2_eager_tensorboard.py"}
#: A what-if's saving against the same fix written into the script by hand (the corpus's
#: fixed copies, ``manifest.json``: ``pathology_cost_us``): within this share.
HAND_GOAL = 0.15
#: The corpus script whose hand-fixed copy is each what-if's fix.
HAND_FIXED = {
    "tensor_args": "tf_function_retracing.py",
    "eager_function": "tf2_eager_tensorboard.py",
}


@dataclass
class Row:
    script: str
    alone_s: float | None
    profiled_s: float | None
    steps: int | None
    ran: list[str]
    applies: list[str]
    missed: list[str]
    to_first_ms: float | None
    to_first_plain_ms: float | None
    error: str = ""
    whatifs: tuple[dict[str, Any], ...] = ()
    runs: int = 1

    @property
    def ratio(self) -> float | None:
        if self.alone_s and self.profiled_s:
            return self.profiled_s / self.alone_s
        return None

    @property
    def meets_time(self) -> bool | None:
        if self.alone_s is None or self.profiled_s is None:
            return None
        # A run for the sampled or framework phase may go past the budget.
        return self.profiled_s <= (
            rerun.budget_for(rerun.CORE, rerun.budget_s(self.alone_s), self.alone_s) or 0.0
        )

    @property
    def startup_cost(self) -> float | None:
        if self.to_first_ms and self.to_first_plain_ms:
            return self.to_first_ms / self.to_first_plain_ms - 1
        return None


def default_corpus() -> list[Path]:
    """The real-world corpus (``manifest.json``'s order) and the seed-000 scripts."""
    corpus = REPO / "tests" / "realworld"
    out: list[Path] = []
    manifest = corpus / "manifest.json"
    if manifest.is_file():
        out = [corpus / m["file"] for m in json.loads(manifest.read_text())]
    elif corpus.is_dir():
        out = sorted(corpus.glob("*.py"))
    short = sorted((REPO / "tests" / "data" / "short").glob("*.py"))
    return [*short, *out, REPO / "tests" / "data" / "seed000_tf1.py"]


def _run(args: list[str], cwd: Path, timeout: float) -> tuple[float, int]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    t0 = time.monotonic()
    proc = subprocess.run(
        args,
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=timeout,
        check=False,
    )
    return time.monotonic() - t0, proc.returncode


def _profiled(
    script: Path, cwd: Path, extra: list[str], timeout: float
) -> tuple[float, dict[str, Any]]:
    out = cwd / "runs"
    wall, _code = _run(
        [sys.executable, "-m", "profiler", "run", "--out", str(out), *extra, str(script)],
        cwd,
        timeout,
    )
    doc = json.loads((out / "latest" / "summary.json").read_text())
    return wall, doc["workloads"][0]


def measure(script: Path, timeout: float = 900.0) -> Row:
    """One script: alone, profiled with defaults, and with the timed phase only."""
    opts = OPTIONS.get(script.name, [])
    with tempfile.TemporaryDirectory(prefix="tlp-bench-") as tmp:
        cwd = Path(tmp)
        try:
            alone = None
            if not opts or script.name in WHATIF_ONLY:  # one that needs options does not run alone
                alone, code = _run([sys.executable, str(script)], cwd, timeout)
                if code != 0:
                    return Row(
                        script.name, None, None, None, [], [], [], None, None, f"alone: exit {code}"
                    )
            wall, w = _profiled(script, cwd, opts, timeout)
            _plain_wall, plain = _profiled(script, cwd, [*opts, "--phases", "timed"], timeout)
        except (subprocess.TimeoutExpired, OSError, ValueError, KeyError) as exc:
            return Row(script.name, None, None, None, [], [], [], None, None, str(exc)[:120])
    phases = w.get("phases", [])
    ran = [p["name"] for p in phases if p["status"] == "ok"]
    applies = [p["name"] for p in phases if p["status"] != "skipped" or p.get("missed")]
    missed = [p["name"] for p in phases if p.get("missed")]
    first = (w.get("one_off") or {}).get("build_ms")
    first_plain = (plain.get("one_off") or {}).get("build_ms")
    return Row(
        script.name,
        alone,
        wall,
        (w.get("script") or {}).get("steps"),
        ran,
        applies,
        missed,
        first,
        first_plain,
        whatifs=tuple(w.get("whatif") or ()),
        runs=len((w.get("script") or {}).get("runs") or [None]),
    )


def whatif_table(rows: list[Row]) -> str:
    """Every what-if measured: predicted against measured, and against the hand-written fix."""
    truths = _hand_fixed()
    lines = [
        "what-ifs (goals: measured within max(25%, 3 µs) of predicted; within "
        f"{HAND_GOAL:.0%} of the same fix written by hand, where the corpus has it):",
        f"  {'script':30s} {'what-if':15s} {'predicted µs':>12s} {'measured µs':>12s} "
        f"{'±':>7s} {'verdict':>13s} {'by hand µs':>10s} {'vs hand':>8s}",
    ]
    for r in rows:
        for x in r.whatifs:
            hand = truths.get(x["id"]) if HAND_FIXED.get(x["id"]) == r.script else None
            m = x["measured_saving_us"]
            vs = f"{100 * (m - hand) / hand:+.0f}%" if hand and m is not None else "-"
            lines.append(
                f"  {r.script[:30]:30s} {x['id'][:15]:15s} {_f(x['predicted_saving_us'], '12.1f')} "
                f"{_f(m, '12.1f')} {_f(x['resolution_us'], '7.1f')} {x['verdict']:>13s} "
                f"{_f(hand, '10.1f')} {vs:>8s}"
            )
    if len(lines) == 2:
        lines.append("  (none ran)")
    return "\n".join(lines)


def _hand_fixed() -> dict[str, float]:
    """The pathology's cost per step, measured by the corpus's broken and fixed copies."""
    path = REPO / "tests" / "realworld" / "manifest.json"
    try:
        entries = {e["file"]: e for e in json.loads(path.read_text())}
    except (OSError, ValueError):
        return {}
    out = {}
    for key, script in HAND_FIXED.items():
        cost = ((entries.get(script) or {}).get("truth") or {}).get("pathology_cost_us")
        if cost:
            out[key] = float(cost)
    return out


def table(rows: list[Row]) -> str:
    lines = [
        "scripts, default options (goals: profiled within the re-run budget, 3× alone + 20 s "
        f"under {rerun.SHORT_S:g} s alone, {RATIO_GOAL}× + {SLACK_GOAL_S:g} s from there, "
        f"{rerun.CORE_EXTRA_S:g} s more for a run of the kernels or the samples, and at least "
        f"{rerun.CORE_FACTOR:g}× + {rerun.CORE_EXTRA_S:g} s up to {rerun.CORE_LONGEST_S:g} s "
        "alone; every "
        f"phase that applies measured; start-up capture < {STARTUP_GOAL:.0%} of the time to the "
        "first step):",
        f"  {'script':34s} {'alone s':>8s} {'profiled s':>10s} {'ratio':>6s} {'time':>5s} "
        f"{'runs':>4s} {'steps':>7s} {'phases':>7s} {'start-up':>9s}  missed",
    ]
    for r in rows:
        if r.error:
            lines.append(f"  {r.script[:34]:34s} error: {r.error}")
            continue
        complete = not r.missed
        cost = r.startup_cost
        lines.append(
            f"  {r.script[:34]:34s} {_f(r.alone_s, '8.1f')} {_f(r.profiled_s, '10.1f')} "
            f"{_f(r.ratio, '6.2f')} {_ok(r.meets_time):>5s} {r.runs:>4d} {_f(r.steps, '7d')} "
            f"{len(r.ran):>3d}/{len(r.applies):<3d} "
            f"{_f(cost * 100 if cost is not None else None, '8.1f')}%  "
            f"{', '.join(r.missed) or '-'}" + ("" if complete else "  !")
        )
    return "\n".join(lines)


def _f(v: float | int | None, spec: str) -> str:
    width = int(re.match(r"\d*", spec).group() or 0)  # type: ignore[union-attr]
    return "-".rjust(width) if v is None else format(v, spec)


def _ok(v: bool | None) -> str:
    return "-" if v is None else ("ok" if v else "MISS")


def main(paths: list[Path]) -> str:
    rows = []
    for path in paths:
        print(f"  ... {path.name}", file=sys.stderr, flush=True)
        rows.append(measure(path.resolve()))  # each run's folder is a temporary one
    return table(rows) + "\n\n" + whatif_table(rows)
