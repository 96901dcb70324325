"""The training-efficiency section of the view model (seed 004), from the summary.

Place in the pipeline: part of ``reports.viewmodel``: tables of work to the target, the causes'
contributions, work accounting, the diagnoses, and the curves as data for the charts.
"""

from __future__ import annotations

from typing import Any

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
