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


#: Curve series the report's page gets (its JSON island), per implementation.
EFFICIENCY_SERIES = (
    "samples",
    "updates",
    "epochs",
    "wall_ms",
    "loss_median",
    "loss_min",
    "loss_max",
    "excess_median",
    "bias_multiplier",
)


def efficiency_view(summary: dict[str, Any]) -> dict[str, Any] | None:
    """The training-efficiency section (seed 004): tables of work to the target, the causes'
    contributions, work accounting, the diagnoses, and the curves as data; None if not run."""
    eff = summary.get("efficiency")
    if not eff:
        return None
    impls = [i for i in eff.get("implementations", []) if i.get("curve")]
    work_rows = []
    for i in impls:
        w, t, st = i["work"], i["time"], i["step_size"]
        work_rows.append(
            {
                "name": i["name"],
                "role": i.get("role", ""),
                "samples": w["samples"],
                "updates": w["updates"],
                "epochs": w["epochs"],
                "counter": w["optimizer_counter"],
                "samples_per_epoch": w["samples_per_epoch"],
                "updates_per_epoch": w["updates_per_epoch"],
                "distinct": w["distinct"],
                "coverage": w["coverage"],
                "distinct_last_epoch": w["distinct_last_epoch"],
                "distinct_source": w["distinct_source"],
                "reuse_passes": w["reuse_passes"],
                "multiplier_ref": (st.get("at_ref_updates") or {}).get("multiplier"),
                "counter_ref": (st.get("at_ref_updates") or {}).get("counter"),
                "multiplier_min": (st.get("smallest") or {}).get("multiplier"),
                "initial_loss": i["initial_loss"],
                "initializer": i["initializer"],
                "per_update_us": t["per_update_us"],
                "per_epoch_ms": t["per_epoch_ms"],
                "flops_per_update": t["flops_per_update"],
                "log_share": t["log_share"],
                "printed": i["printed"]["kind"],
                "printed_gap": (i["printed"].get("gap") or {}).get("median"),
            }
        )
    return {
        "status": eff.get("status"),
        "error": eff.get("error", ""),
        "wall_s": eff.get("wall_s"),
        "spec": eff.get("spec", {}),
        "noise_floor": eff.get("noise_floor"),
        "diagnoses": eff.get("diagnoses", []),
        "targets": [
            {
                "name": i["name"],
                "role": i.get("role", ""),
                "budget_samples": i["budget_samples"],
                "first": i["target"]["first_reached"],
                "stays": i["target"]["stays_below"],
                "at_samples": i["at_ref_samples"]["loss"],
                "at_updates": i["at_ref_updates"]["loss"],
                "final_excess": i["final_excess"],
            }
            for i in impls
        ],
        "causes": eff.get("causes", []),
        "work": work_rows,
        "failed": [
            {"name": i["name"], "status": i["status"], "errors": i.get("errors", [])}
            for i in eff.get("implementations", [])
            if i.get("status") != "ok"
        ],
        "curves": {i["name"]: {k: i["curve"][k] for k in EFFICIENCY_SERIES} for i in impls},
    }


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
        "efficiency": efficiency_view(summary),
    }
