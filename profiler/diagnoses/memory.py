"""Memory diagnoses: a process that grows every step, named with what grows.

Place in the pipeline: analysis (pure), part of the performance diagnoses
(``profiler.diagnoses.performance`` calls ``memory_facts`` and includes ``RULES``).
``memory_facts`` reads the script's memory record through ``profiler.analysis.memory``: the
growth per step after the warm-up with its interval, the size the fit projects at the run's
last step, and the likeliest cause with its figure. The finding fires only where the interval
excludes zero and the growth adds ``MEM_GROWTH_MB`` or ``MEM_GROWTH_SHARE`` of the last size
over the run; its fix is the one for the cause found (none is offered for a cause not found).
A script that ran out of memory has no time split: ``unattributed_facts`` gives the finding its
memory facts, and ``grew_sentence`` says what grew in the ending's message.
"""

from __future__ import annotations

from typing import Any

from profiler.analysis import memory
from profiler.diagnoses import calls as call_rules
from profiler.diagnoses.engine import Rule

#: Growth over the measured steps worth a finding: this many MB, or this share of the last size.
MEM_GROWTH_MB = 10.0
MEM_GROWTH_SHARE = 0.05


def _bytes(b: float) -> str:
    for unit, size in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if abs(b) >= size:
            return f"{b / size:,.1f} {unit}"
    return f"{b:,.0f} bytes"


def _cause_text(c: memory.Cause) -> tuple[str, str]:
    """(what grows, with its figure; the fix for it)."""
    if c.kind == "container":
        held = ""
        if c.bytes_per_step is not None:
            share = f", {100 * c.share:.0f}% of the growth" if c.share is not None else ""
            held = f" ({_bytes(c.bytes_per_step)} a step{share})"
        what = (
            f"`{c.label}` gets {c.per_step:,.2g} item{'s' if c.per_step >= 2 else ''} a step, "
            f"each {c.detail}{held}: the loop keeps them"
        )
        if "tf.Tensor" in c.detail:
            fix = (
                f"Keep Python numbers in `{c.label}`, not tensors: append float(x) for a scalar "
                "(x.numpy() for values you need), or keep a running mean; or empty it each epoch."
            )
        else:
            fix = (
                f"Keep only what `{c.label}` needs (a float, a running mean, the last N items "
                "in a collections.deque(maxlen=N)), or empty it each epoch."
            )
        return what, fix
    if c.kind == "array":
        share = f", {100 * c.share:.0f}% of the growth" if c.share is not None else ""
        what = (
            f"`{c.label}` grows by {_bytes(c.per_step)} a step{share}, now {c.detail}: the "
            "loop makes it anew, a little larger, at every step (np.append, np.vstack or "
            "np.concatenate of itself)"
        )
        fix = (
            f"Append each step's values to a Python list and make `{c.label}` once after the "
            "loop (np.array(rows)), or allocate it once for all the steps and fill row i; keep "
            "only what the script reads (every Nth row, the last N)."
        )
        return what, fix
    if c.kind == "graph":
        site = f" at line {c.line}: `{c.text}`" if c.line is not None else ""
        ops = f"{c.detail}{site}".strip()
        what = f"{c.label} grows by {c.per_step:,.1f} ops a step: the loop builds ops" + (
            f" ({ops})" if ops else ""
        )
        fix = (
            "Build every op once, before the loop: a placeholder fed each step instead of a new "
            "op (for an assignment: `ph = tf.compat.v1.placeholder(...); assign = "
            "var.assign(ph)` once, then `sess.run(assign, {ph: value})`), and call "
            "`tf.compat.v1.get_default_graph().finalize()` before the loop so a new op raises."
        )
        if "Saver(" in c.text:
            fix = (
                "Create the Saver once, before the loop, and call its save() in the loop: each "
                "tf.compat.v1.train.Saver() adds its save and restore ops to the graph."
            )
        return what, fix
    if c.kind == "function":
        what = (
            f"tf.function `{c.label}` is traced again {c.per_step:,.2g} times a step: each "
            "trace keeps a new concrete function in its cache"
        )
        fix = (
            f"Pass the values that change to `{c.label}` as tensors (tf.constant(x), or a "
            "tf.Variable assigned each step), not Python numbers or new objects, so one trace "
            "serves every step; or give it an input_signature."
        )
        return what, fix
    calls = f"{int(c.detail):,} times, " if c.detail.isdigit() else ""
    what = (
        f"model.predict was called {calls}{c.per_step:,.2g} for each training step; each call "
        "sets up its own data adapter and iterator"
    )
    fix = (
        "Call model.predict_on_batch(x), or the model in one tf.function (predict_fn = "
        "tf.function(model); predict_fn(x, training=False)), instead of model.predict for a "
        "batch in a loop; model(x, training=False) sets nothing up either but runs eagerly, layer "
        "by layer (a recurrent layer's timesteps one by one: slower than predict for an LSTM)."
    )
    return what, fix


