"""Make every DynamoDB request atomic with respect to every other one.

moto's table code reads an item, evaluates the condition, then writes, with no lock,
while the server handles requests on many threads. Two `attribute_not_exists` puts
can then both succeed, which is exactly the bug the lessons teach learners to avoid.
DynamoDB itself serialises writes per item; one lock around each request is a
stronger guarantee (linearizable across items too) and costs nothing at lab scale.
"""

from __future__ import annotations

import functools
import threading
from collections import Counter

from moto.dynamodb.responses import DynamoHandler

_LOCK = threading.RLock()
# Requests served, by action: the cost benchmarks count calls here, at the backend,
# rather than estimating them from the client side.
REQUEST_COUNTS: Counter = Counter()
_INSTALLED_FLAG = "_idemlab_serialised"


def install() -> None:
    """Wrap DynamoHandler.call_action in one process-wide lock (idempotent)."""
    original = DynamoHandler.call_action
    if getattr(original, _INSTALLED_FLAG, False):
        return

    @functools.wraps(original)
    def serialised_call_action(self):
        with _LOCK:
            REQUEST_COUNTS[self.get_endpoint_name(self.headers) or "unknown"] += 1
            return original(self)

    setattr(serialised_call_action, _INSTALLED_FLAG, True)
    DynamoHandler.call_action = serialised_call_action
