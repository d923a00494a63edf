"""Tell the owner the vehicle is registered; fails on purpose when the request asks for it.

A failure here, after the write succeeded, is what makes the workflow's Retry run the
write step a second time.
"""

from __future__ import annotations

from typing import Any

from registration.errors import NotifyTransientError
from registration.faults import NOTIFY, fault_key, should_fail
from registration.request import parse_notification


def handler(event: Any, context: Any) -> dict[str, Any]:
    request, registration_id = parse_notification(event)
    # One counter per request: its first N notifications fail, whichever attempt sends them.
    if should_fail(fault_key(NOTIFY, request.request_id), request.notify_failures):
        raise NotifyTransientError(f"notification for request {request.request_id} failed (injected transient fault)")
    return {"notified": True, "registration_id": registration_id}
