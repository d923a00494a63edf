"""How a checkout that claims its key with Powertools answers: the part the Powertools
checkouts share, so each handler keeps only its own key and record settings."""

from __future__ import annotations

from collections.abc import Callable

from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyKeyError,
    IdempotencyValidationError,
)

from charging import outcomes
from charging.errors import CheckoutError, PayloadMismatchError
from charging.response import answer, refusal, refused
from charging.trace import CHARGE, Trace


def answer_claim(strategy: str, trace: Trace, claim_and_charge: Callable[[], dict]) -> dict:
    """Parse, claim and charge (``claim_and_charge``), and answer for it: ``charged`` when
    the charge ran in this invocation, ``replayed`` when Powertools returned the stored
    result of an earlier one, a refusal for bad input or a key already in use."""
    try:
        result = claim_and_charge()
    except IdempotencyAlreadyInProgressError as exc:
        return refusal(strategy, outcomes.IN_PROGRESS, trace, exc)
    except IdempotencyValidationError:
        mismatch = PayloadMismatchError("this idempotency key was already used with another amount or currency")
        return refused(strategy, trace, mismatch)
    except IdempotencyKeyError as exc:
        return refusal(strategy, outcomes.REJECTED, trace, exc)
    except CheckoutError as exc:
        return refused(strategy, trace, exc)
    ran_here = any(step["step"] == CHARGE for step in trace.steps)
    outcome = outcomes.CHARGED if ran_here else outcomes.REPLAYED
    return answer(strategy, outcome, trace, result["charge_id"], processor_replayed=result["processor_replayed"])
