"""The what-if phase: the fixes that apply to a script's loop, applied by the toolkit for a few
hundred steps and measured against the loop as written.

Place in the pipeline: the last phase of a script process. The what-ifs that apply come from
``profiler.capture.whatifs`` (decided once the warm-up has shown what the script uses); each
runs after the phase's short window as alternating blocks of baseline and variant steps
(``PAIRS`` pairs at least, more while the saving's interval is wide, the order alternating so
drift cancels; each block's median step is recorded, about ``BLOCK_S`` of steps each, so a
what-if adds one to three seconds of steps). The
record (``WhatIfData``) holds the block medians; the analysis (``profiler.analysis.whatif``)
turns them into the measured saving, its resolution, and the verdict against the prediction.

A variant that raises is switched off at once and its step runs as written (the what-ifs guard
their own calls): the script never sees a what-if fail. The case study's workloads get none:
their fixes are the hand-written experiment pairs.
"""

from __future__ import annotations

import itertools
from typing import Any

from profiler.capture.loop import NUMPY, LoopEnded, WorkloadSpec
from profiler.capture.memory import rss_bytes
from profiler.capture.phases import Budget, Phase, PhaseContext
from profiler.model import FAILED, OK, PARTIAL, SKIPPED, PhaseRecord, Window, blocks, median_ns
from profiler.model.records import WhatIfData, WhatIfResult

#: Baseline/variant pairs per what-if at least, and each block's length (seconds of steps,
#: clamped). More pairs follow while the saving's 95% interval is wide
#: (``profiler.model.blocks.settled``), up to ``MAX_PAIRS`` and ``MAX_S`` of blocks.
PAIRS = blocks.MIN_PAIRS
MAX_PAIRS = blocks.MAX_PAIRS
MAX_S = blocks.MAX_S
BLOCK_S = 0.15
BLOCK_MIN = 3
BLOCK_MAX = 300
#: The fewest pairs a what-if is planned with when steps are scarce: a saving's interval needs
#: two (a clean-clone suite beside a busy process planned one, and its verdict had no interval).
FEWEST_PAIRS = 2
#: The shortest block when steps are scarce (or the natural block, if shorter).
BLOCK_FIT = 20
#: Why a planned what-if was dropped when steps were scarce.
NO_ROOM = "the steps left did not leave room for it"
#: What-ifs whose first call with the fix on compiles or traces a new function (XLA, several
#: batches per call): one unmeasured call of it comes before the first pair. Keras's VAE
#: example compiled with XLA read 466, 144 and 200 ms in its three blocks against 80-90 ms as
#: written: the first held the compilation's aftermath, and the interval, -623 to +253 ms, no
#: verdict (XLA 2x slower on it without the profiler).
WARM_FIRST = frozenset(
    {"keras_jit", "function_jit", "keras_steps_4", "keras_steps_16", "functions_graph"}
)
#: The script options' key naming the what-ifs an earlier run of the script measured.
SKIP_KEY = "whatif_measured"


