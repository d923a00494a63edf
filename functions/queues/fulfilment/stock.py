"""Reserve stock for an order line: the side effect every consumer performs.

Two writes: the SKU's `available` count goes down (only if enough is left), and a
reservation row records who reserved what, from which delivery. Without a key each call
reserves again: this module knows nothing about duplicates; the consumers decide. With a
key (a consumer's idempotency key, passed on as lesson 2's checkout passes its key to the
card processor) the reservation is made once: the row takes the key as its id, and it and
the decrement are one transaction, written only if no row has that id yet. A call whose
key was seen changes nothing and answers with that reservation, so a copy that died after
reserving, before its consumer recorded the result, cannot make the next copy reserve again.
"""

from __future__ import annotations

import os
import time
import uuid

import boto3
from botocore.exceptions import ClientError

from fulfilment.errors import StockUnavailableError
from fulfilment.orders import OrderLine
from shared.settings import table

_dynamodb = boto3.client("dynamodb")


def reserve(line: OrderLine, message_id: str, receive_count: str, key: str | None = None) -> dict:
    """Take `line.quantity` of `line.sku` out of stock and record the reservation (once per `key`)."""
    take = {
        "TableName": table("stock"),
        "Key": {"sku": {"S": line.sku}},
        "UpdateExpression": "SET available = available - :quantity",
        # Unknown SKU or too few left: refuse, so nothing is half reserved.
        "ConditionExpression": "attribute_exists(sku) AND available >= :quantity",
        "ExpressionAttributeValues": {":quantity": {"N": str(line.quantity)}},
    }
    reservation_id = key or str(uuid.uuid4())
    record = {
        "TableName": table("reservations"),
        "Item": {
            "reservation_id": {"S": reservation_id},
            "order_id": {"S": line.order_id},
            "line": {"N": str(line.line)},
            "sku": {"S": line.sku},
            "quantity": {"N": str(line.quantity)},
            "consumer": {"S": os.environ.get("POWERTOOLS_SERVICE_NAME", "unknown")},
            "message_id": {"S": message_id},
            "receive_count": {"N": str(receive_count)},
            "reserved_at": {"N": f"{time.time():.3f}"},
        },
    }
    if key is None:
        try:
            _dynamodb.update_item(**take)
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                raise StockUnavailableError(f"{line.sku}: fewer than {line.quantity} available") from exc
            raise
        _dynamodb.put_item(**record)
        return {"reservation_id": reservation_id}
    record["ConditionExpression"] = "attribute_not_exists(reservation_id)"
    try:
        _dynamodb.transact_write_items(TransactItems=[{"Put": record}, {"Update": take}])
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "TransactionCanceledException":
            raise
        reasons = [reason.get("Code", "None") for reason in exc.response.get("CancellationReasons", [])]
        if reasons[:1] == ["ConditionalCheckFailed"]:
            return {"reservation_id": reservation_id, "replayed": True}
        if reasons[1:2] == ["ConditionalCheckFailed"]:
            raise StockUnavailableError(f"{line.sku}: fewer than {line.quantity} available") from exc
        raise  # e.g. TransactionConflict on AWS: nothing was written, so the delivery may be retried
    return {"reservation_id": reservation_id}
