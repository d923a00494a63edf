"""An order line, as the producer sends it: one SQS message per line.

    {"order_id": "o-123", "line": 1, "sku": "sku-red-mug", "quantity": 2}

The business key is (order_id, line): the same line sent twice is the same reservation,
whatever messageId SQS gave each copy.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from fulfilment.errors import InvalidOrderLine


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
    try:
        data = json.loads(body) if isinstance(body, str) else body
        line = OrderLine(str(data["order_id"]), int(data["line"]), str(data["sku"]), int(data["quantity"]))
    except (ValueError, TypeError, KeyError) as exc:
        raise InvalidOrderLine(f"not an order line: {body!r}") from exc
    if not line.order_id or line.line < 1 or not line.sku or line.quantity < 1:
        raise InvalidOrderLine(f"not an order line: {body!r}")
    return line
