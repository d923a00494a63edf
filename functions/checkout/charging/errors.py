"""Every way a charge request can fail, one class per condition."""


class CheckoutError(Exception):
    """Base of the errors this scenario raises on purpose."""

    error_type = "CheckoutError"


class InvalidRequest(CheckoutError):
    """The request is malformed; nothing was charged."""

    error_type = "InvalidRequest"


class PayloadMismatch(CheckoutError):
    """The idempotency key was already used with a different amount or currency."""

    error_type = "PayloadMismatch"


class ChargeFailed(CheckoutError):
    """The card processor did not confirm the charge."""

    error_type = "ChargeFailed"
