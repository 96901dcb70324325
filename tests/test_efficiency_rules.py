"""The efficiency diagnoses fire on the seed pair and stay silent on two identical loops."""

from __future__ import annotations

from typing import Any

import pytest

from profiler.analysis import efficiency, efficiency_pairs
from profiler.capture.efficiency import EfficiencySpec, run
from profiler.diagnoses import efficiency as efficiency_rules
from profiler.diagnoses import engine as diagnoses
from profiler.workloads import casestudy

#: Three of Keras's epochs and the same samples for the seed's loop; one seed. Keras reaches
#: the default target (excess 0.1) only after ~100k samples, far too slow for a test, so the
#: pair is compared at a target both reach within the budget.
BUDGET = {"numpy": 12_480, "keras": 12_480}
TARGET = efficiency.Targets(n=4160, ref_samples=12_480, ref_updates=3_200, target_excess=10.0)
ALL_RULES = {r.id for r in efficiency_rules.RULES}


def impls(tmp: Any, names: list[str]) -> dict[str, efficiency.Impl]:
    spec = EfficiencySpec(
        out_dir=str(tmp), implementations=names, seeds=[0], budgets=BUDGET, points=60
    )
    found, status = efficiency_pairs._impls(run(spec), casestudy.EFFICIENCY)
    assert [s["status"] for s in status] == ["ok"] * len(names), status
    return found


def fired(facts: dict[str, Any]) -> dict[str, str]:
    found = diagnoses.evaluate(efficiency_rules.RULES, efficiency_rules.SUBJECT, [facts])
    return {d.rule: d.message for d in found}


@pytest.fixture(scope="module")
def seed_pair(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    got = impls(tmp_path_factory.mktemp("seed"), ["adam_handwritten", "keras_adam"])
    return efficiency_pairs.pair_facts(got["adam_handwritten"], got["keras_adam"], TARGET)


@pytest.fixture(scope="module")
def control_pair(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    # Two separate runs of the same loop with the same seed: equal but for timing noise. Two
    # runs apart in time on a shared machine can differ by its load (9.2 against 92 µs an
    # update once, beside the suite's other worker, and overhead_bound fired): a pair a rule
    # fires on is measured again, up to 3 times; a rule that fires on every one still fails.
    for _ in range(3):
        a = impls(tmp_path_factory.mktemp("a"), ["adam_minibatch"])["adam_minibatch"]
        b = impls(tmp_path_factory.mktemp("b"), ["adam_minibatch"])["adam_minibatch"]
        pair = efficiency_pairs.pair_facts(a, b, TARGET)
        if not fired(pair):
            break
    return pair


@pytest.mark.tf
@pytest.mark.parametrize("rule", sorted(ALL_RULES))
def test_each_rule_fires_on_the_seed_pair(seed_pair, rule):
    assert rule in fired(seed_pair)


@pytest.mark.tf
def test_messages_carry_the_runs_numbers(seed_pair):
    m = fired(seed_pair)
    assert m["epochs_are_different_units"].startswith(
        "1 epoch of keras_adam is 130 epochs of adam_handwritten in samples, 4.06 in updates, "
    )
    assert "reuses one batch for 129 epochs" in m["stale_batch"]
    assert (
        "counter is 100 after 3,200 updates: steps shrunk ×0.32" in m["epoch_keyed_bias_correction"]
    )
    assert "(zeros vs glorot_uniform)" in m["initializers_differ"]
    assert "keras_adam's fit reports" in m["printed_loss_is_running_mean"]
    assert m["overhead_bound"].endswith("overhead-bound")
    # The seed's loop is ahead per sample, Keras per epoch: the point of the question.
    assert seed_pair["ts_a"] < seed_pair["ts_b"] and seed_pair["te_a"] > seed_pair["te_b"]


def test_every_rule_is_silent_on_two_identical_loops(control_pair):
    assert control_pair["epoch_samples_ratio"] == 1.0 and control_pair["init_ratio"] == 1.0
    assert control_pair["ts_a"] == control_pair["ts_b"]
    assert fired(control_pair) == {}


def test_rules_are_silent_without_their_facts():
    assert fired({"name": "x", "a": "x", "b": "y"}) == {}
