"""``make bench --noise``: the same scripts profiled on a quiet machine and beside a busy one.

Place in the pipeline: a benchmark, run by ``profiler.bench`` (``--noise``). For each script (by
default the short scripts, the real-world corpus and the seed TF1 script), it profiles the
script twice with no options, one run after the other: once alone, once beside a busy process
(``Busy``: one process spinning on a core, one alternating random bursts of spinning and
sleeping). It prints, per script, each run's verdict (the answer's first sentence, and what
opens it: ``focus_view.verdict_rule``), top category and its share, the run's drift, the
sampled shares' interval, and each what-if's saving with its interval and verdict, against
the goals: the same verdict and top category both times, shares within 10 points. Figures,
never a failure (``tests/test_noise.py`` asserts them on a few cases: ``make noise``).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profiler.bench_scripts import OPTIONS, default_corpus

#: Shares of the same category in both runs within this many points.
SHARE_GOAL_PTS = 10.0


def _spin(stop: Any) -> None:
    while not stop.is_set():
        pass


def _bursts(stop: Any, seed: int) -> None:
    rng = random.Random(seed)
    while not stop.is_set():
        end = time.monotonic() + rng.uniform(0.05, 0.5)
        while time.monotonic() < end and not stop.is_set():
            pass
        time.sleep(rng.uniform(0.05, 0.5))


class Busy:
    """One core spinning and one with random bursts, for as long as the ``with`` lasts."""

    def __enter__(self) -> Busy:
        ctx = multiprocessing.get_context("spawn")
        self.stop = ctx.Event()
        self.procs = [
            ctx.Process(target=_spin, args=(self.stop,), daemon=True),
            ctx.Process(target=_bursts, args=(self.stop, 0), daemon=True),
        ]
        for p in self.procs:
            p.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for p in self.procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()


@dataclass
class Run:
    verdict: str = ""
    #: What opens the answer (``focus_view.verdict_rule``): a finding's rule, a measured
    #: what-if, ``within_noise`` or ``no_fix``.
    rule: str = ""
    top: str = ""
    top_share: float | None = None
    shares: dict[str, float] = field(default_factory=dict)
    interval_pts: float | None = None
    whatifs: list[str] = field(default_factory=list)
    #: The machine's speed ratio across the run, with its interval (``summary.drift``).
    drift: str = ""
    error: str = ""


def profile(script: Path, timeout: float = 900.0) -> Run:
    """One run of ``script`` with no options (the options its header needs to run at all)."""
    from profiler.reports import viewmodel

    with tempfile.TemporaryDirectory(prefix="tlp-noise-") as tmp:
        out = Path(tmp) / "runs"
        cmd = [sys.executable, "-m", "profiler", "run", "--out", str(out)]
        cmd += [*OPTIONS.get(script.name, []), str(script)]
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        done = None
        try:
            done = subprocess.run(
                cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout, check=False
            )
            doc = json.loads((out / "latest" / "summary.json").read_text())
        except (subprocess.TimeoutExpired, OSError, ValueError) as exc:
            tail = done.stderr.strip().splitlines()[-3:] if done is not None else []
            return Run(error=f"{str(exc)[:100]} {' | '.join(tail)}".strip())
    vm = viewmodel.build(doc)
    card = (vm.get("focus") or [{}])[0]
    w = doc["workloads"][0]
    share = (w.get("attribution") or {}).get("share") or {}
    measured = {c: v for c, v in share.items() if v is not None and c != "other"}
    top = max(measured, key=lambda c: measured[c]) if measured else ""
    sampled: dict[str, Any] = next((p for p in w.get("phases", []) if p["name"] == "sampled"), {})
    whatifs = [
        f"{x['id']} {x['measured_saving_us'] or 0:,.1f} µs "
        f"[{', '.join(f'{v:,.1f}' for v in x.get('interval_us') or [])}] {x['verdict']}"
        for x in w.get("whatif") or []
    ]
    return Run(
        verdict=card.get("verdict", ""),
        rule=card.get("verdict_rule", ""),
        top=top,
        top_share=measured.get(top),
        shares=measured,
        interval_pts=(sampled.get("data") or {}).get("share_interval_pts"),
        drift=_drift(w.get("drift")),
        whatifs=whatifs,
    )


def _drift(d: dict[str, Any] | None) -> str:
    if not d:
        return "not measured"
    lo, hi = d["interval"]
    return f"{d['ratio']:.2f}x [{lo:.2f}, {hi:.2f}]"


@dataclass(frozen=True)
class Row:
    """One script's two runs against the goals; ``lines`` as printed."""

    lines: list[str]
    same_top: bool = False
    same_rule: bool = False
    #: The largest difference of one category's shares within ``SHARE_GOAL_PTS``.
    shares_ok: bool = False
    #: ... within the two runs' sampled intervals (their half-widths added in quadrature).
    shares_in_interval: bool = False
    error: bool = False


