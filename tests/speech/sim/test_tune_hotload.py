"""Hot loading as a tuner knob (speech.sim.tune, speech.sim.hotload): offered only where copies can be
placed into spare room of an instance, judged on the same draws with the same promise as every
other candidate, and answering a burst shorter than an instance start-up where instance scaling
cannot."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from speech.files import load_artifact
from speech.schema.artifacts import CopyArtifact, QmaxArtifact, TtotalArtifact
from speech.schema.config import PlanInputs
from speech.sim.fleet import run_policy
from speech.sim.hotload import hot_load_day, run_copies, tuner_copy_fleet
from speech.sim.instance import build_instance
from speech.sim.policies import AwsPolicy
from speech.sim.promise import unseen_share_bound
from speech.sim.traces import generate
from speech.sim.tune import HOT_LOAD_KNOBS, KNOBS, Tuner
from tests.conftest import QMAX_REF, ROOT, TTOTAL_REF

COPY = ROOT / "examples" / "artifacts" / "copy-kokoro-82m-g5xlarge-8b1b96bc.json"
BURST_AT_S, BURST_S = 600, 150
"""The burst: twice the base rate for 150 s, shorter than the reference instance start-up (212.8 s)."""


def burst_day(seed: int) -> np.ndarray:
    """Ten minutes at 150 requests/s, the burst at 300, ten more minutes at 150: 22.5 minutes."""
    up = generate(f"step:base=150,factor=2,at={BURST_AT_S},duration={BURST_AT_S + BURST_S},seed={seed}").arrivals
    return np.concatenate([up, generate(f"steady:rps=150,duration=600,seed={seed + 100}").arrivals])


@pytest.fixture(scope="module")
def setup():
    q, t = load_artifact(QMAX_REF, QmaxArtifact), load_artifact(TTOTAL_REF, TtotalArtifact)
    copy = load_artifact(COPY, CopyArtifact)
    model = build_instance(q, t, slo_ms=3000)
    inputs = PlanInputs(slo_ms=3000, peak_rps=300, trough_rps=150)
    return q, t, copy, model, inputs


def test_the_knob_is_offered_only_where_copies_share_an_instance(setup):
    q, t, copy, model, inputs = setup
    # SageMaker gives a copy at least one whole GPU: one copy per ml.g5.xlarge (one A10G), so every
    # added copy waits for a new instance, as on a plain variant; four per ml.g5.12xlarge (four A10G)
    assert tuner_copy_fleet(copy, "ml.g5.xlarge") is None
    fleet = tuner_copy_fleet(copy, "ml.g5.12xlarge")
    assert fleet is not None and fleet.copies_fit == 4 and fleet.t_copy_s == copy.t_copy_s

    plain = Tuner(q, t, inputs, model, 0.995)
    seed = plain.seed_knobs()
    assert plain.knob_names() == KNOBS and set(plain.choices(seed)) == set(KNOBS)
    # without a copy fleet a candidate with the knob has no plan: the search never judges it
    assert plain.plan_for(replace(seed, hot_load_headroom_copies=0)) is None
    assert plain.candidate(replace(seed, hot_load_headroom_copies=0), [(1, burst_day(1))]) is None

    hot = Tuner(q, t, inputs, model, 0.995, copy_fleet=fleet)
    assert hot.knob_names() == (*KNOBS, *HOT_LOAD_KNOBS)
    assert hot.choices(seed)["hot_load_headroom_copies"] == [None, 0, 4, 8]


def test_a_hot_load_candidate_is_judged_on_the_same_draws(setup):
    q, t, copy, model, inputs = setup
    fleet = tuner_copy_fleet(copy, "ml.g5.12xlarge")
    tuner = Tuner(q, t, inputs, model, 0.995, copy_fleet=fleet)
    days = [(i, burst_day(i)) for i in (1, 2)]
    k = replace(tuner.seed_knobs(), hot_load_headroom_copies=4)
    c = tuner.candidate(k, days)
    assert c is not None and len(c.days) == len(days)
    for (_, a), got in zip(days, c.days, strict=True):
        # each day is the hot-load fleet on that draw under the plan's own scaling numbers
        alone = hot_load_day((model, tuner.numbers_for(k), 3000.0, a, replace(fleet, headroom_copies=4)))
        assert got.within_slo_share == alone.within_slo_share and got.instance_hours == alone.instance_hours
    # the promise is the same bound over the same draws as for any candidate
    assert c.share_bound == unseen_share_bound([d.within_slo_share for d in c.days], c.miss_chance,
                                               blocks=([d.block_requests for d in c.days], [d.block_within for d in c.days]))
    # and the plain candidate of the other knobs ran on exactly those draws too
    base = tuner.candidate(tuner.seed_knobs(), days)
    assert base is not None and [d.requests for d in base.days] == [d.requests for d in c.days]


def test_hot_loading_answers_a_burst_shorter_than_a_start_up(setup):
    """Instance scaling decides in time but its instances serve after the burst has passed; the
    hot-loaded copies serve while it lasts, so fewer requests are refused."""
    q, t, copy, model, inputs = setup
    fleet = tuner_copy_fleet(copy, "ml.g5.12xlarge")
    tuner = Tuner(q, t, inputs, model, 0.995, copy_fleet=fleet)
    numbers = tuner.seed_numbers
    a = burst_day(1)
    end = BURST_AT_S + BURST_S
    assert model.startup_s > BURST_S  # the premise: an instance started at the burst serves after it

    plain = run_policy(model, a, AwsPolicy(numbers, model.cloudwatch_ratio, model.q_max), warm_x_rps=numbers.x_target_rps)
    first_out = next(x.t_s for x in plain.actions if x.after > x.before)
    plain_rise = int(np.argmax(plain.serving > plain.serving[0]))
    assert BURST_AT_S < first_out < end < plain_rise  # asked for within the burst, serving after it

    floor = -(-numbers.min_instances // fleet.copies_fit)
    hot = run_copies(model, a, AwsPolicy(numbers, model.cloudwatch_ratio, model.q_max),
                     replace(fleet, headroom_copies=4, initial_instances=floor, min_instances=floor), "hot-load",
                     warm_x_rps=numbers.x_target_rps)
    hot_rise = int(np.argmax(hot.copies_serving > hot.copies_serving[0]))
    assert hot.first_scale_out_s is not None and BURST_AT_S < hot.first_scale_out_s < hot_rise < end
    assert hot.hot_loaded > 0

    # the tuner's evaluations of the same plan: the burst refused less with hot loading
    days = [(1, a)]
    without, with_h = tuner.run(tuner.seed_knobs(), *days[0]), tuner.run(replace(tuner.seed_knobs(), hot_load_headroom_copies=4), *days[0])
    assert with_h.rejected_share < 0.5 * without.rejected_share
    assert with_h.within_slo_share > without.within_slo_share
