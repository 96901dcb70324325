"""``make bench`` on multi-worker jobs: a step's time and split for 1 and 2 workers, and
whether an injected straggler is found and its delay attributed to it.

Place in the pipeline: a benchmark, run by ``profiler.bench`` (``--jobs``). Two programs under
``MultiWorkerMirroredStrategy`` (``tests/data/mw_loop.py``: the seed-000 linear regression as
a custom loop, and a small Keras model in a custom loop: Keras 3's ``fit`` takes no
MultiWorkerMirroredStrategy batches on TF 2.21), each profiled with ``run --workers N``:

* 1 worker, 2 workers, and 2 workers with worker 1 sleeping ``DELAY_MS`` after every step;
* per run: each worker's step time and its communication share;
* with the straggler: the worker the job analysis names, and the delay it attributes to it
  (the straggler's category excess, ``job.reason_us``, and its busy-time excess) against the
  injected delay; goal: within 20%.

On two cores the workers share the machine: the figures are ratios within one run, never
absolute speeds. Figures, never a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
LOOP = REPO / "tests" / "data" / "mw_loop.py"
DELAY_MS = 10.0
GOAL = 0.20
PROGRAMS = {
    "seed-000 regression (custom loop)": {},
    "Keras Dense model (custom loop)": {"MW_KERAS": "1"},
}
STEPS = "600"


def _run(workers: int, env: dict[str, str], out: Path) -> dict[str, Any] | None:
    run_env = dict(os.environ, MW_STEPS=STEPS, TF_CPP_MIN_LOG_LEVEL="2", **env)
    run_env["PYTHONPATH"] = str(REPO) + os.pathsep + run_env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "profiler",
            "run",
            "--workers",
            str(workers),
            "--out",
            str(out),
            str(LOOP),
        ],
        env=run_env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    latest = out / "latest" / "summary.json"
    if proc.returncode not in (0, 1) or not latest.is_file():
        return None
    return json.loads(latest.read_text())  # type: ignore[no-any-return]


def _split(w: dict[str, Any]) -> str:
    att = w.get("attribution") or {}
    typ = att.get("typical_us") or {}
    step = att.get("reference_us") or 0
    if not step:
        why = (w.get("error") or (w.get("script") or {}).get("message") or "").strip()
        return f"not measured ({w.get('status')}: {why.splitlines()[0][:120] if why else '?'})"
    comm = typ.get("communication") or 0
    return f"{step:,.0f} µs, communication {100 * comm / step:.0f}%"


def main() -> str:
    lines = [
        f"multi-worker jobs (run --workers N, {STEPS} steps; injected straggler: worker 1 "
        f"sleeps {DELAY_MS:g} ms a step):"
    ]
    for title, env in PROGRAMS.items():
        lines.append(f"  {title}")
        with tempfile.TemporaryDirectory(prefix="tlp-bench-job-") as tmp:
            base = Path(tmp)
            one = _run(1, env, base / "one")
            two = _run(2, env, base / "two")
            slow = _run(
                2, {**env, "MW_SLOW_WORKER": "1", "MW_SLOW_MS": str(DELAY_MS)}, base / "slow"
            )
        if one is None or two is None or slow is None:
            lines.append("    a run failed: not measured")
            continue
        s1 = one["workloads"][0]
        lines.append(f"    1 worker:  {_split(s1)}")
        ratio = ""
        a1 = (s1.get("attribution") or {}).get("reference_us")
        for w in two["workloads"]:
            a2 = (w.get("attribution") or {}).get("reference_us")
            if a1 and a2:
                ratio = f" ({a2 / a1:.2f}× the 1-worker step)"
            lines.append(f"    2 workers, worker {w['worker']['index']}: {_split(w)}{ratio}")
        job = slow.get("job") or {}
        for w in slow["workloads"]:
            lines.append(f"    straggler run, worker {w['worker']['index']}: {_split(w)}")
        named = job.get("straggler")
        reason_us, excess_us = job.get("reason_us"), job.get("excess_us")
        delay_us = DELAY_MS * 1e3
        for what, v in (
            ("its category excess (" + str(job.get("reason")) + ")", reason_us),
            ("its busy-time excess", excess_us),
        ):
            if v is None:
                lines.append(f"    attributed by {what}: not measured")
                continue
            err = v / delay_us - 1
            verdict = "holds" if abs(err) <= GOAL else "misses"
            lines.append(
                f"    attributed by {what}: {v:,.0f} µs of the {delay_us:,.0f} µs injected "
                f"({err:+.0%}; goal ±{GOAL:.0%}: {verdict})"
            )
        lines.append(
            f"    straggler named: worker {named} "
            f"({'right' if named == 1 else 'wrong: the injected one is worker 1'})"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(main())
