"""Make every DynamoDB request atomic with respect to every other one.

moto's table code reads an item, evaluates the condition, then writes, with no lock,
while the server handles requests on many threads. Two `attribute_not_exists` puts
can then both succeed, which is exactly the bug the lessons teach learners to avoid.
DynamoDB itself serialises writes per item; one lock around each request is a
stronger guarantee (linearizable across items too) and costs nothing at lab scale.
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict

from moto.dynamodb.responses import DynamoHandler, DynamoResult

from idemlab.embedded.patching import wrap

_LOCK = threading.RLock()
# Requests served, by action: the cost benchmarks count calls here, at the backend,
# rather than estimating them from the client side.
REQUEST_COUNTS: Counter = Counter()
# ... and by the table each one named, so the bench measures which requests are a
# handler's own, which are its fault probes and which the charge it protects.
REQUEST_COUNTS_BY_TABLE: dict[str, Counter] = defaultdict(Counter)


def install(serialise_outside_lock: bool = False) -> None:
    """Wrap DynamoHandler.call_action in one process-wide lock (idempotent).

    With `serialise_outside_lock` (the fast path's), the lock is let go once the action
    has returned its result, before moto renders it as the response. The result is
    already a copy: moto's `DynamoResult`, made by the action under the lock, rebuilds
    every dict and list it holds (items, keys, descriptions) around immutable leaves, so
    what is rendered is the state at the request's place in the order, whatever writes
    come next. Errors, and any other result, are still rendered under the lock."""

    @wrap(DynamoHandler, "call_action")
    def serialised_call_action(original, self):
        _LOCK.acquire()
        self.idemlab_locked = True
        try:
            action = self.get_endpoint_name(self.headers) or "unknown"
            REQUEST_COUNTS[action] += 1
            REQUEST_COUNTS_BY_TABLE[table_names(getattr(self, "params", None) or {})][action] += 1
            return original(self)
        finally:
            if self.idemlab_locked:  # unless `serialized` let it go already
                self.idemlab_locked = False
                _LOCK.release()

    @wrap(DynamoHandler, "serialized")
    def serialized(original, self, result):
        if serialise_outside_lock and getattr(self, "idemlab_locked", False) and isinstance(result, DynamoResult):
            self.idemlab_locked = False
            _LOCK.release()
        return original(self, result)


def table_names(params: dict) -> str:
    """The table a request names. A request over several (a transaction, a batch) is
    counted once, under its names joined by "+", so the counts by table add up to the
    counts by action."""
    if isinstance(params.get("TableName"), str):
        return params["TableName"]
    names = set(params.get("RequestItems") or {})
    for item in params.get("TransactItems") or []:
        names.update(operation.get("TableName") for operation in item.values() if isinstance(operation, dict))
    return "+".join(sorted(name for name in names if isinstance(name, str))) or "(none)"


def counts() -> dict:
    """A consistent copy of the counters (taken under the request lock)."""
    with _LOCK:
        return {
            "dynamodb": dict(REQUEST_COUNTS),
            "dynamodb_by_table": {table: dict(by_action) for table, by_action in REQUEST_COUNTS_BY_TABLE.items()},
        }
