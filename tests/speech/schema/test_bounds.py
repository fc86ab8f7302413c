"""Each bound stated once (speech.schema.bounds): the pydantic models are built from it, so the
model's own metadata equals it, and the model refuses exactly what the bound refuses at its edges."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from speech.schema import bounds
from speech.schema.bounds import FieldBound, field_bound
from speech.schema.config import ComponentsConfig, ModelConfig, PlanInputs

# (model, field, the bound it is declared with)
FIELDS = [
    (PlanInputs, "slo_ms", bounds.SLO_MS),
    (PlanInputs, "surge_ratio", bounds.SURGE_RATIO),
    (PlanInputs, "peak_rps", bounds.RATE_RPS),
    (PlanInputs, "trough_rps", bounds.RATE_RPS),
    (PlanInputs, "min_instances", bounds.MIN_INSTANCES),
    (PlanInputs, "qmax_derate", bounds.QMAX_DERATE),
    (PlanInputs, "max_delay_s", bounds.MAX_DELAY_S),
    (PlanInputs, "slo_share", bounds.SLO_SHARE),
    (PlanInputs, "target_share", bounds.TARGET_SHARE),
    (PlanInputs, "scale_in_step_share", bounds.SCALE_IN_STEP_SHARE),
    (PlanInputs, "scale_in_window_s", bounds.SCALE_IN_WINDOW_S),
    (PlanInputs, "scale_in_cooldown_s", bounds.SCALE_IN_COOLDOWN_S),
    (PlanInputs, "scale_out_cooldown_s", bounds.SCALE_OUT_COOLDOWN_S),
    (ModelConfig, "max_instances", bounds.MAX_INSTANCES),
    (ComponentsConfig, "min_copies", bounds.MIN_COPIES),
    (ComponentsConfig, "footprint_margin", bounds.FOOTPRINT_MARGIN),
]


@pytest.mark.parametrize(("model", "field", "bound"), FIELDS, ids=[f"{m.__name__}.{f}" for m, f, _ in FIELDS])
def test_the_model_field_is_built_from_its_bound(model, field, bound):
    assert field_bound(model, field) == bound


def _plan_inputs(**kw):
    return PlanInputs(**{"slo_ms": 3000, "peak_rps": 100, "trough_rps": 1, **kw})


PLAN_FIELDS = [(f, b) for m, f, b in FIELDS if m is PlanInputs and f not in ("peak_rps", "trough_rps")]


@pytest.mark.parametrize(("field", "bound"), PLAN_FIELDS, ids=[f for f, _ in PLAN_FIELDS])
def test_plan_inputs_refuse_exactly_what_the_bound_refuses(field, bound):
    # At each stated end, and just past it: the model's verdict is the bound's (holds()).
    is_int = "int" in str(PlanInputs.model_fields[field].annotation)  # int, or Annotated[int, ...] | None
    step = 1 if is_int else 1e-6
    edges = [e for e in (bound.lo, bound.hi) if e is not None]
    for x in {v for e in edges for v in (e - step, e, e + step)}:
        value = int(x) if is_int else x
        try:
            _plan_inputs(**{field: value})
            accepted = True
        except ValidationError as err:
            # Another rule of the plan may refuse a value the bound allows; never the other way round.
            accepted = not any(e["loc"] == (field,) for e in err.errors())
        assert accepted == bound.holds(value), (field, value)


def test_the_reader_sees_both_shapes_of_a_field():
    # ``Annotated[int, Field(ge=1)] | None`` (constraint on the union's member) and a plain one.
    assert field_bound(ModelConfig, "max_instances") == FieldBound(1, None)
    assert field_bound(PlanInputs, "surge_ratio").hi_open
    assert field_bound(PlanInputs, "reasons") == FieldBound(None, None)


def test_holds_and_text():
    share = FieldBound(0.5, 1.0, hi_open=True)
    assert share.holds(0.5) and share.holds(0.999) and not share.holds(1.0) and not share.holds(0.49)
    assert not share.holds(math.nan) and not FieldBound(0, None, lo_open=True).holds(math.inf)
    assert share.text() == "0.5 <= X < 1"
    assert FieldBound(0, None, lo_open=True).text("S") == "S > 0"
    assert share.field() == {"ge": 0.5, "lt": 1.0}