def row(script: Path) -> Row:
    quiet = profile(script)
    with Busy():
        busy = profile(script)
    if quiet.error or busy.error:
        return Row([f"  {script.name}: error: {quiet.error or busy.error}"], error=True)
    same_top = quiet.top == busy.top
    diffs = [abs(quiet.shares[c] - busy.shares.get(c, 0.0)) * 100 for c in quiet.shares]
    worst = max(diffs) if diffs else 0.0
    same_kind = quiet.rule == busy.rule
    widths = [w for w in (quiet.interval_pts, busy.interval_pts) if isinstance(w, (int, float))]
    combined = sum(w * w for w in widths) ** 0.5 if len(widths) == 2 else None
    lines = [
        f"  {script.name}: top {quiet.top} {100 * (quiet.top_share or 0):.0f}% / "
        f"{busy.top} {100 * (busy.top_share or 0):.0f}% ({'same' if same_top else 'DIFFERS'}); "
        f"shares within {worst:.0f} points ({'ok' if worst <= SHARE_GOAL_PTS else 'MISS'}); "
        f"sampled ±{quiet.interval_pts} / ±{busy.interval_pts} points; verdict "
        f"{quiet.rule} / {busy.rule} ({'same' if same_kind else 'DIFFERS'}); drift "
        f"{quiet.drift} / {busy.drift}",
        f"    quiet: {quiet.verdict}",
        f"    busy:  {busy.verdict}",
    ]
    for a in quiet.whatifs:
        lines.append(f"    what-if quiet: {a}")
    for b in busy.whatifs:
        lines.append(f"    what-if busy:  {b}")
    return Row(
        lines,
        same_top=same_top,
        same_rule=same_kind,
        shares_ok=worst <= SHARE_GOAL_PTS,
        shares_in_interval=combined is not None and worst <= combined,
    )


def main(paths: list[Path] | None = None) -> str:
    out = [
        "noise: each script with no options, quiet and beside a busy process (goals: the same "
        f"verdict and top category; shares within {SHARE_GOAL_PTS:g} points):"
    ]
    rows = []
    for path in paths or default_corpus():
        print(f"  ... {path.name}", file=sys.stderr, flush=True)
        rows.append(row(path.resolve()))  # each run's folder is a temporary one
        out.extend(rows[-1].lines)
    ran = [r for r in rows if not r.error]
    out.append(
        f"  of {len(ran)} scripts run twice ({len(rows) - len(ran)} failed): the same verdict in "
        f"{sum(r.same_rule for r in ran)}, the same top category in "
        f"{sum(r.same_top for r in ran)}, shares within {SHARE_GOAL_PTS:g} points in "
        f"{sum(r.shares_ok for r in ran)}, within the two sampled intervals in "
        f"{sum(r.shares_in_interval for r in ran)}"
    )
    return "\n".join(out)
