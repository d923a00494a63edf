"""Write the registration once per logical request, however often this step runs.

The row is keyed by ``request_id``, the idempotency key the client sends with every retry
of the same request, and written only if no row has that key yet. Losing that race is
not an error: the earlier attempt already registered the vehicle, so this attempt
returns what it stored.
"""

from __future__ import annotations

from typing import Any

from boto3.dynamodb.types import TypeDeserializer

from registration.errors import RequestMismatchError
from registration.request import RegistrationRequest, parse_request
from registration.store import new_registration
from shared.clients import dynamodb_table

# Timeline this guards against (one request, two attempts A and B of the write step):
#   A: PutItem ok -> notify fails -> Retry -> B: PutItem finds A's row -> B returns A's row
KEY_NOT_TAKEN = "attribute_not_exists(request_id)"


def handler(event: Any, context: Any) -> dict[str, Any]:
    request = parse_request(event)
    registration = new_registration(request)
    table = dynamodb_table("vehicles")
    try:
        table.put_item(
            Item=registration,
            ConditionExpression=KEY_NOT_TAKEN,
            # The stored row comes back with the refusal: no second read, no gap between them.
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    except table.meta.client.exceptions.ConditionalCheckFailedException as refused:
        return _stored_registration(table, request, refused.response.get("Item"))
    return registration


def _stored_registration(table: Any, request: RegistrationRequest, raw_item: Any) -> dict[str, Any]:
    if raw_item:
        stored = {name: _DESERIALIZE(value) for name, value in raw_item.items()}
    else:
        # Emulators that ignore ReturnValuesOnConditionCheckFailure send no item back.
        stored = table.get_item(Key={"request_id": request.request_id}, ConsistentRead=True)["Item"]
    if stored["request_fingerprint"] != request.fingerprint():
        # Naming only the key: the stored row belongs to whoever sent the first request.
        raise RequestMismatchError(
            f"request_id {request.request_id!r} was already used to register a different "
            "VIN or owner; a different request needs a new request_id"
        )
    return stored


_DESERIALIZE = TypeDeserializer().deserialize