#: The what-ifs that apply a growth cause's fix at run time, by the cause's kind: their blocks
#: read resident memory, so the finding quotes the growth with and without the fix.
WHATIF_FOR_CAUSE: dict[str, tuple[str, ...]] = {
    "function": ("tensor_args", "reduce_retracing"),
    "predict": ("predict_direct",),
}
#: A container holding less than this share of the growth is not named as its cause.
MIN_CAUSE_SHARE = 0.1
#: The fix's growth at most this share of the loop's as written: "the growth stops".
STOPS_SHARE = 0.25


def growth_sentence(m: Any) -> str:
    """What a what-if's blocks measured of the growth (``WhatIf.grew_per_step``): the bytes a
    step as written and with the fix, each with its blocks' range; "" where not read."""
    if m.grew_per_step is None or m.grew_range is None:
        return ""
    base, var = m.grew_per_step
    (b_lo, b_hi), (v_lo, v_hi) = m.grew_range
    if base <= 0:
        verdict = "the loop did not grow in these blocks: no figure for the fix"
    elif var <= STOPS_SHARE * base:
        verdict = "the growth stops"
    elif var < base:
        verdict = f"{100 * (1 - var / base):.0f}% less growth"
    else:
        verdict = "no less growth: not the fix for this growth"
    blocks = f"{m.grew_blocks} block{'s' if m.grew_blocks != 1 else ''} each"
    return (
        f"Measured on your loop, with {m.title}: {verdict} ({_bytes(base)} a step as written, "
        f"blocks {_bytes(b_lo)} to {_bytes(b_hi)}; {_bytes(var)} a step with it, blocks "
        f"{_bytes(v_lo)} to {_bytes(v_hi)}; {blocks} of {m.block_steps:,} steps)."
    )


