"""View model: everything the renderers show, computed from a run's summary.

Place in the pipeline: ``summary.json`` -> **view model** -> ``html``/``text``. All arithmetic
(ratios, rankings, shares) happens here; the renderers only format. The view model is plain data
(dicts, lists, numbers, strings), so the HTML page gets it verbatim as its JSON island.
"""

from __future__ import annotations

from typing import Any


def _fastest(workloads: list[dict[str, Any]]) -> float | None:
    times = [
        w["step_time"]["median_us"]
        for w in workloads
        if w.get("status") == "ok" and w.get("step_time") and w["step_time"]["median_us"] > 0
    ]
    return min(times) if times else None


def workload_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per workload: step time, ratio to the fastest, final loss, status."""
    workloads = summary.get("workloads", [])
    fastest = _fastest(workloads)
    rows = []
    for w in workloads:
        st = w.get("step_time") or {}
        median = st.get("median_us")
        loss = w.get("loss") or {}
        rows.append(
            {
                "name": w["name"],
                "label": w["label"],
                "slug": w["slug"],
                "title": w.get("title", ""),
                "seed": w.get("seed", ""),
                "framework": w.get("framework", ""),
                "status": w["status"],
                "error": w.get("error", ""),
                "steps": st.get("steps"),
                "median_us": median,
                "p10_us": st.get("p10_us"),
                "p90_us": st.get("p90_us"),
                "ratio": (median / fastest) if median and fastest else None,
                "initial_loss": loss.get("initial"),
                "final_loss": loss.get("final"),
                "one_off_ms": (w.get("one_off") or {}).get("total_ms"),
                "marker_share": (w.get("marker") or {}).get("share_of_step"),
                "phases": [
                    {k: p[k] for k in ("name", "status", "reason", "steps", "inflation")}
                    for p in w.get("phases", [])
                ],
            }
        )
    return rows


def build(summary: dict[str, Any]) -> dict[str, Any]:
    """The view model of a whole run."""
    rows = workload_rows(summary)
    run = summary.get("run", {})
    failed = [r for r in rows if r["status"] != "ok"]
    return {
        "title": f"Training-loop profile, run {run.get('id', '?')}",
        "run": {
            "id": run.get("id"),
            "status": run.get("status"),
            "started": run.get("started"),
            "wall_s": run.get("wall_s"),
            "phases": run.get("phases", []),
        },
        "tool": summary.get("tool", {}),
        "schema_version": summary.get("schema_version"),
        "workloads": rows,
        "failed": [
            {"label": r["label"], "status": r["status"], "error": r["error"]} for r in failed
        ],
        "environment": summary.get("environment", {}),
    }
