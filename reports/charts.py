"""Chart specifications: Plotly figures as plain data, computed from view-model pieces.

Place in the pipeline: part of the view model (``reports.viewmodel``). Each function returns a
figure ``{"id", "title", "data", "layout"}`` that the page hands to ``Plotly.newPlot`` as it is;
the page's script draws nothing itself. Colours are fixed per category so every chart reads the
same way; every value has a hover label.
"""

from __future__ import annotations

import math
from typing import Any

from profiler.model import CATEGORIES

CATEGORY_LABELS = {
    "compute": "compute (kernels)",
    "dispatch": "dispatch",
    "feed_fetch": "feed/fetch",
    "python": "Python",
    "tracing": "tracing",
    "communication": "communication",
    "other": "other",
}
COLORS = {
    "compute": "#2e7d32",
    "dispatch": "#1565c0",
    "feed_fetch": "#ef6c00",
    "python": "#6a1b9a",
    "tracing": "#c62828",
    "communication": "#00838f",
    "other": "#9e9e9e",
}
SERIES_COLORS = ("#1565c0", "#ef6c00", "#2e7d32", "#6a1b9a", "#c62828", "#00838f", "#5d4037")
FONT = {"family": "system-ui, sans-serif", "size": 12}


def _layout(**extra: Any) -> dict[str, Any]:
    base = {
        "font": FONT,
        "margin": {"l": 60, "r": 20, "t": 30, "b": 50},
        "legend": {"orientation": "h", "y": -0.2, "traceorder": "normal"},
        "hovermode": "closest",
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
    }
    base.update(extra)
    return base