def memory_facts(f: dict[str, Any], trace: Any) -> None:
    """The process's growth per step after the warm-up and what grows
    (``profiler.analysis.memory``)."""
    script = trace.script or {}
    m = memory.analyse(script.get("memory"), script, memory.clean_spans(trace))
    if m is None or m.growth_per_step is None or m.growth_low is None:
        return
    f["mem_grows"] = m.grows
    f["mem_kb_per_step"] = m.growth_per_step / 1024
    f["mem_low_kb"] = m.growth_low / 1024
    f["mem_high_kb"] = (m.growth_high or 0.0) / 1024
    # In bytes where a step adds under a KB (a per-sample loop's 8 bytes read "0.0 KB").
    f["mem_per_step_text"] = _bytes(m.growth_per_step)
    f["mem_low_text"] = _bytes(m.growth_low)
    f["mem_high_text"] = _bytes(m.growth_high or 0.0)
    f["mem_steps"] = m.steps
    f["mem_added_mb"] = m.growth_per_step * m.steps / 2**20
    f["mem_last_mb"] = m.last_bytes / 2**20
    f["mem_last_step"] = m.last_step
    f["mem_projected_mb"] = (m.projected_bytes or m.last_bytes) / 2**20
    f["mem_late"] = m.late
    minor = m.causes and m.causes[0].share is not None and m.causes[0].share < MIN_CAUSE_SHARE
    if m.causes and not minor:
        what, fix = _cause_text(m.causes[0])
        f["mem_cause"] = what
        f["mem_cause_fix"] = fix
        f["mem_cause_kind"] = m.causes[0].kind
    elif minor:
        # A container that holds a sliver of the growth is not its cause (a fit callback's
        # list of 24-byte floats was given the fix of a 13.7 KB-a-step growth).
        f["mem_cause"] = (
            f"{_cause_text(m.causes[0])[0]}; the rest is held elsewhere (inside a library, or "
            "native memory): no name of the script's was seen holding it"
        )
        f["mem_cause_fix"] = ""
        f["mem_cause_kind"] = ""
    elif f.get("recreated_fn"):
        # A tf.function made anew each iteration (function_recreated): each new one keeps its
        # graph and concrete function (a custom loop's, 25 made: 92 KB a step).
        name = f["recreated_fn"]
        f["mem_cause"] = (
            f"the tf.function `{name}` was made anew {f['recreated_n']} times, each new one "
            "keeping its traced graph"
        )
        f["mem_cause_fix"] = f"Define `{name}` once, before the loop."
        f["mem_cause_kind"] = "recreated"
    elif call_rules.compiles(script) >= call_rules.RECOMPILES:
        # model.compile in a loop: each makes a new optimizer and train function, kept by the
        # model's graph (a loop recompiling every epoch: ~170 KB a step without the profiler,
        # flat when compiled once).
        n = call_rules.compiles(script)
        models = int((script.get("fit") or {}).get("models") or 0)
        f["mem_cause_kind"] = "recreated"
        if models >= max(n - 1, 2):
            # Each compile a model of its own (TF's time series tutorial: Linear, Dense, Conv
            # and LSTM fit one after another, and a baseline evaluated): no compile to take
            # out of a loop.
            f["mem_cause"] = (
                f"model.compile ran {n} times, for {models} models fit trained one after "
                "another: each model keeps its own optimizer and train function"
            )
            f["mem_cause_fix"] = (
                f"The {models} models have one architecture: {call_rules.RESET_MODEL}, and "
                "the process does not grow with the trials (a new Dense model per trial: 2.7 "
                "MB a trial, 2.4 MB with keras.backend.clear_session() before each, none with "
                "one model reset, without the profiler)."
                if call_rules.one_architecture(script.get("fit") or {})
                else "Each model is compiled once, as it should be; where a model is no "
                "longer needed after its fit, del it and call keras.backend.clear_session() "
                "before building the next, so its graph and optimizer go."
            )
        else:
            f["mem_cause"] = (
                f"model.compile ran {n} times: each makes a new optimizer and a new train "
                "function, traced and kept"
            )
            f["mem_cause_fix"] = (
                "Compile once, before the loop (a learning rate changed with a schedule, a "
                "callback or optimizer.learning_rate.assign); a new model for each "
                "configuration of a search: keras.backend.clear_session() before building it."
            )
    else:
        f["mem_cause"] = (
            "no graph, tf.function, container or array of the script's was seen growing (what "
            "grows is held elsewhere: inside a library, or native memory)"
        )
        f["mem_cause_fix"] = ""
        f["mem_cause_kind"] = ""