class WhatIfPhase(Phase):
    name = "whatif"
    min_window = 2

    def __init__(self, budget: Budget, options: dict[str, Any]) -> None:
        super().__init__(budget)
        self.mode = str(options.get("whatif") or "on")
        self.worker = bool(options.get("job_worker"))
        only = str(options.get("whatif_only") or "")
        self.only = {x.strip() for x in only.split(",") if x.strip()} or None
        # A later run of a script measures the what-ifs an earlier run had no room for
        # (``profiler.processes.launch``), not again the ones it measured.
        self.skip = frozenset((options.get("script") or {}).get(SKIP_KEY) or ())
        self.variants: list[Any] | None = None
        self.not_run: list[tuple[str, str]] = []
        self.pairs = PAIRS
        self.block: int | None = None  # set when steps are scarce (``fit_extra``)

    def applies_to(self, spec: WorkloadSpec) -> str | None:
        if self.mode == "off":
            return "--no-whatif"
        if self.worker:
            return (
                "a worker of a multi-worker job: a what-if would change the step on this worker "
                "alone, and its collectives would no longer match the other workers'"
            )
        from profiler.capture.script.spec import ScriptSpec

        if not isinstance(spec, ScriptSpec):
            return "the case study's fixes are its hand-written experiment pairs"
        if not spec.uses_tensorflow and spec.framework != NUMPY:
            return f"{spec.framework} workload: every what-if is a TensorFlow or numpy fix"
        # A numpy script gets the numpy what-if alone (``whatifs.candidates``): float32 arrays.
        return None

    def _variants(self, ctx: PhaseContext) -> list[Any]:
        if self.variants is None:
            from profiler.capture import whatifs

            driver = getattr(ctx.loop, "driver", None)
            if driver is None:
                self.variants = []
                return self.variants
            allow_all = self.mode == "all"
            found, self.not_run = ctx.loop.in_loop_thread(  # type: ignore[attr-defined]
                lambda: whatifs.candidates(driver, driver.script_globals, allow_all, self.only)
            )
            self.variants = [v for v in found if v.id not in self.skip]
            self.not_run = [(k, why) for k, why in self.not_run if k not in self.skip]
        return self.variants

    def _late(self, ctx: PhaseContext) -> None:
        """The what-ifs the run showed to apply after the plan was made (a function's retrace
        is seen at its second trace, often after the plan): built when the phase runs, and
        measured after the planned ones (the script may end first; that is recorded)."""
        from profiler.capture import whatifs

        driver = getattr(ctx.loop, "driver", None)
        if driver is None or self.variants is None:
            return
        planned = {v.id for v in self.variants}
        dropped = {k for k, why in self.not_run if why == NO_ROOM}
        wanted = set(whatifs.ids()) if self.only is None else set(self.only)
        ask = wanted - planned - dropped - self.skip
        if not ask:
            return
        allow_all = self.mode == "all"
        found, not_run = ctx.loop.in_loop_thread(  # type: ignore[attr-defined]
            lambda: whatifs.candidates(driver, driver.script_globals, allow_all, ask)
        )
        self.variants.extend(found)
        late = [(k, why) for k, why in not_run if k in ask]
        self.not_run = [(k, why) for k, why in self.not_run if k not in ask] + late

    def _block(self, ctx: PhaseContext) -> int:
        if self.block is not None:
            return self.block
        want = int(BLOCK_S * 1e9 / max(ctx.step_ns, 1))
        return max(BLOCK_MIN, min(BLOCK_MAX, want))

    def extra_steps(self, ctx: PhaseContext) -> int:
        variants = self._variants(ctx)
        warm = sum(_warm(v) for v in variants)
        return len(variants) * self.pairs * 2 * self._block(ctx) + warm

    def limit_extra(self, ctx: PhaseContext, seconds: float) -> int:
        # Each what-if gets its own ~second: ``seconds`` is a phase's cap, not the sum's.
        return self.extra_steps(ctx)

    def fit_extra(self, ctx: PhaseContext, tight: int, cap: int) -> int:
        """Steps are scarce: shorter blocks (down to ``BLOCK_FIT``), fewer pairs (down to
        ``FEWEST_PAIRS``: one pair has no interval, so no verdict), then fewer what-ifs, to fit
        ``cap`` steps."""
        variants = self._variants(ctx)
        block = self._block(ctx)
        if variants and len(variants) * self.pairs * 2 * block > cap:
            fit = cap // (len(variants) * self.pairs * 2)
            self.block = block = max(min(block, fit), min(block, BLOCK_FIT))
        while self.variants and len(self.variants) * self.pairs * 2 * block > cap:
            if self.pairs > FEWEST_PAIRS:
                self.pairs -= 1
            else:
                dropped = self.variants.pop()
                self.not_run.append((dropped.id, NO_ROOM))
        return self.extra_steps(ctx)

    def remove(self, ctx: PhaseContext, window: Window) -> PhaseRecord:
        self._variants(ctx)
        self._late(ctx)
        variants = self.variants or []
        if not variants:
            reasons = "; ".join(f"{k}: {why}" for k, why in self.not_run) or "none known"
            crowded = any(why == NO_ROOM for _k, why in self.not_run)
            return PhaseRecord(
                name=self.name,
                status=SKIPPED,
                window=window,
                reason=f"no what-if applies to this loop ({reasons})"
                if not crowded
                else f"what-ifs apply but got no steps ({reasons})",
                data=WhatIfData(not_run=tuple(self.not_run)),
                # Another run of the script fits them (profiler.processes.rerun).
                missed=crowded,
            )
        results = []
        n = self._block(ctx)
        ended = False
        steps_left = getattr(ctx.loop, "steps_left", None)
        for i, v in enumerate(variants):
            if ended:
                self.not_run.append((v.id, "the script ended first"))
                continue
            # Steps the later what-ifs' planned pairs need, kept from this one's extra pairs.
            rest = variants[i + 1 :]
            block = _whole(n, v.group)
            left = steps_left() if steps_left is not None else None
            fewest = self.pairs * 2 * max(v.group, min(BLOCK_MIN, block)) + v.group
            later = _kept_for_later(
                left, fewest, [self.pairs * 2 * _whole(n, r.group) + r.group for r in rest]
            )
            if left is not None:
                # The plan did not count the what-ifs found late nor blocks rounded up to
                # whole calls of k steps (fit's steps_per_execution): where the steps known
                # to be left fall short, this one's blocks shrink to what leaves the later
                # ones theirs (a 4,000-batch fit ran out of steps in its last what-if).
                fit = (left - later - v.group - _warm(v)) // (self.pairs * 2) // v.group * v.group
                if fit < max(v.group, min(BLOCK_MIN, block)):
                    self.not_run.append((v.id, NO_ROOM))
                    continue
                block = min(block, fit)
            result, ended = self._measure(ctx, v, block, later)
            results.append(result)
        status = PARTIAL if ended and not results else OK
        if not results and not ended:
            reasons = "; ".join(f"{k}: {why}" for k, why in self.not_run)
            return PhaseRecord(
                name=self.name,
                status=SKIPPED,
                window=window,
                reason=f"what-ifs apply but got no steps ({reasons})",
                data=WhatIfData(not_run=tuple(self.not_run)),
                missed=True,
            )
        return PhaseRecord(
            name=self.name,
            status=status,
            window=window,
            data=WhatIfData(results=tuple(results), not_run=tuple(self.not_run)),
            # What-ifs that had no room are measured in another run of the script, where the
            # budget allows (an LSTM's 126-step fit measured one of its three).
            missed=status == PARTIAL or any(why == NO_ROOM for _k, why in self.not_run),
        )

    def _measure(
        self, ctx: PhaseContext, v: Any, n: int, later: int = 0
    ) -> tuple[WhatIfResult, bool]:
        """Alternating blocks of one what-if; (its result, whether the script ended). Pairs
        beyond the planned ones run only while the steps known to be left (if any) hold them
        and ``later`` steps for the what-ifs after it."""
        loop: Any = ctx.loop
        steps_left = getattr(loop, "steps_left", None)
        base: list[int] = []
        var: list[int] = []
        grew: dict[bool, list[int]] = {False: [], True: []}
        ended = False
        started = ctx.clock()
        try:
            if _warm(v):
                loop.hold(v.off, v.on)
                loop.in_loop_thread(v.on)
                marks = [ctx.clock()]
                loop.run(_warm(v), marks, ctx.clock)
                ended = len(marks) - 1 < _warm(v)
                started = ctx.clock()
            for pair in range(0 if ended or v.errors else MAX_PAIRS):
                if pair >= self.pairs:
                    if _settled(base, var, ctx.clock() - started):
                        break
                    left = steps_left() if steps_left is not None else None
                    if left is not None and left < 2 * n + later + v.group:
                        break
                for on in (False, True) if pair % 2 == 0 else (True, False):
                    # The script's own code after the loop runs as written (a float32
                    # block's last step was the script's: its final print read float32).
                    # Held before the variant is on and after it is off: the memory census
                    # is taken only while nothing is held.
                    if on:
                        loop.hold(v.off, v.on)
                        loop.in_loop_thread(v.on)
                    else:
                        loop.in_loop_thread(v.off)
                        loop.hold(None)
                    before = rss_bytes()
                    marks = [ctx.clock()]
                    loop.run(n, marks, ctx.clock)
                    after = rss_bytes()
                    durs = [b - a for a, b in itertools.pairwise(marks)]
                    if len(durs) < n:
                        ended = True
                    elif before is not None and after is not None:
                        # Whole blocks only: a fix for a growing loop shows its growth stop.
                        grew[on].append(after - before)
                    durs = _groups(durs, v.group)
                    if durs:
                        figure = sum(durs) // len(durs) if v.block_mean else median_ns(durs)
                        (var if on else base).append(figure)
                    if ended or v.errors:
                        break
                if ended or v.errors:
                    break
        except LoopEnded:
            ended = True
        finally:
            loop.hold(None)
            if not ended:
                loop.in_loop_thread(v.off)
                ended = self._settle(ctx, v)
            else:
                v.off()
        status = FAILED if v.errors else (PARTIAL if ended else OK)
        return (
            WhatIfResult(
                id=v.id,
                title=v.title,
                removes=v.removes,
                keeps_results=v.keeps_results,
                results_note=v.results_note,
                status=status,
                block_steps=n,
                baseline_ns=tuple(base),
                variant_ns=tuple(var),
                error="; ".join(v.errors[:3]),
                results_check=v.check,
                removes_share=v.share,
                group=v.group,
                block_mean=v.block_mean,
                baseline_grew=tuple(grew[False]),
                variant_grew=tuple(grew[True]),
            ),
            ended,
        )

    def _settle(self, ctx: PhaseContext, v: Any) -> bool:
        """Steps until ``v`` is fully off (at most its group); whether the script ended."""
        loop: Any = ctx.loop
        for _ in range(v.group):
            if loop.in_loop_thread(v.settled):
                return False
            marks = [ctx.clock()]
            try:
                loop.run(1, marks, ctx.clock)
            except LoopEnded:
                return True
            if len(marks) < 2:
                return True
        return False

    def abort(self, ctx: PhaseContext) -> None:
        for v in self.variants or []:
            try:
                v.off()
            except Exception:  # best effort: the run is failing already
                pass