def step_bars(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Stacked horizontal bars: µs per step by category, one bar per workload.

    A button switches the axis to a log scale: steps here range from ~3 µs to ~1.5 ms.
    """
    rows = [r for r in rows if r.get("typical_us")]
    labels = [r["label"] for r in rows]
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "name": CATEGORY_LABELS[c],
            "y": labels,
            "x": [round(v, 3) if (v := r["typical_us"][c]) is not None else None for r in rows],
            "marker": {"color": COLORS[c]},
            "hovertemplate": "%{y}<br>" + CATEGORY_LABELS[c] + ": %{x:,.1f} µs<extra></extra>",
        }
        for c in CATEGORIES
    ]
    height = max(260, 28 * len(rows) + 110)
    layout = _layout(
        barmode="stack",
        height=height,
        xaxis={"title": {"text": "µs per training step (typical step)"}, "type": "linear"},
        yaxis={"autorange": "reversed", "automargin": True},
        margin={"l": 140, "r": 20, "t": 40, "b": 60},
        updatemenus=[
            {
                "type": "buttons",
                "direction": "left",
                "x": 0.0,
                "xanchor": "left",
                "y": 1.12,
                "buttons": [
                    {"label": "linear", "method": "relayout", "args": [{"xaxis.type": "linear"}]},
                    {"label": "log", "method": "relayout", "args": [{"xaxis.type": "log"}]},
                ],
            }
        ],
    )
    return {"id": "chart-steps", "title": "µs per step by category", "data": data, "layout": layout}


def waterfall(cmp: dict[str, Any]) -> dict[str, Any]:
    """B's step, then each category's difference, then A's step (stacked bars, hidden base)."""
    a, b = cmp["a"], cmp["b"]
    steps = [b["label"]] + [CATEGORY_LABELS[c] for c in cmp["order"]] + [a["label"]]
    base, delta, colors, text = [0.0], [b["step_us"]], ["#616161"], [f"{b['step_us']:,.1f} µs"]
    level = b["step_us"]
    for c in cmp["order"]:
        d = cmp["difference_us"][c]
        if d is None:  # not measured in one of the two: no bar, said so
            base.append(level)
            delta.append(0.0)
            colors.append("#bdbdbd")
            text.append("not measured")
            continue
        base.append(min(level, level + d))
        delta.append(abs(d))
        colors.append(COLORS[c] if d >= 0 else "#81c784")
        text.append(f"{d:+,.1f} µs")
        level += d
    base.append(0.0)
    delta.append(a["step_us"])
    colors.append("#212121")
    text.append(f"{a['step_us']:,.1f} µs")
    data = [
        {
            "type": "bar",
            "x": steps,
            "y": [round(v, 3) for v in base],
            "marker": {"color": "rgba(0,0,0,0)"},
            "hoverinfo": "skip",
            "showlegend": False,
        },
        {
            "type": "bar",
            "x": steps,
            "y": [round(v, 3) for v in delta],
            "marker": {"color": colors},
            "text": text,
            "textposition": "outside",
            "hovertemplate": "%{x}: %{text}<extra></extra>",
            "showlegend": False,
        },
    ]
    layout = _layout(
        barmode="stack",
        height=340,
        yaxis={"title": {"text": "µs per step"}},
        margin={"l": 60, "r": 20, "t": 30, "b": 70},
    )
    return {
        "id": "chart-waterfall",
        "title": f"{a['label']} vs {b['label']}: where the difference goes",
        "data": data,
        "layout": layout,
    }


def _pair_error_bars(ok: list[dict[str, Any]]) -> dict[str, Any]:
    """The measured saving's 95% interval where the pair has one (block pairs sized to their
    noise), else its resolution."""
    up, down = [], []
    for p in ok:
        span, m = p.get("interval_us"), p["measured_saving_us"]
        if span is None or m is None:
            up.append(p["resolution_us"])
            down.append(p["resolution_us"])
        else:
            up.append(max(span[1] - m, 0.0))
            down.append(max(m - span[0], 0.0))
    return {"type": "data", "array": up, "arrayminus": down, "visible": True}


def experiments(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """Predicted and measured saving per pair; the measurement's 95% interval (or, for a run
    before pairs were sized, its resolution) as error bars."""
    ok = [p for p in pairs if p["status"] == "ok"]
    names = [p["name"] for p in ok]
    data = [
        {
            "type": "bar",
            "name": "predicted by the attribution",
            "x": names,
            "y": [p["predicted_saving_us"] for p in ok],
            "marker": {"color": "#90caf9"},
            "hovertemplate": "%{x}<br>predicted: %{y:,.1f} µs<extra></extra>",
        },
        {
            "type": "bar",
            "name": "measured",
            "x": names,
            "y": [p["measured_saving_us"] for p in ok],
            "error_y": _pair_error_bars(ok),
            "marker": {"color": "#1565c0"},
            "hovertemplate": "%{x}<br>measured: %{y:,.1f} µs<extra></extra>",
        },
    ]
    values = [v for p in ok for v in (p["predicted_saving_us"], p["measured_saving_us"])]
    # A log axis hides a saving of 0 or below (a prediction of 0 is a finding too).
    scale = "log" if all(v is not None and v > 0 for v in values) else "linear"
    layout = _layout(
        barmode="group",
        height=360,
        yaxis={"title": {"text": "saving, µs per step"}, "type": scale},
        xaxis={"automargin": True},
        margin={"l": 60, "r": 20, "t": 30, "b": 110},
    )
    return {
        "id": "chart-experiments",
        "title": "Predicted vs measured saving",
        "data": data,
        "layout": layout,
    }


def sweep(items: list[dict[str, Any]], crossover: dict[str, Any] | None) -> dict[str, Any]:
    """Median step time against problem size (log-log) and each fitted line a + b·n."""
    data: list[dict[str, Any]] = []
    all_sizes = [n for it in items for n in it["sizes"]]
    lo, hi = (min(all_sizes), max(all_sizes)) if all_sizes else (1, 10)
    xs = [lo * (hi / lo) ** (i / 40) for i in range(41)] if hi > lo else [lo]
    for i, it in enumerate(items):
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": f"{it['name']} (measured)",
                "x": it["sizes"],
                "y": it["median_us"],
                "marker": {"color": color, "size": 9},
                "hovertemplate": "n = %{x:,}<br>%{y:,.1f} µs per step<extra>"
                + it["name"]
                + "</extra>",
            }
        )
        fit = it.get("fit")
        if fit:
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "name": f"{it['name']}: {fit['a_us']:,.1f} µs + {fit['b_ns_per_sample']:.2f} "
                    f"ns·n (fit n ≤ {fit['n_max']:,})",
                    "x": [round(x, 3) for x in xs],
                    "y": [round(fit["a_us"] + fit["b_ns_per_sample"] * x / 1e3, 4) for x in xs],
                    "line": {"color": color, "dash": "dot"},
                    "hovertemplate": "fit at n = %{x:,.0f}: %{y:,.1f} µs<extra></extra>",
                }
            )
    shapes = []
    if crossover and crossover.get("n"):
        n = crossover["n"]
        shapes.append(
            {
                "type": "line",
                "x0": n,
                "x1": n,
                "yref": "paper",
                "y0": 0,
                "y1": 1,
                "line": {"color": "#c62828", "dash": "dash"},
            }
        )
    layout = _layout(
        height=380,
        xaxis={"title": {"text": "problem size n (samples)"}, "type": "log"},
        yaxis={"title": {"text": "µs per step"}, "type": "log"},
        shapes=shapes,
    )
    return {
        "id": "chart-sweep",
        "title": "Step time against problem size",
        "data": data,
        "layout": layout,
    }


