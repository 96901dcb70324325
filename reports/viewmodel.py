"""View model: everything the report shows, computed from a run's summary.

Place in the pipeline: ``summary.json`` -> **view model** -> ``html``/``text``. All arithmetic
(ratios, rankings, shares, the answers' sentences, the charts' data) happens here; the
renderers only format. The view model is plain data (dicts, lists, numbers, strings), so the
page gets it verbatim as its JSON island, and building it twice from one summary gives the same
result (no clock, no environment: the golden report relies on it).

Paths shown in the report are shortened (``short_path``): package files relative to
``site-packages``, others to their last two components, so nothing of the machine's layout
leaks into the page.
"""

from __future__ import annotations

from typing import Any

from profiler.analysis.compare import one as compare_one
from profiler.model import CATEGORIES
from profiler.reports import charts
from profiler.reports.efficiency_view import efficiency_view
from profiler.reports.focus_view import focus, memory_chart, size_text
from profiler.workloads import casestudy

TOP_OPS = 10
TOP_LINES = 8
TOP_STACKS = 5


def short_path(path: str) -> str:
    """A path without the machine's layout: package-relative, else its last two parts."""
    if not path or "/" not in path:
        return path
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1]
    parts = [p for p in path.split("/") if p]
    return "/".join(parts[-2:])


def _where(name: str) -> str:
    """The script's name as the answer says it: ``global `x```, ``local `x` of main()``."""
    if "()." in name:
        fn, _, rest = name.partition("().")
        return f"local `{rest}` of {fn}()"
    return f"`{name}`" if "." in name else f"global `{name}`"


def _holder_text(h: dict[str, Any]) -> str:
    """One holder (``memory.peak.holders``) in words."""
    where, size, n = _where(h["name"]), size_text(h["bytes"]), h.get("count") or 0
    if h["kind"] == "model":
        params = f"{n / 1e6:,.1f} M" if n >= 10**6 else f"{n:,}"
        text = f"{where}: {h['what']}, {params} parameters in weights, {size}"
        if h.get("optimizer_bytes") is not None:
            text += f"; optimizer slots {size_text(h['optimizer_bytes'])}"
        return text
    if h["kind"] == "optimizer":
        return f"{where}: optimizer {h['what']}, its variables {size}"
    if h["kind"] == "container":
        est = f" (from {h['looked']:,} items looked at, spread evenly)" if h.get("capped") else ""
        # The size is the whole container's: "list of 6 items, the largest numpy float32
        # (4096, 4096), 76.4 MB" read as that array's size.
        return f"{where}: {h['what']} of {n:,} {h['item']}: {'~' if est else ''}{size} in all{est}"
    return f"{where}: {h['what']}, {size}"


#: What the rest of the resident bytes at the peak is, when no name reaches it.
REST = (
    "temporaries, allocator caches, freed memory not given back, what libraries hold that no "
    "name reaches"
)


def peak_lines(m: dict[str, Any] | None) -> list[str]:
    """What held the memory at its peak (``memory.peak``): the census nearest the peak, the
    names that held the most, and what the names do not account for; "not measured" where no
    census was taken (never zero)."""
    if not m:
        return []
    p = m.get("peak")
    if not p:
        return [
            f"At the peak ({m['peak_mb']:,.0f} MB, {m['peak_step']:,} steps in), what held it: "
            "not measured (no census of the script's names)."
        ]
    mb = 2**20
    at = f"the census at step {p['step']:,}, {p['rss_mb']:,.0f} MB resident"
    if m["peak_mb"] - p["rss_mb"] >= 1:
        at += f"; the peak sampled: {m['peak_mb']:,.0f} MB at step {m['peak_step']:,}"
    if p.get("before_steps_peak"):
        at += (
            ", before the first step, while the script made its data: no name held it then, "
            "its temporaries did"
        )
    # Holders under 1% of the largest (or 1 KB) are counted, not listed: a dataset's 192-byte
    # batch_size tensor beside a 1 MB array is noise.
    top = p["holders"][0]["bytes"] if p["holders"] else 0
    shown = [h for i, h in enumerate(p["holders"]) if i == 0 or h["bytes"] >= max(0.01 * top, 1024)]
    held = "; ".join(_holder_text(h) for h in shown) or "no array, tensor or model"
    more = p["found"] - len(shown)
    more_text = f" (and {more:,} smaller)" if more > 0 else ""
    lines = [f"What held the peak ({at}): {held}{more_text}."]
    libraries = "the interpreter and the libraries it imported"
    if "tensorflow" in (p.get("frameworks") or []):
        libraries += ", TensorFlow's runtime among them"
    runtime = (
        f"{size_text(p['runtime_mb'] * mb)} the runtime (resident before the first step, less "
        f"what the names held then: {libraries})"
        if p["runtime_mb"] is not None
        else "the runtime not measured (no sample before a first step)"
    )
    # A census taken while a phase that allocates in the process ran: its buffers are in the
    # rest (the text generation tutorial's 1.3 GB "rest", TensorFlow's profiler's trace).
    phase = m.get("peak_phase") or ""
    during = (
        f"; the {phase} phase's own buffers among them, as the peak came while it ran"
        if phase
        else ""
    )
    lines.append(
        f"The script's names account for {size_text(p['held_mb'] * mb)}; {runtime}; "
        f"{size_text(p['rest_mb'] * mb)} the rest ({REST}{during})."
    )
    lines.extend(allocator_lines(m))
    return lines


