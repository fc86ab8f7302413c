"""A flag's range is the model field's: each bound is stated once (speech.schema.bounds, which the
pydantic models are built from), and every flag that sets a model field refuses exactly what the
model refuses at the ends the model states; where the model leaves an end open, the flag's cost
cap closes it."""

from __future__ import annotations

import argparse

import pytest
from pydantic import ValidationError

from bench.cli import bounds
from speech.schema.bounds import field_bound
from speech.schema.config import ComponentsConfig, ModelConfig, PlanInputs

# flag -> the model field it sets (bench.cli.options.FLAG_OF for the plan's inputs)
FLAGS = {
    "--slo-ms": (PlanInputs, "slo_ms"),
    "--surge-ratio": (PlanInputs, "surge_ratio"),
    "--peak-rps": (PlanInputs, "peak_rps"),
    "--trough-rps": (PlanInputs, "trough_rps"),
    "--min-instances": (PlanInputs, "min_instances"),
    "--qmax-derate": (PlanInputs, "qmax_derate"),
    "--max-delay-s": (PlanInputs, "max_delay_s"),
    "--slo-share": (PlanInputs, "slo_share"),
    "--target-share": (PlanInputs, "target_share"),
    "--scale-in-step-share": (PlanInputs, "scale_in_step_share"),
    "--scale-in-window-s": (PlanInputs, "scale_in_window_s"),
    "--scale-in-cooldown-s": (PlanInputs, "scale_in_cooldown_s"),
    "--scale-out-cooldown-s": (PlanInputs, "scale_out_cooldown_s"),
    "--max-instances": (ModelConfig, "max_instances"),
    "--min-copies": (ComponentsConfig, "min_copies"),
    "--margin": (ComponentsConfig, "footprint_margin"),
}


@pytest.mark.parametrize("flag", sorted(FLAGS))
def test_each_flag_range_is_its_model_fields(flag):
    model, field = FLAGS[flag]
    b, rng = field_bound(model, field), bounds.RANGES[flag]
    assert (rng.lo, rng.lo_open) == (b.lo, b.lo_open)
    if b.hi is not None:
        assert (rng.hi, rng.hi_open) == (b.hi, b.hi_open)
    else:  # the model bounds it below only: a finite cost cap, inclusive
        assert rng.hi < float("inf") and not rng.hi_open


def test_every_plan_input_flag_is_bounded_by_its_field():
    from bench.cli.options import FLAG_OF

    assert {flag for flag in FLAG_OF.values()} <= set(FLAGS)


@pytest.mark.parametrize("flag", ["--surge-ratio", "--slo-share", "--qmax-derate", "--scale-in-window-s"])
def test_the_flag_refuses_what_plan_inputs_refuses(flag):
    _, field = FLAGS[flag]
    b = field_bound(PlanInputs, field)
    kind = int if flag.endswith("-s") else float
    parse = bounds.bounded(kind, flag, bounds.RANGES[flag])
    for x in (b.lo, b.hi):
        ok = b.holds(x)
        try:
            PlanInputs(slo_ms=3000, peak_rps=10, trough_rps=1, **{field: kind(x)})
        except ValidationError:
            assert not ok
        else:
            assert ok
        if ok:
            assert parse(str(kind(x))) == x
        else:
            with pytest.raises(argparse.ArgumentTypeError):
                parse(str(kind(x)))