def efficiency_curve(
    curves: dict[str, dict[str, list[Any]]], axis: str, label: str, log_x: bool
) -> dict[str, Any]:
    """Median excess loss over the noise floor against one measure of work, per implementation."""
    data = []
    for i, (name, c) in enumerate(curves.items()):
        pts = [
            (x, y)
            for x, y in zip(c.get(axis, []), c.get("excess_median", []), strict=False)
            if x is not None
            and y is not None
            and y > 0
            and (x > 0 or not log_x)
            and math.isfinite(y)
        ]
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": name,
                "x": [p[0] for p in pts],
                "y": [p[1] for p in pts],
                "line": {"color": SERIES_COLORS[i % len(SERIES_COLORS)], "width": 2},
                "hovertemplate": f"{name}<br>{label}: %{{x:,.4g}}<br>excess loss: %{{y:.3g}}"
                "<extra></extra>",
            }
        )
    layout = _layout(
        height=330,
        xaxis={"title": {"text": label}, "type": "log" if log_x else "linear"},
        yaxis={"title": {"text": "excess loss over the noise floor"}, "type": "log"},
        legend={"orientation": "v", "x": 1.02, "y": 1},
        margin={"l": 60, "r": 170, "t": 20, "b": 50},
    )
    return {
        "id": f"chart-eff-{axis}",
        "title": f"Excess loss against {label}",
        "data": data,
        "layout": layout,
    }


def step_series(chart_id: str, label: str, series: dict[str, Any]) -> dict[str, Any]:
    """Every step's time across the run's windows (log scale), one colour per window: the
    warm-up's first steps, an epoch's first batch, a retrace stand out from the median."""
    windows = list(dict.fromkeys(series["window"]))
    data = []
    for i, name in enumerate(windows):
        idx = [j for j, w in enumerate(series["window"]) if w == name]
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": name,
                "x": [series["step"][j] for j in idx],
                "y": [series["us"][j] for j in idx],
                "marker": {"size": 4, "color": SERIES_COLORS[i % len(SERIES_COLORS)]},
                "hovertemplate": "step %{x}<br>%{y:,.1f} µs<extra>" + name + "</extra>",
            }
        )
    layout = _layout(
        height=300,
        xaxis={"title": {"text": "step"}},
        yaxis={"title": {"text": "µs per step"}, "type": "log"},
    )
    return {"id": chart_id, "title": f"{label}: every step's time", "data": data, "layout": layout}


