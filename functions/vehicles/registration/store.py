"""The registration record itself (its tables come from ``shared.clients.dynamodb_table``)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from .request import RegistrationRequest


def new_registration(request: RegistrationRequest) -> dict[str, Any]:
    """A registration record for one attempt at ``request``: a fresh id every call."""
    return {
        "registration_id": str(uuid.uuid4()),
        "request_id": request.request_id,
        "vin": request.vin,
        "owner": request.owner,
        "request_fingerprint": request.fingerprint(),
        "registered_at": datetime.now(UTC).isoformat(timespec="milliseconds"),
    }
