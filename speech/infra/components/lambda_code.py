"""Source shared by the stack's Lambda functions (the weight-cache trigger, the scaling guard).

On a first deploy each function is invoked right after its role policy is created. IAM is
eventually consistent: a policy just attached can take seconds to apply, and the call is denied
meanwhile (AWS: "Changes that I make are not always immediately visible",
https://docs.aws.amazon.com/IAM/latest/UserGuide/troubleshoot_general.html#troubleshoot_general_eventual-consistency).
So every AWS call those functions make goes through :data:`RETRY_CODE`'s ``with_iam_retry``: a
denial is retried with growing waits for about a minute, then raised as it is.
"""

from __future__ import annotations

IAM_RETRY_S = (1, 2, 4, 8, 15, 30)
"""Waits between tries while a role policy propagates, seconds (60 s in all, 7 tries)."""
DENIED = ("AccessDeniedException", "AccessDenied")
"""Error codes of a call the role's policy does not (yet) allow."""

RETRY_CODE = f'''\
import time

from botocore.exceptions import ClientError

IAM_RETRY_S = {IAM_RETRY_S!r}
DENIED = {DENIED!r}


def with_iam_retry(call, **kwargs):
    """call(**kwargs), retried while IAM denies it (a role policy created moments ago propagates)."""
    for wait in (*IAM_RETRY_S, None):
        try:
            return call(**kwargs)
        except ClientError as err:
            if err.response.get("Error", {{}}).get("Code") not in DENIED or wait is None:
                raise
            print(f"denied ({{err.response['Error']['Code']}}), retrying in {{wait}} s: IAM may still be propagating")
            time.sleep(wait)
'''


def retry_budget_s() -> int:
    """The longest :data:`RETRY_CODE` waits before it gives up, seconds."""
    return sum(IAM_RETRY_S)
