"""The DynamoDB requests the embedded backend served, by table and by action: what the cost
benchmarks count (``/_idemlab/counts``, ``server.request_counts``), at the backend rather
than estimated from the client side. The tables tell which requests are a handler's own,
which its fault probes and which the charge it protects.

Its own lock, not the DynamoDB request lock (``dynamodb_atomic``): a copy of the counters is
consistent on its own, whichever lock serialises the requests, or none.
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict

_LOCK = threading.Lock()
# Requests served: table (or tables, joined by "+") -> action -> count.
REQUEST_COUNTS: dict[str, Counter] = defaultdict(Counter)


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


def record(params: dict, action: str) -> None:
    """Count one request of ``action`` with these parameters."""
    tables = table_names(params)
    with _LOCK:
        REQUEST_COUNTS[tables][action] += 1


def counts() -> dict:
    """A consistent copy of the counters: by action ("dynamodb"), by table and action
    ("dynamodb_by_table")."""
    with _LOCK:
        by_table = {table: dict(by_action) for table, by_action in REQUEST_COUNTS.items()}
    return {
        "dynamodb": dict(sum((Counter(by_action) for by_action in by_table.values()), Counter())),
        "dynamodb_by_table": by_table,
    }