def grew_sentence(trace: Any) -> str:
    """What grew, for the message of a script that ran out of memory: ``what grew: 48.0 MB a
    step (95%: 43.4 MB to 50.0 MB) over the 31 steps after the warm-up, from 636 MB at the
    first step to 2,636 MB; `held` gets ...`` (or what of it was not measured)."""
    script = trace.script or {}
    m = memory.analyse(script.get("memory"), script, memory.clean_spans(trace))
    if m is None:
        return "what grew: not measured (no memory record)"
    span = f"from {_bytes(m.first_bytes)} at the first step to {_bytes(m.last_bytes)}"
    if m.growth_per_step is None or m.growth_low is None:
        return (
            f"what grew: resident memory went {span} (step {m.last_step:,}); its growth per "
            "step was not measured (too few steps or samples outside the phases)"
        )
    rate = (
        f"{_bytes(m.growth_per_step)} a step (95%: {_bytes(m.growth_low)} to "
        f"{_bytes(m.growth_high or 0.0)}) over the {m.steps:,} steps after the warm-up, {span}"
    )
    if not m.grows:
        return f"what grew: no growth per step measured ({rate})"
    if m.causes:
        return f"what grew: {rate}; {_cause_text(m.causes[0])[0]}"
    return (
        f"what grew: {rate}; no graph, tf.function, container or array of the script's was seen "
        "growing (held inside a library, or native memory)"
    )


def unattributed_facts(workloads: Any) -> list[dict[str, Any]]:
    """The memory facts of the workloads that have no time split (a script that ran out of
    memory failed, so its steps are not attributed): the growth finding still reads them."""
    out = []
    for w in workloads:
        trace = getattr(w, "trace", None)
        if getattr(w, "attribution", None) is not None or trace is None or not trace.script:
            continue
        f: dict[str, Any] = {"name": w.outcome.spec.name, "label": w.outcome.spec.label}
        memory_facts(f, trace)
        if "mem_grows" in f:
            out.append(f)
    return out


#: Growth with no cause seen is a finding only where its interval's low end is at least this
#: share of it: the mixed-precision guide's 35-step fit read "grows by 570 KB every step (95%:
#: 12 to 44,730 KB)", its allocator filling over the first ~20 steps and level after them,
#: measured without the profiler.
TIGHT_LOW_SHARE = 0.25


def _tight(f: Any) -> bool:
    return bool(f["mem_low_kb"] >= TIGHT_LOW_SHARE * f["mem_kb_per_step"])


def _grows(f: Any) -> bool:
    """Growth worth a finding: enough of it, and either its cause seen or the growth measured
    late in the run too. Without either it may be an allocator filling up: a DCGAN's process
    rose 119 KB a step over its first 170 steps and 31 KB a step over the next 510, measured
    without the profiler; the phases left clean steps only in its first third."""
    return bool(
        f["mem_grows"]
        and (f["mem_cause_kind"] or (f.get("mem_late") and _tight(f)))
        and (
            f["mem_added_mb"] >= MEM_GROWTH_MB
            or f["mem_added_mb"] >= MEM_GROWTH_SHARE * f["mem_last_mb"]
        )
    )


_NEEDS = (
    "label",
    "mem_grows",
    "mem_kb_per_step",
    "mem_per_step_text",
    "mem_low_text",
    "mem_high_text",
    "mem_low_kb",
    "mem_high_kb",
    "mem_steps",
    "mem_added_mb",
    "mem_last_mb",
    "mem_last_step",
    "mem_projected_mb",
    "mem_cause",
    "mem_cause_fix",
)
_MESSAGE = (
    "{label}: the process grows by {mem_per_step_text} every step (95%: "
    "{mem_low_text} to {mem_high_text}): {mem_added_mb:,.1f} MB over the "
    "{mem_steps:,} steps after the warm-up, {mem_projected_mb:,.0f} MB resident projected at "
    "the run's last step (step {mem_last_step:,}); {mem_cause}."
)

RULES: tuple[Rule, ...] = (
    Rule(
        id="memory_growth",
        subject="workload",
        needs=_NEEDS,
        when=_grows,
        message=_MESSAGE,
        # Empty where no cause was found: no fix is offered for a cause not seen.
        fix="{mem_cause_fix}",
        # No time cost: its figure is memory (MB read as µs made a growth the verdict's top
        # fix, "up to 2.24 ms a step", for 2,238.8 MB over a run; keeping fewer weight
        # snapshots saved no time, measured without the profiler).
        cost="",
    ),
)