def _warm(v: Any) -> int:
    """The unmeasured steps before a what-if's first pair (``WARM_FIRST``): one call's."""
    return int(v.group) if v.id in WARM_FIRST else 0


def _settled(base: list[int], var: list[int], spent_ns: int) -> bool:
    """Whether a what-if has pairs enough (``profiler.model.blocks.settled``, this phase's
    budget)."""
    return blocks.settled(base, var, spent_ns, MAX_S)


def _kept_for_later(left: int | None, fewest: int, needs: list[int]) -> int:
    """The steps a what-if leaves for the ones after it: their planned steps (``needs``, in
    the order they run) as far as they fit in the steps ``left`` beside this one's ``fewest``.
    The first listed runs first: a later one never takes an earlier one's room (an LSTM's
    126-step fit kept its steps for steps_per_execution=4 and 16 and left none for XLA, 2.4x
    faster there without the profiler)."""
    if left is None:
        return sum(needs)
    kept = 0
    for need in needs:
        if fewest + kept + need > left:
            break
        kept += need
    return kept


def _whole(n: int, group: int) -> int:
    """``n`` steps rounded up to whole calls of ``group`` steps."""
    return -(-n // group) * group


def _groups(durs: list[int], group: int) -> list[int]:
    """Each whole group of ``group`` consecutive steps as its mean step (a variant that runs
    ``group`` steps in one call has one long step and ``group - 1`` short ones)."""
    if group <= 1:
        return durs
    whole = len(durs) // group * group
    return [sum(durs[i : i + group]) // group for i in range(0, whole, group)]
