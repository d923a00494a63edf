"""The one answer shape every checkout returns, success or not."""

from __future__ import annotations

import os

from charging import outcomes
from charging.errors import CheckoutError
from charging.trace import Trace


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
