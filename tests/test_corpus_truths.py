"""Every corpus script of ``tests/data/corpus`` that has a truth file, profiled with no options:
its verdict against its truth, measured without the profiler (``truth/<script>.json``).

Each truth file names the public source, what dominates a step (``top``: a category of the
attribution, or null when the truth is not about one), the findings that must fire and those
that must stay silent, and how the truth was measured. ``make realworld`` runs every case and
prints the table (case, truth, verdict, right or wrong) at the end; ``make test`` runs none of
them (a few minutes each under load; the cases named in ``tests/test_corpus_findings.py`` run
there).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.test_script_run import DATA, cli, only_run

CORPUS = DATA / "corpus"
TRUTHS = sorted((CORPUS / "truth").glob("*.json"))


@dataclass(frozen=True)
class Row:
    """One line of the table ``make realworld`` prints."""

    case: str
    truth: str
    verdict: str
    right: bool
    why: str


#: The rows of this session's cases, printed by ``conftest.pytest_terminal_summary``.
ROWS: list[Row] = []


def _judge(truth: dict, doc: dict, answer: str) -> tuple[bool, str, str]:
    """(right, why not, the verdict line) of one profiled case against its truth."""
    (w,) = doc["workloads"]
    fired = {d["rule"] for d in doc["diagnoses"]}
    verdict = next((ln for ln in answer.splitlines() if ln.startswith("Verdict:")), "")
    wrong = []
    missing = [r for r in truth.get("fires") or [] if r not in fired]
    if missing:
        wrong.append(f"did not fire: {', '.join(missing)}")
    # Either of them is right (inside the windows at a period, or over every step).
    any_of = truth.get("fires_any") or []
    if any_of and not fired & set(any_of):
        wrong.append(f"did not fire: any of {', '.join(any_of)}")
    extra = [r for r in truth.get("silent") or [] if r in fired]
    if extra:
        wrong.append(f"fired: {', '.join(extra)}")
    top = truth.get("top")
    if top:
        # A list: the truth cannot tell them apart (Python and per-op dispatch both go when an
        # eager step becomes a tf.function); any of them is right.
        tops = [top] if isinstance(top, str) else list(top)
        typical = (w.get("attribution") or {}).get("typical_us") or {}
        measured = {k: v for k, v in typical.items() if v is not None and k != "other"}
        got = max(measured, key=lambda k: measured[k]) if measured else None
        if got not in tops:
            wrong.append(f"top category {got}, not {' or '.join(tops)}")
    if not verdict:
        wrong.append("no verdict sentence")
    return not wrong, "; ".join(wrong), verdict


@pytest.mark.realworld
@pytest.mark.tf
@pytest.mark.slow
@pytest.mark.parametrize("truth_file", TRUTHS, ids=[p.stem for p in TRUTHS])
def test_the_verdict_matches_the_truth_measured_without_the_profiler(
    truth_file: Path, tmp_path: Path
) -> None:
    truth = json.loads(truth_file.read_text())
    script = CORPUS / f"{truth_file.stem}.py"
    out = cli(tmp_path, str(script), timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads((only_run(tmp_path) / "summary.json").read_text())
    right, why, verdict = _judge(truth, doc, out.stdout.split("report:")[0])
    ROWS.append(Row(script.name, str(truth.get("truth", "")), verdict, right, why))
    assert right, f"{why}\n{verdict}\n{truth.get('truth')}"


def test_the_judge_reads_fired_silent_and_top() -> None:
    doc = {
        "workloads": [{"attribution": {"typical_us": {"compute": 5.0, "python": 9.0}}}],
        "diagnoses": [{"rule": "a"}, {"rule": "b"}],
    }
    answer = "table\nVerdict: Python is 64% of the step.\nmore"
    ok = _judge({"fires": ["a"], "silent": ["c"], "top": "python"}, doc, answer)
    assert ok == (True, "", "Verdict: Python is 64% of the step.")
    either = _judge({"top": ["dispatch", "python"]}, doc, answer)
    assert either[0] is True
    bad = _judge({"fires": ["c"], "silent": ["b"], "top": "compute"}, doc, "no verdict")
    assert bad[0] is False
    assert bad[1] == (
        "did not fire: c; fired: b; top category python, not compute; no verdict sentence"
    )
