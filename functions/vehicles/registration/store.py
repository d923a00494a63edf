"""DynamoDB tables by environment variable, and the registration record itself."""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import boto3

from .errors import ConfigurationError
from .request import RegistrationRequest


def table(key: str) -> Any:
    """The table for a design key: ``table("vehicles")`` reads VEHICLES_TABLE (Terraform sets it)."""
    variable = f"{key.upper()}_TABLE"
    name = os.environ.get(variable)
    if not name:
        raise ConfigurationError(f"{variable} is not set; the function's configuration is incomplete")
    return _table(name, os.environ.get("AWS_ENDPOINT_URL"))


@lru_cache(maxsize=8)
def _table(name: str, endpoint_url: str | None) -> Any:
    # Cached per warm environment: creating a boto3 resource costs more than a PutItem.
    return boto3.resource("dynamodb", endpoint_url=endpoint_url).Table(name)


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
