"""Make every DynamoDB request atomic with respect to every other one.

moto's table code reads an item, evaluates the condition, then writes, with no lock,
while the server handles requests on many threads. Two `attribute_not_exists` puts
can then both succeed, which is exactly the bug the lessons teach learners to avoid.
DynamoDB itself serialises writes per item; one lock around each request is a
stronger guarantee (linearizable across items too) and costs nothing at lab scale.
"""

from __future__ import annotations

import copy
import threading
import types

from moto.core.responses import ActionResult
from moto.dynamodb import models as dynamodb_models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table
from moto.dynamodb.responses import DynamoHandler, DynamoResult

from idemlab.embedded import dynamodb_counts
from idemlab.embedded.patching import wrap

_LOCK = threading.RLock()


def install(fast_path: bool = False) -> None:
    """Wrap DynamoHandler.call_action in one process-wide lock (idempotent).

    With the fast path (fast_path.py), a transaction keeps copies of items, not tables
    (install_item_rollback), and the lock is let go once the action has returned its
    result, before moto renders it as the response. The result is already a copy: moto's
    `DynamoResult`, made by the action under the lock, rebuilds every dict and list it
    holds (items, keys, descriptions) around immutable leaves, so what is rendered is the
    state at the request's place in the order, whatever writes come next. Errors, and any
    other result, are still rendered under the lock."""

    @wrap(DynamoHandler, "transact_write_items")
    def transact_write_items_answer(original, self):
        """Without moto's empty ConsumedCapacity and ItemCollectionMetrics: AWS answers a
        TransactWriteItems with neither unless asked (ReturnConsumedCapacity,
        ReturnItemCollectionMetrics; TransactWriteItems API reference), as recorded in
        LocalStack's tests/aws/services/dynamodb/test_dynamodb.snapshot.json (v4.14.0)."""
        answer = original(self)
        return ActionResult({key: value for key, value in answer.result.items() if value not in ([], {})})

    @wrap(DynamoHandler, "call_action")
    def serialised_call_action(original, self):
        _LOCK.acquire()
        self.idemlab_locked = True
        try:
            action = self.get_endpoint_name(self.headers) or "unknown"
            dynamodb_counts.record(getattr(self, "params", None) or {}, action)
            return original(self)
        finally:
            if self.idemlab_locked:  # unless `serialized` let it go already
                self.idemlab_locked = False
                _LOCK.release()

    @wrap(DynamoHandler, "serialized")
    def serialized(original, self, result):
        if fast_path and getattr(self, "idemlab_locked", False) and isinstance(result, DynamoResult):
            self.idemlab_locked = False
            _LOCK.release()
        return original(self, result)

    if fast_path:
        install_item_rollback()
    install_unreadable_conditions()


def install_unreadable_conditions() -> None:
    """A condition moto cannot read is a ValidationException, as DynamoDB answers it.

    moto 5.2.5's ConditionExpressionParser raises a bare KeyError for a `:value` or
    `#name` the request does not define, and a ValueError for a syntax error, which its
    server answers with HTTP 500. DynamoDB (and DynamoDB Local, under LocalStack) refuses
    such a request as invalid, with a 400 that names the culprit."""
    from moto.dynamodb.comparisons import ConditionExpressionParser
    from moto.dynamodb.exceptions import InvalidConditionExpression

    for kind, used_in in (("value", "expression"), ("name", "the document path")):

        @wrap(ConditionExpressionParser, f"_lookup_expression_attribute_{kind}")
        def lookup(original, self, name, kind=kind, used_in=used_in):
            try:
                return original(self, name)
            except (KeyError, TypeError):  # not in the request's map, or no map at all
                message = f"An expression attribute {kind} used in {used_in} is not defined; attribute {kind}: {name}"
                raise InvalidConditionExpression(message) from None

    @wrap(ConditionExpressionParser, "_assert")
    def syntax(original, self, condition, message, nodes):
        try:
            return original(self, condition, message, nodes)
        except ValueError as exc:
            raise InvalidConditionExpression(f"Syntax error; {exc}") from exc


# While moto runs a transaction on this thread, the "backup" it takes of each table it
# names is the table itself: `transact_write_items` below keeps the named items instead.
_ROLLING_BACK_ITEMS = threading.local()


def _deepcopy(value, memo=None):
    """moto.dynamodb.models' copy.deepcopy, but a whole Table is kept as it is while `_ROLLING_BACK_ITEMS` is on."""
    keep = isinstance(value, Table) and getattr(_ROLLING_BACK_ITEMS, "on", False)
    return value if keep else copy.deepcopy(value, memo)


def install_item_rollback() -> None:
    """TransactWriteItems keeps a copy of each item it names, not of each table.

    moto backs up every table a transaction names with a deep copy, once per action
    (twice for two actions on one table), and puts the copies back if the transaction is
    cancelled: a cost that grows with the table, paid by every transaction, under the
    request lock. Under that lock nothing else writes meanwhile, so the items the actions
    name are all a cancelled transaction can have changed; those are copied (or noted
    absent) before it runs and put back if it raises (an empty sort-key group left behind
    is what moto's own reads leave too, and no read sees it)."""
    dynamodb_models.copy = types.SimpleNamespace(deepcopy=_deepcopy)  # the only use that module makes of `copy`

    @wrap(DynamoDBBackend, "transact_write_items")
    def transact_write_items(original, self, transact_items):
        kept = _items_named(self, transact_items)
        if kept is None:
            return original(self, transact_items)
        _ROLLING_BACK_ITEMS.on = True
        try:
            return original(self, transact_items)
        except BaseException:
            for table, hash_key, range_key, item in reversed(kept):
                where, key = (table.items, hash_key) if range_key is None else (table.items[hash_key], range_key)
                if item is None:
                    where.pop(key, None)
                else:
                    where[key] = item
            raise
        finally:
            _ROLLING_BACK_ITEMS.on = False


def _items_named(backend, transact_items) -> list | None:
    """(table, hash key, range key, copy of the item or None) for each action's item. None
    leaves moto's whole-table backup in charge: if a table named has a stream (that backup
    takes back its stream records too), or an action's key cannot be read (moto refuses
    that action as it reaches it, and cancels the transaction)."""
    kept = []
    try:
        for action in transact_items:
            for kind, request in action.items():
                table = backend.tables.get(request["TableName"])
                if table is None:  # moto refuses the action
                    continue
                if table.stream_shard is not None:
                    return None
                keys = request["Item"] if kind == "Put" else request["Key"]
                hash_key, range_key = backend.get_keys_value(table, keys)
                stored = table.items.get(hash_key)  # .get: the table's defaultdict grows no entry
                if range_key is not None and stored is not None:
                    stored = stored.get(range_key)
                kept.append((table, hash_key, range_key, copy.deepcopy(stored)))
    except Exception:
        return None
    return kept
