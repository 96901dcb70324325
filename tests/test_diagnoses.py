"""The diagnosis engine: rules fire on their condition, stay silent without their facts."""

from __future__ import annotations

import pytest

from profiler.diagnoses.engine import Rule, evaluate

RULE = Rule(
    id="slow",
    subject="workload",
    needs=("name", "step_us", "share"),
    when=lambda f: f["share"] > 0.5,
    message="{name}: {step_us:.0f} µs/step, {share:.0%} overhead",
    fix="do less per step",
)


def test_rule_fires_with_numbers_from_the_facts():
    (d,) = evaluate([RULE], "workload", [{"name": "a", "step_us": 190.4, "share": 0.84}])
    assert d.message == "a: 190 µs/step, 84% overhead"
    assert d.fix == "do less per step"
    assert d.to_json()["rule"] == "slow"


def test_rule_is_silent_below_its_condition_without_facts_or_for_another_subject():
    assert evaluate([RULE], "workload", [{"name": "a", "step_us": 10.0, "share": 0.2}]) == []
    assert evaluate([RULE], "workload", [{"name": "a", "step_us": None, "share": 0.9}]) == []
    assert evaluate([RULE], "workload", [{"name": "a", "share": 0.9}]) == []
    assert evaluate([RULE], "pair", [{"name": "a", "step_us": 1.0, "share": 0.9}]) == []


def test_a_template_may_only_use_declared_facts():
    with pytest.raises(ValueError, match="'typed' is not in needs"):
        Rule("bad", "workload", ("name",), lambda f: True, "{name} {typed}")
