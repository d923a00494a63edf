"""Write the registration, naively: every run inserts a new row.

The row's key is a fresh uuid, so a second run of this step for the same request (a
client retry, or a Retry inside the workflow) adds a second registration.
"""

from __future__ import annotations

from typing import Any

from registration.request import parse_request
from registration.store import new_registration
from shared.clients import dynamodb_table


def handler(event: Any, context: Any) -> dict[str, Any]:
    request = parse_request(event)
    registration = new_registration(request)
    dynamodb_table("vehicles_naive").put_item(Item=registration)
    return registration