def job_bars(job: dict[str, Any]) -> dict[str, Any]:
    """Stacked horizontal bars: each worker's typical step by category (a ``run --workers``
    job); the straggler's bar is the one whose non-communication part is longest."""
    workers = [w for w in job["workers"] if w.get("categories_us")]
    labels = [
        f"worker {w['index']}{' (straggler)' if w['index'] == job.get('straggler') else ''}"
        for w in workers
    ]
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "name": CATEGORY_LABELS[c],
            "y": labels,
            "x": [w["categories_us"].get(c) for w in workers],
            "marker": {"color": COLORS[c]},
            "hovertemplate": "%{y}<br>" + CATEGORY_LABELS[c] + ": %{x:,.1f} µs<extra></extra>",
        }
        for c in CATEGORIES
    ]
    layout = _layout(
        barmode="stack",
        height=max(220, 34 * len(workers) + 110),
        xaxis={"title": {"text": "µs per training step (typical step)"}},
        yaxis={"autorange": "reversed", "automargin": True},
    )
    return {
        "id": "chart-job",
        "title": "each worker's step by category",
        "data": data,
        "layout": layout,
    }


def job_steps(job: dict[str, Any]) -> dict[str, Any]:
    """Step by step, each worker's busy time (its step less its communication): the highest
    line in a step is the straggler the others waited for."""
    steps = job["steps"]
    data = []
    for i, w in enumerate(job["workers"]):
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": f"worker {w['index']}",
                "x": [s["step"] for s in steps],
                "y": [s["busy_us"][i] for s in steps],
                "marker": {"size": 5, "color": SERIES_COLORS[i % len(SERIES_COLORS)]},
                "hovertemplate": "step %{x}<br>busy %{y:,.1f} µs<extra>worker "
                + str(w["index"])
                + "</extra>",
            }
        )
    layout = _layout(
        height=300,
        xaxis={"title": {"text": "step"}},
        yaxis={"title": {"text": "µs outside communication"}, "rangemode": "tozero"},
    )
    return {
        "id": "chart-job-steps",
        "title": "stragglers, step by step",
        "data": data,
        "layout": layout,
    }


#: Points of the memory chart at most: the samples are bucketed by step (the record holds up to
#: 2,000 samples, many at one step: the imports before the first step, a long step).
MEMORY_POINTS = 400
#: A phase window's shade on the memory chart, per phase (others: grey).
PHASE_COLORS = {
    "warmup": "rgba(158,158,158,0.18)",
    "timed": "rgba(46,125,50,0.14)",
    "sampled": "rgba(21,101,192,0.14)",
    "lines": "rgba(106,27,154,0.14)",
    "framework": "rgba(239,108,0,0.16)",
    "hooks": "rgba(198,40,40,0.14)",
    "whatif": "rgba(0,131,143,0.16)",
}


