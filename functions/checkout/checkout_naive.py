"""Checkout, naive: charges the card every time it runs. A retry is a second charge."""

from __future__ import annotations

from charging import outcomes, processor, request
from charging.errors import CheckoutError
from charging.response import answer, refused
from charging.trace import CHARGE, Trace

STRATEGY = "naive"


def handler(event, context):
    trace = Trace()
    try:
        order = request.parse(event)
        with trace.step(CHARGE):
            charge = processor.charge(order)
    except CheckoutError as exc:  # refused (nothing charged) or unknown (perhaps charged)
        return refused(STRATEGY, trace, exc)
    return answer(STRATEGY, outcomes.CHARGED, trace, charge["charge_id"], processor_replayed=charge["replayed"])