def allocator_lines(m: dict[str, Any]) -> list[str]:
    """TensorFlow's allocator per device (``memory.allocator``): in use at the resident peak,
    at the end, and its own peak; nothing for a script without TensorFlow."""
    why = m.get("allocator_why") or ""
    devices = m.get("allocator") or []
    if not devices:
        if not why or why.startswith("the script did not import"):
            return []
        return [f"TensorFlow's allocator: not read ({why})."]
    mb = 2**20
    parts = []
    for a in devices:
        at_peak = (
            f"{size_text(a['at_rss_peak_mb'] * mb)} in use at the resident peak, "
            if a.get("at_rss_peak_mb") is not None
            else ""
        )
        parts.append(
            f"on {a['device']}: {at_peak}{size_text(a['last_mb'] * mb)} at the end, "
            f"{size_text(a['peak_mb'] * mb)} at its own peak"
        )
    cpu = any(a["device"].startswith("CPU") for a in devices)
    counted = (
        " (on CPU it counts its buffers of 256 KB and more: smaller tensors come from another "
        "allocator it does not count, measured with TensorFlow 2.21)"
        if cpu
        else ""
    )
    return [f"TensorFlow's allocator{counted} {'; '.join(parts)}."]


def peak_point(m: dict[str, Any] | None) -> dict[str, Any] | None:
    """The memory chart's point at the census nearest the peak, named with what the names
    held, the runtime and the rest; its hover lists the holders. None: no census."""
    p = (m or {}).get("peak")
    if not p:
        return None
    mb = 2**20
    runtime = size_text(p["runtime_mb"] * mb) if p["runtime_mb"] is not None else "not measured"
    name = (
        f"what held the peak (step {p['step']:,}): names {size_text(p['held_mb'] * mb)}, "
        f"runtime {runtime}, the rest {size_text(p['rest_mb'] * mb)}"
    )
    # A dtype can hold "<" (numpy's "<U10"): escaped, as Plotly reads its hover as markup.
    texts = [_holder_text(h).replace("&", "&amp;").replace("<", "&lt;") for h in p["holders"]]
    hover = "<br>".join(texts) or "no array, tensor or model"
    return {
        "type": "scatter",
        "mode": "markers",
        "name": name,
        "x": [p["step"]],
        "y": [p["rss_mb"]],
        "marker": {"size": 9, "symbol": "diamond", "color": "#6a1b9a"},
        "text": [hover],
        "hovertemplate": "%{text}<extra>" + name + "</extra>",
    }


def _fastest(workloads: list[dict[str, Any]]) -> float | None:
    times = [
        w["step_time"]["median_us"]
        for w in workloads
        if w.get("status") == "ok" and w.get("step_time") and w["step_time"]["median_us"] > 0
    ]
    return min(times) if times else None


