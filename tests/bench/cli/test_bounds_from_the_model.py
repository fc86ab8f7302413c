"""A flag's range is the model's field's: the surge ratio's bound is stated once (speech.schema.units),
and --surge-ratio refuses exactly what PlanInputs refuses."""

from __future__ import annotations

import argparse

import pytest
from annotated_types import Ge, Lt
from pydantic import ValidationError

from bench.cli import bounds
from speech.schema.config import PlanInputs


def test_the_surge_flag_range_is_plan_inputs_field():
    meta = PlanInputs.model_fields["surge_ratio"].metadata
    ge = next(m.ge for m in meta if isinstance(m, Ge))
    lt = next(m.lt for m in meta if isinstance(m, Lt))
    assert (bounds.SURGE.lo, bounds.SURGE.hi, bounds.SURGE.hi_open) == (ge, lt, True)
    flag = bounds.bounded(float, "--surge-ratio", bounds.SURGE)
    for x in (ge, (ge + lt) / 2):
        assert flag(str(x)) == x and PlanInputs(slo_ms=3000, peak_rps=10, trough_rps=1, surge_ratio=x)
    with pytest.raises(argparse.ArgumentTypeError):
        flag(str(lt))
    with pytest.raises(ValidationError):
        PlanInputs(slo_ms=3000, peak_rps=10, trough_rps=1, surge_ratio=lt)
