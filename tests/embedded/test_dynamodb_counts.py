"""The embedded backend's DynamoDB request counters (what `make bench` counts), in this
process: each request counted once, under the table or tables it names."""

from __future__ import annotations

from idemlab.embedded import dynamodb_counts


def test_each_request_is_counted_once_under_the_tables_it_names_and_the_counts_add_up():
    before = dynamodb_counts.counts()
    dynamodb_counts.record({"TableName": "ledger"}, "GetItem")
    dynamodb_counts.record({"TableName": "ledger"}, "PutItem")
    transaction = {"TransactItems": [{"Put": {"TableName": "ledger"}}, {"Update": {"TableName": "keys"}}]}
    dynamodb_counts.record(transaction, "TransactWriteItems")
    dynamodb_counts.record({"RequestItems": {"outbox": [], "keys": []}}, "BatchWriteItem")
    dynamodb_counts.record({}, "ListTables")
    after = dynamodb_counts.counts()

    def grown(table: str) -> dict:
        was = before["dynamodb_by_table"].get(table, {})
        return {action: n - was.get(action, 0) for action, n in after["dynamodb_by_table"][table].items()}

    assert grown("ledger") == {"GetItem": 1, "PutItem": 1}
    assert grown("keys+ledger") == {"TransactWriteItems": 1}
    assert grown("keys+outbox") == {"BatchWriteItem": 1}
    assert grown("(none)") == {"ListTables": 1}
    by_action = {action: n - before["dynamodb"].get(action, 0) for action, n in after["dynamodb"].items()}
    assert {action: n for action, n in by_action.items() if n} == {
        "GetItem": 1,
        "PutItem": 1,
        "TransactWriteItems": 1,
        "BatchWriteItem": 1,
        "ListTables": 1,
    }


def test_the_counters_are_not_the_write_locks_module():
    """The write lock (dynamodb_atomic) counts through this module and holds no counter."""
    from idemlab.embedded import dynamodb_atomic

    assert not hasattr(dynamodb_atomic, "REQUEST_COUNTS") and not hasattr(dynamodb_atomic, "counts")