def _phase(w: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((p for p in w.get("phases", []) if p["name"] == name), None)


def workload_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per workload: step time, ratio to the fastest, attribution, status."""
    workloads = summary.get("workloads", [])
    fastest = _fastest(workloads)
    rows = []
    for w in workloads:
        st = w.get("step_time") or {}
        median = st.get("median_us")
        if w["status"] == "failed" and (w.get("script") or {}).get("steps") == 0:
            # A script that raised before any step: its run up to the error is no step time
            # (a graph-mode Keras script read "25534960.1 µs/step" for its traceback).
            median, st = None, {}
        loss = w.get("loss") or {}
        att = w.get("attribution") or {}
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
                "marker_ns": (w.get("marker") or {}).get("cost_ns"),
                "typical_us": att.get("typical_us"),
                "share": att.get("share"),
                "reference_us": att.get("reference_us"),
                "overhead_share": att.get("overhead_share"),
                "not_measured": att.get("not_measured") or {},
                "method": att.get("method"),
                "parts_us": att.get("parts_us", {}),
                "checks": att.get("checks", []),
                "att_notes": att.get("notes", []),
                "sources": att.get("sources", {}),
                "phases": [
                    {k: p[k] for k in ("name", "status", "reason", "steps", "inflation")}
                    for p in w.get("phases", [])
                ],
            }
        )
    return rows


def waterfall(summary: dict[str, Any]) -> dict[str, Any] | None:
    """The first A-vs-B pair of the case study's ``WATERFALL_PAIRS`` with attributions."""
    by = {w["name"]: w for w in summary.get("workloads", []) if w.get("attribution")}
    for a, b in casestudy.WATERFALL_PAIRS:
        if a in by and b in by:
            return compare_one(summary, by[a], summary, by[b])
    return None


def op_tables(summary: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for w in summary.get("workloads", []):
        p = _phase(w, "framework")
        table = ((p or {}).get("data") or {}).get("op_table")
        if not table or not table.get("rows"):
            continue
        out.append(
            {
                "label": w["label"],
                "slug": w["slug"],
                "source": table.get("source"),
                "steps": table.get("steps"),
                "kernel_us_per_step": table.get("kernel_ns_per_step", 0) / 1e3,
                "top_op": table.get("top_op"),
                "top_share": table.get("top_share"),
                "rows": [
                    {
                        "op": r["op"],
                        "kernel": r["kernel"],
                        "count": r["count"],
                        "mean_us": r["mean_ns"] / 1e3,
                        "total_ms": r["total_ns"] / 1e6,
                        "share": r["share"],
                    }
                    for r in table["rows"][:TOP_OPS]
                ],
                "omitted": max(len(table["rows"]) - TOP_OPS, 0)
                + int(table.get("rows_omitted") or 0),
            }
        )
    return out


def line_tables(summary: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for w in summary.get("workloads", []):
        p = _phase(w, "lines")
        data = (p or {}).get("data") or {}
        functions = data.get("functions") or []
        if not functions:
            continue
        out.append(
            {
                "label": w["label"],
                "slug": w["slug"],
                "inflation": p.get("inflation") if p else None,
                "note": data.get("note", ""),
                "functions": [
                    {
                        "function": f["function"],
                        "file": short_path(f.get("file", "")),
                        "us_per_step": f.get("us_per_step"),
                        "rows": [
                            {
                                "line": r["line"],
                                "hits": r["hits"],
                                "us_per_hit": r["us_per_hit"],
                                "share": r["share"],
                                "source": r.get("source", ""),
                            }
                            for r in sorted(f["rows"], key=lambda r: -r["total_ms"])[:TOP_LINES]
                        ],
                    }
                    for f in functions
                ],
            }
        )
    return out


def flame_graphs(summary: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for w in summary.get("workloads", []):
        p = _phase(w, "sampled")
        s = w.get("sampling") or {}
        if not p:
            continue
        svg = "flamegraph.svg" in (p.get("artefacts") or [])
        out.append(
            {
                "label": w["label"],
                "slug": w["slug"],
                "status": p["status"],
                "reason": p.get("reason", ""),
                "href": f"workloads/{w['slug']}/flamegraph.svg" if svg else None,
                # The sampled phase's file, or the start-up capture's where it is the whole run
                # (no step found: ``startup.speedscope.json``).
                "speedscope": next(
                    (
                        f"workloads/{w['slug']}/{a}"
                        for a in p.get("artefacts") or []
                        if str(a).endswith("speedscope.json")
                    ),
                    None,
                ),
                "samples": (s.get("samples") or {}).get("in_steps"),
                "rate_hz": s.get("rate_hz"),
                "native": s.get("native"),
                "by_category": {k: v.get("share") for k, v in (s.get("by_category") or {}).items()},
                "top_stacks": [
                    {
                        "samples": t["samples"],
                        "share": t["share"],
                        "category": t["category"],
                        "leaf": t["frames"][-1] if t.get("frames") else "",
                        "frames": t.get("frames", [])[-6:],
                    }
                    for t in (s.get("top_stacks") or [])[:TOP_STACKS]
                ],
            }
        )
    return out


def method_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Per workload: each phase's status, window and measured slow-down; sources' costs."""
    out = []
    for w in summary.get("workloads", []):
        hooks = _phase(w, "hooks") or {}
        cost = ((hooks.get("data") or {}).get("self_cost") or {}).get("per_step_ns")
        samp = w.get("sampling") or {}
        out.append(
            {
                "label": w["label"],
                "marker_ns": (w.get("marker") or {}).get("cost_ns"),
                "marker_share": (w.get("marker") or {}).get("share_of_step"),
                "one_off": w.get("one_off"),
                "hooks_cost_us": cost / 1e3 if cost is not None else None,
                "samples": (samp.get("samples") or {}).get("in_steps"),
                "sample_inflation_mean": samp.get("inflation_mean"),
                "phases": [
                    {k: p[k] for k in ("name", "status", "reason", "steps", "inflation")}
                    for p in w.get("phases", [])
                ],
            }
        )
    return out


def _sweep_items(x: dict[str, Any] | None) -> list[dict[str, Any]]:
    items = []
    for name, s in ((x or {}).get("sweep") or {}).items():
        if s.get("status") == "ok" and s.get("median_us"):
            items.append({"name": name, **s})
    return items


#: The measurement processes beside the workloads', by their summary section.
PROCESSES = (("experiments", "experiments process"), ("efficiency", "efficiency process"))


def failed_processes(summary: dict[str, Any]) -> list[dict[str, str]]:
    """The experiments and efficiency processes that did not end ``ok``, as failed rows."""
    out = []
    for key, label in PROCESSES:
        section = summary.get(key) or {}
        status = section.get("status", "ok")
        if status != "ok":
            out.append({"label": label, "status": status, "error": section.get("error", "")})
    return out


def build(summary: dict[str, Any]) -> dict[str, Any]:
    """The view model of a whole run."""
    rows = workload_rows(summary)
    run = summary.get("run", {})
    failed = [r for r in rows if r["status"] != "ok"]
    x = summary.get("experiments")
    eff = efficiency_view(summary)
    cmp = waterfall(summary)
    sweep_items = _sweep_items(x)
    chart_list = []
    if any(r["typical_us"] for r in rows):
        chart_list.append(charts.step_bars(rows))
    job = summary.get("job")
    if job and job.get("workers"):
        chart_list.append(charts.job_bars(job))
        if job.get("steps"):
            chart_list.append(charts.job_steps(job))
    if cmp:
        chart_list.append(charts.waterfall(cmp))
    if x and any(p["status"] == "ok" and p["predicted_saving_us"] is not None for p in x["pairs"]):
        chart_list.append(charts.experiments(x["pairs"]))
    if sweep_items:
        chart_list.append(charts.sweep(sweep_items, x.get("crossover") if x else None))
    if eff and eff.get("curves"):
        for axis, label, log_x in (
            ("samples", "samples processed", True),
            ("updates", "parameter updates", True),
            ("epochs", "epochs (as each loop defines them)", True),
            ("wall_ms", "training time, ms", True),
        ):
            chart_list.append(charts.efficiency_curve(eff["curves"], axis, label, log_x))
    answers = casestudy.answers(summary)
    cards = focus(summary, answered=bool(answers))
    by_slug = {w["slug"]: w for w in summary.get("workloads", [])}
    for i, card in enumerate(cards):
        series = by_slug[card["slug"]].get("series")
        if series and series.get("step"):
            card["chart_id"] = f"chart-series-{i}"
            chart_list.append(charts.step_series(card["chart_id"], card["label"], series))
        record = (by_slug[card["slug"]].get("script") or {}).get("memory") or {}
        # What held the peak: lines under the memory line (the terminal), and a point on the
        # memory chart at the census (the page).
        mem = by_slug[card["slug"]].get("memory")
        card["memory_peak"] = peak_lines(mem)
        if record.get("measured") and record.get("rss_bytes"):
            card["memory_chart_id"] = f"chart-memory-{i}"
            chart = memory_chart(card, by_slug[card["slug"]], series)
            point = peak_point(mem)
            if point is not None:
                chart["data"].append(point)
            chart_list.append(chart)
    diagnoses = list(summary.get("diagnoses") or []) + list((eff or {}).get("diagnoses") or [])
    return {
        "title": f"Training-loop profile, run {run.get('id', '?')}",
        "run": {
            "id": run.get("id"),
            "status": run.get("status"),
            "started": run.get("started"),
            "wall_s": run.get("wall_s"),
            "phases": run.get("phases", []),
            "notes": run.get("notes", []),
        },
        "tool": summary.get("tool", {}),
        "schema_version": summary.get("schema_version"),
        "categories": list(CATEGORIES),
        "category_labels": dict(charts.CATEGORY_LABELS),
        "category_colors": dict(charts.COLORS),
        "answers": answers,
        "focus": cards,
        "workloads": rows,
        "failed": [
            *({"label": r["label"], "status": r["status"], "error": r["error"]} for r in failed),
            *failed_processes(summary),
        ],
        "comparison": cmp,
        "job": job or None,
        "experiments": x,
        "sweep": sweep_items,
        "crossover": (x or {}).get("crossover"),
        "op_tables": op_tables(summary),
        "line_tables": line_tables(summary),
        "flame_graphs": flame_graphs(summary),
        "diagnoses": diagnoses,
        "method": method_rows(summary),
        "environment": summary.get("environment", {}),
        "efficiency": eff,
        "charts": chart_list,
        "chart_ids": [c["id"] for c in chart_list],
    }
