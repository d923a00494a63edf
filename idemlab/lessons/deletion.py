"""Lesson 3 plumbing: the account-deletion code in-process, and its tables on a bare server.

Tests and the notebooks ``03_claims_and_leases`` and ``04_partial_failures_and_recovery``
import this module, so what a notebook shows is what CI checks.
"""

from __future__ import annotations

import importlib
import sys
import uuid
from types import ModuleType

from idemlab import settings

FUNCTION_DIR = settings.ROOT / "functions" / "account_deletion"

# The table keys of the scenario (docs/DESIGN.md) and their key schema, as the Terraform
# module declares them; used to create private copies on a bare server.
TABLE_KEYS = ("deletion_requests", "user_records", "identities", "email_outbox", "faults")
_KEY_SCHEMA = {
    "deletion_requests": [("deletion_request_id", "S", "HASH")],
    "user_records": [("user_id", "S", "HASH"), ("record_id", "S", "RANGE")],
    "identities": [("user_id", "S", "HASH")],
    "email_outbox": [("idempotency_key", "S", "HASH")],
    "faults": [("fault_key", "S", "HASH")],
}


def import_function_module(name: str) -> ModuleType:
    """A module of the deletion Lambda code (``"deletion_state"``, ``"claim_deletion"``).

    The zip's root is the function folder, whose modules import each other as top-level
    names; the folder goes on ``sys.path`` the same way. Every module name in it starts
    with its own scenario's words, so no other folder shadows it.
    """
    folder = str(FUNCTION_DIR)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(name)


def create_tables(dynamodb_client, prefix: str | None = None) -> dict[str, str]:
    """Create the scenario's tables under a fresh prefix; returns {table key: table name}.

    Same keys and indexes as the Terraform module, so the code under test cannot tell
    the difference; the prefix keeps parallel tests apart on one server.
    """
    prefix = prefix or f"t{uuid.uuid4().hex[:8]}"
    names = {}
    for key in TABLE_KEYS:
        name = f"{prefix}-{key}"
        attributes = {n: t for n, t, _ in _KEY_SCHEMA[key]}
        spec = {
            "TableName": name,
            "BillingMode": "PAY_PER_REQUEST",
            "KeySchema": [{"AttributeName": n, "KeyType": k} for n, _, k in _KEY_SCHEMA[key]],
        }
        if key == "deletion_requests":
            attributes.update(user_id="S", status="S", lease_expires_at="N")
            spec["GlobalSecondaryIndexes"] = [
                _index("by_user", [("user_id", "HASH")]),
                _index("by_status_lease", [("status", "HASH"), ("lease_expires_at", "RANGE")]),
            ]
        spec["AttributeDefinitions"] = [{"AttributeName": n, "AttributeType": t} for n, t in attributes.items()]
        dynamodb_client.create_table(**spec)
        names[key] = name
    return names


def _index(name: str, keys: list[tuple[str, str]]) -> dict:
    return {
        "IndexName": name,
        "KeySchema": [{"AttributeName": n, "KeyType": k} for n, k in keys],
        "Projection": {"ProjectionType": "ALL"},
    }


def table_env(names: dict[str, str]) -> dict[str, str]:
    """The ``<KEY>_TABLE`` environment variables Terraform gives the functions."""
    return {f"{key.upper()}_TABLE": name for key, name in names.items()}
