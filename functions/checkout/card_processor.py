"""A card processor, as payment APIs behave: every call charges the card, unless the
caller sends an idempotency key it has seen before; then it answers with the first
charge again and charges nothing.

Each charge is appended to the ledger under its own charge id, so a double charge
shows up as two ledger entries for one order reference.
"""

from __future__ import annotations

import os
import time
import uuid

import boto3
from botocore.exceptions import ClientError

from charging.errors import PayloadMismatchError
from charging.request import ProcessorCharge, parse_processor_charge
from shared import settings

dynamodb = boto3.client("dynamodb")


def handler(event, context):
    charge = parse_processor_charge(event)
    if charge.idempotency_key is None:
        return {"charge_id": _append_to_ledger(charge), "replayed": False}
    return _charge_once_per_key(charge)


def _ledger_entry(charge: ProcessorCharge, charge_id: str) -> dict:
    entry = {
        "charge_id": {"S": charge_id},
        "reference": {"S": charge.reference},
        "amount": {"N": str(charge.amount)},
        "currency": {"S": charge.currency},
        "charged_at": {"N": repr(time.time())},
        "pid": {"N": str(os.getpid())},
    }
    if charge.idempotency_key is not None:
        entry["idempotency_key"] = {"S": charge.idempotency_key}
    return entry


def _new_charge_id() -> str:
    return f"ch_{uuid.uuid4().hex}"


def _append_to_ledger(charge: ProcessorCharge) -> str:
    charge_id = _new_charge_id()
    dynamodb.put_item(
        TableName=settings.table("ledger"),
        Item=_ledger_entry(charge, charge_id),
        ConditionExpression="attribute_not_exists(charge_id)",
    )
    return charge_id


def _charge_once_per_key(charge: ProcessorCharge) -> dict:
    charge_id = _new_charge_id()
    # The key claim and the ledger entry commit together or not at all: a processor
    # that crashed between the two would either lose the key or charge twice.
    key_item = {
        "idempotency_key": {"S": charge.idempotency_key},
        "charge_id": {"S": charge_id},
        "amount": {"N": str(charge.amount)},
        "currency": {"S": charge.currency},
    }
    try:
        dynamodb.transact_write_items(
            TransactItems=[
                {
                    "Put": {
                        "TableName": settings.table("processor_keys"),
                        "Item": key_item,
                        "ConditionExpression": "attribute_not_exists(idempotency_key)",
                    }
                },
                {"Put": {"TableName": settings.table("ledger"), "Item": _ledger_entry(charge, charge_id)}},
            ]
        )
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "TransactionCanceledException":
            raise
        reasons = [reason.get("Code", "None") for reason in exc.response.get("CancellationReasons", [])]
        if reasons[:1] != ["ConditionalCheckFailed"]:
            # e.g. TransactionConflict on AWS: nothing was written, so the caller may retry.
            raise RuntimeError(f"charge with key {charge.idempotency_key!r} was cancelled: {reasons}") from exc
        return _first_charge_for(charge)
    return {"charge_id": charge_id, "replayed": False}


def _first_charge_for(charge: ProcessorCharge) -> dict:
    stored = dynamodb.get_item(
        TableName=settings.table("processor_keys"),
        Key={"idempotency_key": {"S": charge.idempotency_key}},
        ConsistentRead=True,
    )["Item"]  # present: the key's condition failed, and keys are never deleted
    if int(stored["amount"]["N"]) != charge.amount or stored["currency"]["S"] != charge.currency:
        raise PayloadMismatchError(
            f"idempotency key {charge.idempotency_key!r} was used for "
            f"{stored['amount']['N']} {stored['currency']['S']}, not {charge.amount} {charge.currency}"
        )
    return {"charge_id": stored["charge_id"]["S"], "replayed": True}
