"""Where a checkout can be made to fail, and how: its point and kinds in the shared fault contract.

A caller arms a fault at ``AFTER_CHARGE`` for an idempotency key (``idemlab.faults.arm``,
the one item shape of ``shared.faults``); the next invocations that reach that point for
that key fail there:

- ``CRASH``: the invocation runs past its function timeout, so it ends without its code
  recording anything (no except, no finally, no result stored), as a crash does.
- ``LOSE_ANSWER``: the card processor charged, and its answer never reached the checkout
  (a read timeout, a dropped connection). The checkout cannot tell whether it charged.
"""

from __future__ import annotations

from charging.errors import ChargeUnknownError
from shared import faults

AFTER_CHARGE = "after_charge"  # the card is charged, the result not yet recorded

CRASH = faults.CRASH  # the invocation dies here: nothing is recorded
LOSE_ANSWER = faults.ERROR  # the processor charged, and its answer never arrived


def strike(point: str, idempotency_key: str, context) -> None:
    """``shared.faults.strike``, its injected error named as the checkout's own: a charge
    whose outcome is unknown (``ChargeUnknownError``)."""
    try:
        faults.strike(point, idempotency_key, context)
    except faults.InjectedFaultError as exc:
        raise ChargeUnknownError(
            f"the card processor's answer for {idempotency_key!r} was lost (fault injected at {point})"
        ) from exc
