"""RMV check: the gate of the workflow.

It rejects a malformed request, an invalid VIN or a stolen vehicle by raising, which
fails the execution before any write step runs.
"""

from __future__ import annotations

from typing import Any

from registration.errors import StolenVehicleError
from registration.request import parse_request

# A fixed list, so that the lesson can show a refusal; each of these has a valid check digit.
STOLEN_VINS = frozenset(
    {
        "1FTFW1E53MFA00001",
        "2T1BURHE1JC000002",
        "WVWZZZ1J4XW000003",
    }
)


def handler(event: Any, context: Any) -> dict[str, Any]:
    request = parse_request(event)
    if request.vin in STOLEN_VINS:
        raise StolenVehicleError(f"VIN {request.vin} is reported stolen; registration refused")
    return {"request": request.to_event(), "rmv": {"status": "CLEAR", "vin": request.vin}}
