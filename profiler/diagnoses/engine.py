"""Diagnoses: rules kept as data, each a condition, a message and a fix over a run's figures.

Place in the pipeline: analysis (pure). A module that knows some figures (attribution, training
efficiency) builds *facts*: flat dicts of numbers and names for one subject (a workload, a pair
of workloads). A ``Rule`` is one row of a table: the facts it needs, a condition over them, and
message and fix templates formatted from the same facts. Nothing in a message is typed in: every
number comes from the facts, so a rule that has nothing to say stays silent.

A rule whose needed facts are missing (or None) is skipped, never an error: a run without a
phase simply yields fewer diagnoses.
"""

from __future__ import annotations

import os
import string
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

Facts = Mapping[str, Any]


@dataclass(frozen=True)
class Rule:
    """One diagnosis rule.

    Attributes:
        id: stable identifier (``feed_dict_cost``).
        subject: the kind of facts it reads (``workload``, ``pair``, ...).
        needs: fact keys that must be present and not None.
        when: the condition over the facts.
        message: ``str.format`` template over the facts (the finding, with its numbers).
        fix: template for what to do about it (with what the experiments measured, where known).
        cost: the fact (µs per step) the finding accounts for, which ranks findings; empty for
            findings that are not about time.
        share: the fact (% of the script's wall time) a finding about time outside the steps
            holds; empty for the others.
        lead: template for what the verdict says of it where it holds most of the script's
            time ("the script's 240 calls of model.predict took 55% of its 140.2 s").
    """

    id: str
    subject: str
    needs: tuple[str, ...]
    when: Callable[[Facts], bool]
    message: str
    fix: str = ""
    cost: str = ""
    share: str = ""
    lead: str = ""

    def __post_init__(self) -> None:
        for template in (self.message, self.fix, self.lead):
            for _, field, _, _ in string.Formatter().parse(template):
                if field is not None and field.split(".")[0].split("[")[0] not in self.needs:
                    raise ValueError(f"rule {self.id}: template field {field!r} is not in needs")
        if self.cost and self.cost not in self.needs:
            raise ValueError(f"rule {self.id}: its cost {self.cost!r} is not in needs")
        if self.share and self.share not in self.needs:
            raise ValueError(f"rule {self.id}: its share {self.share!r} is not in needs")
        if bool(self.share) != bool(self.lead):
            raise ValueError(f"rule {self.id}: a share needs a lead, and a lead a share")


@dataclass(frozen=True)
class Diagnosis:
    """A rule that fired, with its message and fix formatted from the run's facts."""

    rule: str
    subject: str
    name: str
    message: str
    fix: str
    cost_us: float | None = None
    #: The advice was measured on the user's loop and did not help: ``fix`` says so instead.
    refuted: bool = False
    #: The % of the script's wall time it holds, for a finding about time outside the steps.
    script_pct: float | None = None
    #: What the verdict says of it where it holds most of the script's time.
    lead: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rule": self.rule,
            "subject": self.subject,
            "name": self.name,
            "message": self.message,
            "fix": self.fix,
            "cost_us": round(self.cost_us, 3) if self.cost_us is not None else None,
        }
        if self.refuted:
            out["refuted"] = True
        if self.script_pct is not None:
            out["script_pct"] = round(self.script_pct, 1)
            out["lead"] = self.lead
        return out


#: Set (to anything but "" or "0") to let an error in a finding's analysis end the run, as the
#: test suite does; by default the finding is left out and the rest of the answer is kept.
STRICT_ENV = "PROFILER_STRICT"

T = TypeVar("T")


def guarded(subject: str, compute: Callable[..., T], *args: Any) -> T | None:
    """``compute(*args)``, or None after one line on stderr if it raises: a finding that cannot be
    worked out on a script nobody here has seen costs that finding, not the run's answer (an
    IndexError in one loop rule ended a run with a traceback and no report)."""
    try:
        return compute(*args)
    except Exception as exc:  # any analysis bug: the suite re-raises (STRICT_ENV)
        if os.environ.get(STRICT_ENV, "") not in ("", "0"):
            raise
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        where = f"{Path(frame.filename).name}:{frame.lineno}"
        print(
            f"profiler: a finding on {subject} could not be worked out "
            f"({type(exc).__name__} at {where}); it is left out, the measurements are kept",
            file=sys.stderr,
        )
        return None


def evaluate(rules: Iterable[Rule], subject: str, facts: Iterable[Facts]) -> list[Diagnosis]:
    """Every rule of ``subject`` that fires on each facts dict (each must have a ``name``)."""
    out = []
    for f in facts:
        for rule in rules:
            if rule.subject != subject:
                continue
            if any(f.get(k) is None for k in rule.needs):
                continue
            d = guarded(str(f.get("name", "")), _fire, rule, subject, f)
            if d is not None:
                out.append(d)
    return out


def _fire(rule: Rule, subject: str, f: Facts) -> Diagnosis | None:
    """The rule's finding on ``f``, or None if its condition does not hold."""
    if not rule.when(f):
        return None
    return Diagnosis(
        rule=rule.id,
        subject=subject,
        name=str(f.get("name", "")),
        message=rule.message.format(**f),
        fix=rule.fix.format(**f),
        cost_us=float(f[rule.cost]) if rule.cost else None,
        script_pct=float(f[rule.share]) if rule.share else None,
        lead=rule.lead.format(**f),
    )


def ranked(found: Iterable[Diagnosis]) -> list[Diagnosis]:
    """The costliest findings first (those without a cost last, in their order)."""
    return sorted(found, key=lambda d: -(d.cost_us if d.cost_us is not None else -1.0))