def memory_buckets(record: dict[str, Any], max_points: int = MEMORY_POINTS) -> list[dict[str, Any]]:
    """The record's samples (``steps``: steps done at each, ``rss_bytes``) in buckets of equal
    step width, at most ``max_points``: per bucket its first and last sampled step, the
    samples in it and the largest resident size (MB; a peak stays visible, as the step series
    keeps a bucket's longest step)."""
    pairs = sorted(zip(record.get("steps") or [], record.get("rss_bytes") or [], strict=False))
    if not pairs:
        return []
    lo, hi = pairs[0][0], pairs[-1][0]
    width = max(1, -(-(hi - lo + 1) // max_points))
    buckets: dict[int, list[tuple[int, int]]] = {}
    for s, r in pairs:
        buckets.setdefault((s - lo) // width, []).append((s, r))
    return [
        {
            "first_step": b[0][0],
            "last_step": b[-1][0],
            "samples": len(b),
            "mb": round(max(r for _, r in b) / 2**20, 3),
        }
        for _, b in sorted(buckets.items())
    ]


def phase_windows(series: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The phases' step windows, from the step-time series (``series``: step, window): each
    run of consecutive points of one window is ``{"phase", "first_step", "last_step"}``."""
    out: list[dict[str, Any]] = []
    if not series:
        return out
    for step, name in zip(series.get("step") or [], series.get("window") or [], strict=False):
        if out and out[-1]["phase"] == name:
            out[-1]["last_step"] = step
        else:
            out.append({"phase": name, "first_step": step, "last_step": step})
    return out


def memory_series(
    chart_id: str,
    label: str,
    record: dict[str, Any],
    memory: dict[str, Any] | None,
    windows: list[dict[str, Any]],
    growth: str,
) -> dict[str, Any]:
    """Resident memory (MB) over the steps: one point per bucket of steps
    (``memory_buckets``), the phases' windows shaded behind it (one legend entry per phase),
    and the growth fitted after the warm-up as a line from its first step to the run's last,
    named with its figure and interval (``growth``: those words; no line where the growth
    was not measured)."""
    points = memory_buckets(record)
    data: list[dict[str, Any]] = []
    by_phase: dict[str, list[dict[str, Any]]] = {}
    for w in windows:
        by_phase.setdefault(w["phase"], []).append(w)
    for name, spans in by_phase.items():
        xs: list[float | None] = []
        ys: list[float | None] = []
        for w in spans:
            # Step index j runs while j steps are done: the window covers first..last + 1.
            x0, x1 = w["first_step"], w["last_step"] + 1
            xs += [x0, x0, x1, x1, x0, None]
            ys += [0, 1, 1, 0, 0, None]
        where = ", ".join(f"{w['first_step']:,}–{w['last_step']:,}" for w in spans)
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"{name} window",
                "x": xs[:-1],
                "y": ys[:-1],
                "yaxis": "y2",
                "fill": "toself",
                "fillcolor": PHASE_COLORS.get(name, "rgba(97,97,97,0.12)"),
                "line": {"width": 0},
                "hoveron": "fills",
                "hoverinfo": "text",
                "text": f"{name}: steps {where}",
            }
        )
    data.append(
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "resident MB (largest in each bucket of steps)",
            "x": [p["last_step"] for p in points],
            "y": [p["mb"] for p in points],
            "customdata": [[p["first_step"], p["samples"]] for p in points],
            "line": {"color": SERIES_COLORS[0], "width": 1.5},
            "marker": {"size": 3, "color": SERIES_COLORS[0]},
            "hovertemplate": "steps %{customdata[0]:,}–%{x:,} done<br>%{y:,.1f} MB resident "
            "(largest of %{customdata[1]} samples)<extra></extra>",
        }
    )
    m = memory or {}
    g = m.get("growth_bytes_per_step")
    if g is not None and m.get("growth_interval") and m.get("projected_mb") is not None:
        end, span = m["last_step"], m["steps"]
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": growth,
                "x": [end - span, end],
                "y": [round(m["projected_mb"] - g * span / 2**20, 3), m["projected_mb"]],
                "line": {"color": "#c62828", "dash": "dash", "width": 2},
                "hovertemplate": "fit: %{y:,.1f} MB at step %{x:,}<extra>" + growth + "</extra>",
            }
        )
    layout = _layout(
        height=360,
        xaxis={"title": {"text": "steps done"}},
        yaxis={"title": {"text": "resident MB"}},
        yaxis2={"overlaying": "y", "range": [0, 1], "visible": False, "fixedrange": True},
        legend={"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
        margin={"l": 60, "r": 20, "t": 70, "b": 50},
    )
    return {
        "id": chart_id,
        "title": f"{label}: resident memory over the steps",
        "data": data,
        "layout": layout,
    }
