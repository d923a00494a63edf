"""Checkout, naive: charges the card every time it runs. A retry is a second charge."""

from __future__ import annotations

from charging import outcomes, processor, request
from charging.errors import ChargeFailed, ChargeUnknown, InvalidRequest, PayloadMismatch
from charging.response import answer, refusal
from charging.trace import CHARGE, Trace

STRATEGY = "naive"


def handler(event, context):
    trace = Trace()
    try:
        order = request.parse(event)
    except InvalidRequest as exc:
        return refusal(STRATEGY, outcomes.REJECTED, trace, exc)
    try:
        with trace.step(CHARGE):
            charge = processor.charge(order)
    except PayloadMismatch as exc:
        return refusal(STRATEGY, outcomes.REJECTED, trace, exc)
    except ChargeFailed as exc:
        return refusal(STRATEGY, outcomes.FAILED, trace, exc)
    except ChargeUnknown as exc:
        return refusal(STRATEGY, outcomes.UNKNOWN, trace, exc)
    return answer(STRATEGY, outcomes.CHARGED, trace, charge["charge_id"], processor_replayed=charge["replayed"])
