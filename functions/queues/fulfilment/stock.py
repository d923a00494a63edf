"""Reserve stock for an order line: the side effect every consumer performs.

Two writes: the SKU's `available` count goes down (only if enough is left), and a
reservation row records who reserved what, from which delivery. Each call reserves
again: this module knows nothing about duplicates; the consumers decide.
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


def reserve(line: OrderLine, message_id: str, receive_count: str) -> dict:
    """Take `line.quantity` of `line.sku` out of stock and record the reservation."""
    try:
        _dynamodb.update_item(
            TableName=table("stock"),
            Key={"sku": {"S": line.sku}},
            UpdateExpression="SET available = available - :quantity",
            # Unknown SKU or too few left: refuse, so nothing is half reserved.
            ConditionExpression="attribute_exists(sku) AND available >= :quantity",
            ExpressionAttributeValues={":quantity": {"N": str(line.quantity)}},
        )
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
            raise StockUnavailableError(f"{line.sku}: fewer than {line.quantity} available") from exc
        raise
    reservation_id = str(uuid.uuid4())
    _dynamodb.put_item(
        TableName=table("reservations"),
        Item={
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
    )
    return {"reservation_id": reservation_id}
