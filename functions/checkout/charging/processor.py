"""The checkout's side of the card processor: one call, one charge (unless a key is sent).

The processor is a Lambda function (CARD_PROCESSOR_FUNCTION), invoked synchronously.
"""

from __future__ import annotations

import json

import boto3
from botocore.config import Config
from botocore.exceptions import ConnectionClosedError, ReadTimeoutError

from charging.errors import ChargeFailedError, ChargeUnknownError, InvalidRequestError, PayloadMismatchError
from charging.request import ChargeRequest
from shared import settings

# One attempt only: an SDK retry after a read timeout would call the processor again,
# and without a downstream key that is a second charge the lesson did not ask for.
_lambda = boto3.client("lambda", config=Config(retries={"total_max_attempts": 1}, read_timeout=30))


def charge(request: ChargeRequest) -> dict:
    """Charge the card for ``request``; returns ``{"charge_id", "replayed"}``.

    Raises PayloadMismatchError or ChargeFailedError when the processor refused (nothing charged),
    and ChargeUnknownError when its answer was lost: a timeout, a crash or a dropped connection
    may come after its ledger write, so a charge may or may not have happened.
    """
    call = {"reference": request.idempotency_key, "amount": request.amount, "currency": request.currency}
    if request.pass_key_downstream:
        call["idempotency_key"] = request.idempotency_key
    function = settings.function("card_processor")
    try:
        response = _lambda.invoke(FunctionName=function, InvocationType="RequestResponse", Payload=json.dumps(call))
        body = json.loads(response["Payload"].read() or b"null")
    except (ReadTimeoutError, ConnectionClosedError) as exc:
        raise ChargeUnknownError(f"no answer from the card processor: {exc}") from exc
    if response.get("FunctionError"):
        error = body if isinstance(body, dict) else {}
        error_type, message = error.get("errorType"), error.get("errorMessage")
        if error_type == PayloadMismatchError.__name__:
            raise PayloadMismatchError(message or "idempotency key reused with another payload")
        if error_type == InvalidRequestError.__name__:  # refused before anything was written
            raise ChargeFailedError(f"card processor refused the charge: {message}")
        # Sandbox.Timedout, a crash, any unhandled error: perhaps after the ledger write.
        raise ChargeUnknownError(f"card processor failed, charge unknown: {error_type}: {message}")
    return body
