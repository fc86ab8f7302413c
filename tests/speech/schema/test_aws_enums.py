"""Enum-valued stack settings: a value AWS would refuse stops the preview with one line naming the
nearest valid values (exit 2), instead of previewing cleanly and failing minutes into `pulumi up`.
The instance types are a snapshot of botocore's model (the pure core imports no botocore), compared
here with the installed botocore."""

from __future__ import annotations

import pytest

from speech.__main__ import main
from speech.schema import aws_enums


def test_snapshot_is_the_installed_botocore_enum():
    import botocore
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    installed = list(model.shape_for("ProductionVariantInstanceType").enum)
    snap = list(aws_enums.PRODUCTION_VARIANT_INSTANCE_TYPES)
    added, dropped = sorted(set(installed) - set(snap)), sorted(set(snap) - set(installed))
    assert not added and not dropped, (
        f"botocore {botocore.__version__} (snapshot from {aws_enums.BOTOCORE_VERSION}): added {added}, dropped "
        f"{dropped}; update speech/schema/aws_enums.py from its ProductionVariantInstanceType shape")
    assert snap == installed


SCHEDULE = {"timezone": "Europe/Berlin", "floors": [{"at": "07:00", "min_instances": 2}, {"at": "20:00", "min_instances": 1}]}


@pytest.mark.parametrize(
    "mutate, extra, key, nearest",
    [
        (lambda e: e.update(instance_type="ml.g5.xlarg"), {}, "speech-endpoints:models.kokoro-82m.instance_type",
         "nearest: ml.g5.xlarge"),
        (lambda e: e.update(instance_type="ml.c7i.xlarge5"), {}, "speech-endpoints:models.kokoro-82m.instance_type",
         "nearest: ml.c7i.xlarge"),
        (lambda e: e.update(hosting="realtme"), {}, "speech-endpoints:models.kokoro-82m.hosting",
         "did you mean 'realtime'?"),
        (lambda e: e.update(priority="critcal"), {}, "speech-endpoints:models.kokoro-82m.priority",
         "did you mean 'critical'?"),
        (lambda e: e["plan"].update(schedule={**SCHEDULE, "timezone": "Europe/Berln"}), {},
         "speech-endpoints:models.kokoro-82m.plan.schedule.timezone", "nearest: Europe/Berlin"),
        (lambda e: None, {"budget": {"daily_usd": 500.0, "prices_usd_per_hour": {"ml.g5.xlarg": 1.4}}},
         "speech-endpoints:budget.prices_usd_per_hour", "'ml.g5.xlarg' is not an instance type"),
    ],
)
def test_an_enum_typo_stops_the_preview_with_one_line(kokoro_entry, write_stack, tmp_path, capsys, mutate, extra,
                                                      key, nearest):
    mutate(kokoro_entry)
    write_stack({"kokoro-82m": kokoro_entry}, stack="typo", **extra)
    assert main(["preview", "--stack", "typo", "--stack-dir", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1, err
    assert lines[0].startswith(f"ConfigError: {key}: ") and nearest in lines[0], lines[0]


def test_every_type_the_project_prices_or_sizes_is_one_sagemaker_hosts():
    # The tables the plan reads must not name a type the new check would refuse.
    from speech.schema.instances import INSTANCE_SPECS
    from speech.schema.prices import DEFAULT_PRICES_USD_PER_HOUR

    hosted = set(aws_enums.PRODUCTION_VARIANT_INSTANCE_TYPES)
    assert set(INSTANCE_SPECS) <= hosted
    assert set(DEFAULT_PRICES_USD_PER_HOUR) <= hosted


# Names the service lists whose family has a hyphen (p6-b200, p6e-gb200): a name pattern once refused
# them before the snapshot was consulted.
HYPHENATED = [t for t in aws_enums.PRODUCTION_VARIANT_INSTANCE_TYPES if "-" in t]


def test_the_snapshot_has_hyphenated_names():
    assert {"ml.p6-b200.48xlarge", "ml.p6e-gb200.36xlarge"} <= set(HYPHENATED)


@pytest.mark.parametrize("itype", aws_enums.PRODUCTION_VARIANT_INSTANCE_TYPES)
def test_every_listed_instance_type_is_accepted_by_the_model_config(kokoro_entry, itype):
    from speech.schema.config import ModelConfig

    assert ModelConfig.model_validate({**kokoro_entry, "instance_type": itype}).instance_type == itype


@pytest.mark.parametrize("itype", HYPHENATED)
def test_a_hyphenated_type_is_accepted_in_prices_and_fingerprints(itype):
    from speech.schema.artifacts import Fingerprint, make_slug
    from speech.schema.config import Budget

    assert itype in Budget(daily_usd=100.0, prices_usd_per_hour={itype: 1.0}).prices()
    digest = "sha256:" + "ab" * 32
    assert Fingerprint(instance_type=itype, image_digest=digest, slug=make_slug(itype, digest)).instance_type == itype


@pytest.mark.parametrize("value, near", [("ml.p6-b200.48xlarg", "ml.p6-b200.48xlarge"),
                                          ("ml.p6e-gb200.36xlarg", "ml.p6e-gb200.36xlarge"),
                                          ("ml.g5_xlarge", "ml.g5.xlarge")])
def test_a_name_off_the_list_gets_the_nearest_names_from_the_snapshot(kokoro_entry, value, near):
    # The snapshot alone decides, and the message names the nearest listed type (not a pattern).
    import pydantic

    from speech.schema.config import ModelConfig

    with pytest.raises(pydantic.ValidationError) as err:
        ModelConfig.model_validate({**kokoro_entry, "instance_type": value})
    assert f"nearest: {near}" in str(err.value) and "pattern" not in str(err.value)


@pytest.mark.parametrize("alias, canonical", [("US/Eastern", "America/New_York"), ("Asia/Calcutta", "Asia/Kolkata"),
                                              ("Europe/Kiev", "Europe/Kyiv")])
def test_a_time_zone_alias_stops_the_preview_naming_the_canonical_zone(kokoro_entry, write_stack, tmp_path, capsys,
                                                                        alias, canonical):
    # zoneinfo opens links as well as zones; PutScheduledAction takes canonical IANA names only, so
    # an alias would preview cleanly and be refused minutes into `pulumi up`.
    kokoro_entry["plan"]["schedule"] = {**SCHEDULE, "timezone": alias}
    write_stack({"kokoro-82m": kokoro_entry}, stack="alias")
    assert main(["preview", "--stack", "alias", "--stack-dir", str(tmp_path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ConfigError: speech-endpoints:models.kokoro-82m.plan.schedule.timezone: ")
    assert f"'{canonical}'" in lines[0] and alias in lines[0], lines[0]


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Europe/Kyiv", "Etc/GMT+9",
                                  "Pacific/Tahiti"])
def test_canonical_time_zones_and_the_documented_default_are_accepted(zone):
    from speech.schema.config import FloorSchedule

    assert FloorSchedule.model_validate({**SCHEDULE, "timezone": zone}).timezone == zone
