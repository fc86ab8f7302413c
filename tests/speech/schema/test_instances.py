"""The instance table: which families compute on CUDA, which on CPU cores only, and what a CPU-only
backend on a GPU instance costs by the project's price table."""

from __future__ import annotations

import pytest

from speech.deploy.hosting import CPU_BACKEND_MIN_MEMORY_MIB, backend_mismatch, cheapest_cpu_alternative
from speech.errors import ConfigError
from speech.schema.instances import FAMILIES, INSTANCE_SPECS, backend_for_instance, has_accelerator, instance_family
from speech.schema.prices import DEFAULT_PRICES_USD_PER_HOUR, PRICE_SOURCES


@pytest.mark.parametrize("itype, backend", [
    ("ml.g4dn.xlarge", "torch"), ("ml.g5.xlarge", "torch"), ("ml.g6.xlarge", "torch"), ("ml.g6e.2xlarge", "torch"),
    ("ml.p4d.24xlarge", "torch"), ("ml.p5.48xlarge", "torch"),
    ("ml.c5.xlarge", "onnx"), ("ml.c6i.xlarge", "onnx"), ("ml.c7i.xlarge", "onnx"), ("ml.m7i.2xlarge", "onnx"),
    ("ml.r7i.xlarge", "onnx"), ("ml.m5.large", "onnx"),
])
def test_a_family_decides_the_backend(itype, backend):
    assert backend_for_instance(itype) == backend
    assert has_accelerator(itype) is (backend == "torch")


def test_the_table_agrees_with_the_sizes():
    for itype, spec in INSTANCE_SPECS.items():
        family = instance_family(itype)
        assert (spec.accelerator_count > 0) is (family.kind == "cuda"), itype
        if spec.accelerator is not None:
            assert family.processor.split()[1] in spec.accelerator, itype
    assert all(f.source.startswith("docs.aws.amazon.com/ec2/latest/instancetypes/") for f in FAMILIES.values())


@pytest.mark.parametrize("itype, words", [
    ("ml.inf2.xlarge", "AWS Neuron"), ("ml.c7g.xlarge", "arm64"), ("ml.zz.huge", "not an instance family"),
])
def test_families_no_image_can_run_are_config_errors(itype, words):
    with pytest.raises(ConfigError, match=rf"^k: {itype!r}") as err:
        backend_for_instance(itype, "k")
    assert words in str(err.value)


def test_every_price_has_a_source_and_the_cpu_families_are_priced():
    assert set(PRICE_SOURCES) == set(DEFAULT_PRICES_USD_PER_HOUR)
    for itype in ("ml.c7i.xlarge", "ml.m7i.xlarge", "ml.c6i.xlarge"):
        assert backend_for_instance(itype) == "onnx" and DEFAULT_PRICES_USD_PER_HOUR[itype] > 0
    assert "estimate" in PRICE_SOURCES["ml.c7i.xlarge"]


def test_the_cheapest_cpu_instance_that_fits():
    alt = cheapest_cpu_alternative("ml.g5.xlarge", DEFAULT_PRICES_USD_PER_HOUR)
    # 4 vCPUs: ml.c5.xlarge and ml.c6i.xlarge both cost $0.204/h; the newer family wins the tie.
    assert alt.cpu_instance_type == "ml.c6i.xlarge" and alt.cpu_usd_per_hour == 0.204
    assert alt.cost_ratio == pytest.approx(1.408 / 0.204)
    assert INSTANCE_SPECS[alt.cpu_instance_type].vcpus >= INSTANCE_SPECS["ml.g5.xlarge"].vcpus
    assert INSTANCE_SPECS[alt.cpu_instance_type].memory_mib >= CPU_BACKEND_MIN_MEMORY_MIB
    # A bigger GPU instance needs a bigger CPU one: 8 vCPUs.
    big = cheapest_cpu_alternative("ml.g5.2xlarge", DEFAULT_PRICES_USD_PER_HOUR)
    assert INSTANCE_SPECS[big.cpu_instance_type].vcpus >= 8
    # Prices of one's own: a cheaper c7i wins.
    mine = cheapest_cpu_alternative("ml.g5.xlarge", {**DEFAULT_PRICES_USD_PER_HOUR, "ml.c7i.xlarge": 0.15})
    assert mine.cpu_instance_type == "ml.c7i.xlarge"
    assert cheapest_cpu_alternative("ml.g5.xlarge", {"ml.g5.xlarge": 1.0}) is None


def test_mismatch_messages_name_both_values():
    assert backend_mismatch("ml.g5.xlarge", "torch", DEFAULT_PRICES_USD_PER_HOUR) is None
    assert backend_mismatch("ml.c7i.xlarge", "onnx", DEFAULT_PRICES_USD_PER_HOUR) is None
    gpu = backend_mismatch("ml.g5.xlarge", "onnx", DEFAULT_PRICES_USD_PER_HOUR)
    assert "ml.g5.xlarge has an NVIDIA A10G GPU but BACKEND=onnx" in gpu and "6.9x" in gpu and "fix:" in gpu
    cpu = backend_mismatch("ml.c7i.xlarge", "torch", DEFAULT_PRICES_USD_PER_HOUR)
    assert "ml.c7i.xlarge is a CPU instance" in cpu and "BACKEND=torch" in cpu and "fix:" in cpu
