"""An order line, as the producer sends it: one SQS message per line.

    {"order_id": "o-123", "line": 1, "sku": "sku-red-mug", "quantity": 2}

The business key is (order_id, line): the same line sent twice is the same reservation,
whatever messageId SQS gave each copy.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from fulfilment.errors import InvalidOrderLineError


@dataclass(frozen=True)
class OrderLine:
    order_id: str
    line: int
    sku: str
    quantity: int

    @property
    def business_key(self) -> str:
        return f"{self.order_id}#{self.line}"

    def as_dict(self) -> dict:
        return asdict(self)


def parse(body: str | dict) -> OrderLine:
    """The order line a message carries, or InvalidOrderLineError saying what is wrong.

    Strictly typed, as the checkout's request parser is: nothing is converted. ``str()``
    would make a null order id the order ``'None'`` and ``int()`` would make 2.9 units 2
    and ``true`` 1, each a reservation for an order nobody placed. A refused line fails
    its record; after the queue's maxReceiveCount it waits on the dead-letter queue.
    """
    try:
        data = json.loads(body) if isinstance(body, str) else body
    except ValueError as exc:
        raise InvalidOrderLineError(f"not JSON: {body!r}") from exc
    if not isinstance(data, dict):
        raise InvalidOrderLineError(f"an order line is a JSON object, not {type(data).__name__}: {body!r}")
    missing = [name for name in FIELDS if name not in data]
    if missing:
        raise InvalidOrderLineError(f"order line without {', '.join(missing)}: {body!r}")
    return OrderLine(
        order_id=_text(data, "order_id"),
        line=_positive_whole(data, "line"),
        sku=_text(data, "sku"),
        quantity=_positive_whole(data, "quantity"),
    )


FIELDS = ("order_id", "line", "sku", "quantity")


def _text(data: dict, name: str) -> str:
    value = data[name]
    if not isinstance(value, str) or not value.strip():
        raise InvalidOrderLineError(f"{name} must be a non-empty string, not {value!r}")
    return value


def _positive_whole(data: dict, name: str) -> int:
    value = data[name]
    # bool is an int in Python: true must not become one unit.
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidOrderLineError(f"{name} must be a whole number from 1, not {value!r}")
    return value
