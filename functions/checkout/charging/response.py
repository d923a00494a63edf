"""The one answer shape every checkout returns, success or not."""

from __future__ import annotations

import os

from charging import outcomes
from charging.errors import (
    ChargeFailedError,
    ChargeUnknownError,
    CheckoutError,
    InvalidRequestError,
    PayloadMismatchError,
)
from charging.trace import Trace

# The answer to each error a checkout raises on purpose.
OUTCOME_OF = {
    InvalidRequestError: outcomes.REJECTED,  # nothing charged
    PayloadMismatchError: outcomes.REJECTED,  # nothing charged
    ChargeFailedError: outcomes.FAILED,  # nothing charged
    ChargeUnknownError: outcomes.UNKNOWN,  # perhaps charged
}


def answer(strategy: str, outcome: str, trace: Trace, charge_id: str | None = None, **extra) -> dict:
    if outcome not in outcomes.ALL:
        raise ValueError(f"bug: unknown outcome {outcome!r}")
    return {
        "strategy": strategy,
        "outcome": outcome,
        "charge_id": charge_id,
        "pid": os.getpid(),
        "trace": trace.steps,
        **extra,
    }


def refusal(strategy: str, outcome: str, trace: Trace, error: Exception) -> dict:
    error_type = error.error_type if isinstance(error, CheckoutError) else type(error).__name__
    return answer(strategy, outcome, trace, error={"type": error_type, "message": str(error)})


def refused(strategy: str, trace: Trace, error: CheckoutError) -> dict:
    """The answer to an error the checkout raised on purpose (OUTCOME_OF)."""
    return refusal(strategy, OUTCOME_OF[type(error)], trace, error)
