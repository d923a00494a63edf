"""Tell the owner the vehicle is registered; fails on purpose when the request asks for it.

A failure here, after the write succeeded, is what makes the workflow's Retry run the
write step a second time.
"""

from __future__ import annotations

from typing import Any

from registration import faults
from registration.request import parse_notification


def handler(event: Any, context: Any) -> dict[str, Any]:
    request, registration_id = parse_notification(event)
    # One fault per request: its first N notifications fail, whichever attempt sends them.
    faults.arm_from_request(request)
    faults.strike(faults.NOTIFY, request.request_id, context)
    return {"notified": True, "registration_id": registration_id}
