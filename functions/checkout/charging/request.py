"""Validation of a charge request, in one place for every handler.

A checkout request looks like::

    {"idempotency_key": "order-42", "amount": 1999, "currency": "EUR"}

``amount`` is in minor units (cents), as payment APIs take it, so no float ever
touches money. Optional fields steer the lesson, not the payment:
``check_act_delay_ms`` widens the window between check and charge, ``pass_key_downstream``
hands the idempotency key on to the card processor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from charging.errors import InvalidRequestError

CURRENCIES = ("EUR", "USD", "GBP", "CHF", "JPY")
MAX_AMOUNT = 100_000_000  # one million in major units: anything above is a typo
MAX_KEY_LENGTH = 255  # what payment APIs accept; far below DynamoDB's key limit
MAX_DELAY_MS = 5_000  # must stay well inside the function timeout

REQUIRED = ("idempotency_key", "amount", "currency")
OPTIONAL = ("check_act_delay_ms", "pass_key_downstream")


@dataclass(frozen=True)
class ChargeRequest:
    idempotency_key: str
    amount: int
    currency: str
    check_act_delay_ms: int | None = None
    pass_key_downstream: bool = False

    def payment(self) -> dict[str, Any]:
        """The fields that define the payment; a retry must repeat them exactly."""
        return {"idempotency_key": self.idempotency_key, "amount": self.amount, "currency": self.currency}


def check_act_delay_ms(order: ChargeRequest) -> int:
    """The pause between check and charge: the request's ``check_act_delay_ms``, else none."""
    return order.check_act_delay_ms or 0


def parse(event: Any) -> ChargeRequest:
    """Return the validated request, or raise InvalidRequestError saying what is wrong."""
    if not isinstance(event, dict):
        raise InvalidRequestError(f"request must be a JSON object, got {type(event).__name__}")
    unknown = sorted(set(event) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise InvalidRequestError(f"unknown field(s) {', '.join(unknown)}; allowed: {', '.join(REQUIRED + OPTIONAL)}")
    missing = [name for name in REQUIRED if event.get(name) is None]
    if missing:
        raise InvalidRequestError(f"missing field(s): {', '.join(missing)}")
    return ChargeRequest(
        idempotency_key=_key(event["idempotency_key"]),
        amount=_amount(event["amount"]),
        currency=_currency(event["currency"]),
        check_act_delay_ms=_delay(event.get("check_act_delay_ms")),
        pass_key_downstream=_flag("pass_key_downstream", event.get("pass_key_downstream", False)),
    )


def _key(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequestError("idempotency_key must be a non-empty string")
    if len(value) > MAX_KEY_LENGTH:
        raise InvalidRequestError(f"idempotency_key is longer than {MAX_KEY_LENGTH} characters")
    return value


def _amount(value: Any) -> int:
    # bool is an int in Python; True must not become a one-cent charge.
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequestError(f"amount must be a whole number of minor units (cents), got {value!r}")
    if value <= 0:
        raise InvalidRequestError(f"amount must be greater than zero, got {value}")
    if value > MAX_AMOUNT:
        raise InvalidRequestError(f"amount must be at most {MAX_AMOUNT}, got {value}")
    return value


def _currency(value: Any) -> str:
    if value not in CURRENCIES:
        raise InvalidRequestError(f"unknown currency {value!r}; use one of {', '.join(CURRENCIES)}")
    return value


def _delay(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_DELAY_MS:
        raise InvalidRequestError(f"check_act_delay_ms must be a whole number from 0 to {MAX_DELAY_MS}, got {value!r}")
    return value


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidRequestError(f"{name} must be true or false, got {value!r}")
    return value


@dataclass(frozen=True)
class ProcessorCharge:
    reference: str  # the order this charge pays for; lets the ledger count duplicates
    amount: int
    currency: str
    idempotency_key: str | None = None  # the processor's own, optional, downstream key


def parse_processor_charge(event: Any) -> ProcessorCharge:
    """Validate a call to the card processor, with the same rules as a checkout."""
    if not isinstance(event, dict):
        raise InvalidRequestError(f"charge must be a JSON object, got {type(event).__name__}")
    allowed = ("reference", "amount", "currency", "idempotency_key")
    unknown = sorted(set(event) - set(allowed))
    if unknown:
        raise InvalidRequestError(f"unknown field(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}")
    missing = [name for name in allowed[:3] if event.get(name) is None]
    if missing:
        raise InvalidRequestError(f"missing field(s): {', '.join(missing)}")
    key = event.get("idempotency_key")
    return ProcessorCharge(
        reference=_key(event["reference"]),
        amount=_amount(event["amount"]),
        currency=_currency(event["currency"]),
        idempotency_key=None if key is None else _key(key),
    )
