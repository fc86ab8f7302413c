"""The one IAM wildcard rule, pure: the program's policy documents are held to it by the tests
(speech/deploy/iam.py) and every IAM policy in a stack by the pack (iam-no-wildcard-actions).

An Allow statement may not use NotAction (everything else would be allowed), may not name an
action with ``*`` in it (``*``, ``s3:*``, ``s3:Get*``), and may grant an action on Resource ``*``
only when AWS offers no resource-level permission for it (:data:`ALLOWED_ON_STAR`). Deny
statements are not limited.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ALLOWED_ON_STAR = frozenset({"ecr:GetAuthorizationToken", "cloudwatch:PutMetricData", "cloudwatch:GetMetricData",
                             "cloudwatch:ListMetrics", "cloudwatch:QueryMetrics"})
"""Actions AWS only grants on Resource "*" (no resource-level permissions; CloudWatch's permissions
reference: "add a wildcard (*) as the resource value")."""


@dataclass(frozen=True)
class WildcardFinding:
    statement: int
    """Index in the document's Statement list."""
    sid: str
    kind: str
    """not_action | wildcard_action | action_on_star"""
    actions: tuple[Any, ...]

    def describe(self) -> str:
        what = {
            "not_action": f"allows NotAction {list(self.actions)}: everything else is allowed",
            "wildcard_action": f"allows wildcard actions {list(self.actions)}, expected explicit actions",
            "action_on_star": f"allows {list(self.actions)} on Resource '*', which AWS scopes by resource",
        }[self.kind]
        return f"Statement[{self.statement}] ({self.sid}) {what}"


def _listed(value: Any) -> list:
    return [value] if isinstance(value, str) else list(value) if isinstance(value, (list, tuple)) else []


def statements(doc: Any) -> list:
    """A document's statements (a single statement object counts as a list of one)."""
    stmts = doc.get("Statement") if isinstance(doc, Mapping) else None
    return [stmts] if isinstance(stmts, Mapping) else list(stmts) if isinstance(stmts, list) else []


def wildcard_findings(doc: Any) -> list[WildcardFinding]:
    """Every way ``doc`` (a parsed policy document) breaks the rule, one finding per statement and kind."""
    out = []
    for i, st in enumerate(statements(doc)):
        if not isinstance(st, Mapping) or st.get("Effect") != "Allow":
            continue
        sid = str(st.get("Sid", "?"))
        if "NotAction" in st:
            out.append(WildcardFinding(i, sid, "not_action", tuple(_listed(st["NotAction"]))))
        actions = [a for a in _listed(st.get("Action")) if isinstance(a, str)]
        wild = tuple(a for a in actions if "*" in a)
        if wild:
            out.append(WildcardFinding(i, sid, "wildcard_action", wild))
        if "*" in _listed(st.get("Resource")):
            on_star = tuple(a for a in actions if "*" not in a and a not in ALLOWED_ON_STAR)
            if on_star:
                out.append(WildcardFinding(i, sid, "action_on_star", on_star))
    return out
