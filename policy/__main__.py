"""Serve the policy pack (``pulumi preview --policy-pack policy``), or ``python -m policy check``."""

import sys
from pathlib import Path

if __package__ in (None, ""):
    # Started by Pulumi as a script: make the `policy` package importable from the repo root.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

if __package__ == "policy" and sys.argv[1:2] == ["check"]:
    from policy.check import main

    sys.exit(main(sys.argv[2:]))

from pulumi_policy import EnforcementLevel, PolicyPack  # noqa: E402

from policy.policies import PACK_NAME, POLICIES  # noqa: E402

PolicyPack(name=PACK_NAME, policies=POLICIES, enforcement_level=EnforcementLevel.MANDATORY)
