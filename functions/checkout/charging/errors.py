"""Every way a charge request can fail, one class per condition."""


class CheckoutError(Exception):
    """Base of the errors this lesson raises on purpose."""

    error_type = "CheckoutError"


class InvalidRequestError(CheckoutError):
    """The request is malformed; nothing was charged."""

    error_type = "InvalidRequestError"


class PayloadMismatchError(CheckoutError):
    """The idempotency key was already used with a different amount or currency."""

    error_type = "PayloadMismatchError"


class ChargeFailedError(CheckoutError):
    """The card processor refused the charge: nothing was charged."""

    error_type = "ChargeFailedError"


class ChargeUnknownError(CheckoutError):
    """The card processor's answer was lost (a timeout, a crash): it may have charged."""

    error_type = "ChargeUnknownError"
