"""The one place a registration request is validated.

Every function parses its input here first, so a malformed request fails the same way
wherever it enters, and fails before anything is written.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from .errors import MalformedRequestError
from .vin import normalize_vin

# Request ids end up in DynamoDB keys and in execution names (at most 80 characters).
REQUEST_ID_PATTERN = re.compile(r"[A-Za-z0-9._:-]{1,80}")
MAX_OWNER_LENGTH = 100
# A lesson needs one or two injected failures; a cap keeps a typo from retrying forever.
MAX_NOTIFY_FAILURES = 5

REQUIRED_FIELDS = ("request_id", "vin", "owner")
OPTIONAL_FIELDS = ("fault_injection",)
FAULT_FIELDS = ("notify_failures",)


@dataclass(frozen=True)
class RegistrationRequest:
    request_id: str  # the idempotency key: one per logical request, the same on every retry
    vin: str
    owner: str
    notify_failures: int = 0  # fault injection: notify fails this many times first

    def fingerprint(self) -> str:
        """What the request asks for; a retry of it has the same fingerprint."""
        canonical = json.dumps({"vin": self.vin, "owner": self.owner}, sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()

    def to_event(self) -> dict[str, Any]:
        event: dict[str, Any] = {"request_id": self.request_id, "vin": self.vin, "owner": self.owner}
        if self.notify_failures:
            event["fault_injection"] = {"notify_failures": self.notify_failures}
        return event


def parse_request(event: Any) -> RegistrationRequest:
    """A valid RegistrationRequest from ``event``, or MalformedRequestError / InvalidVinError."""
    if not isinstance(event, dict):
        raise MalformedRequestError(f"a request must be a JSON object, got {_type_name(event)}")
    _reject_unknown(event, REQUIRED_FIELDS + OPTIONAL_FIELDS, "request")
    missing = [name for name in REQUIRED_FIELDS if name not in event]
    if missing:
        raise MalformedRequestError(f"request is missing {', '.join(missing)}")

    request_id = _string(event, "request_id")
    if not REQUEST_ID_PATTERN.fullmatch(request_id):
        raise MalformedRequestError(f"request_id {request_id!r} must be 1-80 letters, digits or . _ : -")
    owner = _string(event, "owner").strip()
    if not owner or len(owner) > MAX_OWNER_LENGTH:
        raise MalformedRequestError(f"owner must be 1-{MAX_OWNER_LENGTH} non-blank characters")
    return RegistrationRequest(
        request_id=request_id,
        vin=normalize_vin(_string(event, "vin")),
        owner=owner,
        notify_failures=_notify_failures(event.get("fault_injection", {})),
    )


def _notify_failures(faults: Any) -> int:
    if not isinstance(faults, dict):
        raise MalformedRequestError(f"fault_injection must be an object, got {_type_name(faults)}")
    _reject_unknown(faults, FAULT_FIELDS, "fault_injection")
    count = faults.get("notify_failures", 0)
    # bool is an int in Python; true is not a count.
    if isinstance(count, bool) or not isinstance(count, int):
        raise MalformedRequestError(f"fault_injection.notify_failures must be an integer, got {_type_name(count)}")
    if not 0 <= count <= MAX_NOTIFY_FAILURES:
        raise MalformedRequestError(
            f"fault_injection.notify_failures must be between 0 and {MAX_NOTIFY_FAILURES}, got {count}"
        )
    return count


def _string(event: dict[str, Any], name: str) -> str:
    value = event[name]
    if not isinstance(value, str):
        raise MalformedRequestError(f"{name} must be a string, got {_type_name(value)}")
    return value


def _reject_unknown(obj: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
    # A misspelt optional field would otherwise be ignored without a word.
    unknown = sorted(set(obj) - set(allowed))
    if unknown:
        raise MalformedRequestError(
            f"{where} has unexpected field(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(allowed)}"
        )


def _type_name(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number" if isinstance(value, (int, float)) else type(value).__name__
    )


def parse_notification(event: Any) -> tuple[RegistrationRequest, str]:
    """The request and the registration id from the notify step's input."""
    if not isinstance(event, dict):
        raise MalformedRequestError(f"notify input must be a JSON object, got {_type_name(event)}")
    _reject_unknown(event, ("request", "registration"), "notify input")
    registration = event.get("registration")
    if not isinstance(registration, dict) or not isinstance(registration.get("registration_id"), str):
        raise MalformedRequestError("notify input needs registration.registration_id (a string)")
    return parse_request(event.get("request")), registration["registration_id"]
