"""Lesson 7 plumbing (notebook 07 and ``idemlab.exercises.keys``): deploy the keyed checkout
with a chosen key and record lifetime, deliver to it, count charges in the ledger.

A variant is a real Lambda function: the ``checkout_keyed`` handler from the checkout zip
(Powertools bundled), created beside the stack's ``checkout_powertools`` with its role and
environment, plus the variant's own settings. ``remove`` deletes it.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import uuid
from dataclasses import dataclass

from idemlab import build, lessons

# The redrive horizon and its model have one owner; lesson 7 reads them from here.
from idemlab.horizon import DAY, REDRIVE_HORIZON_SECONDS  # noqa: F401
from idemlab.lessons.checkout import FUNCTION_DIR, Checkout

HANDLER = "checkout_keyed.handler"
# The deployed function whose role and environment a variant borrows: it may already
# use the Powertools table and invoke the card processor, which is all a variant needs.
TEMPLATE_FUNCTION = "checkout_powertools"
# For a handler of the learner's own: a role that may invoke the card processor.
HANDLER_TEMPLATE_FUNCTION = "checkout_naive"

WHOLE_EVENT = "@"  # JMESPath for the whole delivery, headers and all
CLIENT_KEY = 'headers."Idempotency-Key"'
SERVER_KEY = "body.[customer_id, order_id]"
# The client's key scoped to the caller the front door authenticated: with API Gateway, a
# Lambda authorizer's principalId reaches the function as requestContext.authorizer.
CALLER_SCOPED_KEY = '[requestContext.authorizer.principalId, headers."Idempotency-Key"]'


@dataclass(frozen=True)
class Variant:
    """How a keyed checkout recognises a retry, and for how long."""

    name: str
    key: str
    expires_after_seconds: int
    pass_key_downstream: bool = False


def delivery(order_id: str, amount: int = 1999, key: str | None = None, customer_id: str = "customer-7") -> dict:
    """One delivery of an order: the body stays, the trace id is new on every attempt.

    The front door has authenticated the caller as the customer: its identity arrives in
    ``requestContext.authorizer.principalId``, where API Gateway puts a Lambda
    authorizer's answer, and not in anything the client wrote.
    """
    body = {"order_id": order_id, "customer_id": customer_id, "amount": amount, "currency": "EUR"}
    return retry_of(
        {
            "headers": {} if key is None else {"Idempotency-Key": key},
            "requestContext": {"authorizer": {"principalId": customer_id}},
            "body": body,
        }
    )


def retry_of(sent: dict) -> dict:
    """The same delivery again, as a retry carries it: same body, a new trace id."""
    again = copy.deepcopy(sent)
    again["headers"]["X-Amzn-Trace-Id"] = f"Root=1-{uuid.uuid4().hex[:8]}-{uuid.uuid4().hex[:24]}"
    return again


def new_order_id(prefix: str = "order") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@functools.lru_cache(maxsize=1)
def checkout_zip() -> bytes:
    """The checkout folder plus Powertools, as ``make deploy`` packs it."""
    return build.zip_bytes({**build.source_files(FUNCTION_DIR), **build.bundled_files()})


class KeyedCheckouts(Checkout):
    """The checkout scenario plus variants of the keyed checkout, deployed on the learner's backend."""

    def __init__(self, stack: dict):
        super().__init__(stack)
        self.deployed: dict[str, str] = {}

    def deploy(self, variant: Variant) -> str:
        """Create (or update) the variant's function; returns its name once it is active."""
        return self.deploy_handler(
            variant.name,
            checkout_zip(),
            HANDLER,
            TEMPLATE_FUNCTION,
            {
                "POWERTOOLS_SERVICE_NAME": f"checkout_{variant.name}",
                "IDEMPOTENCY_KEY_JMESPATH": variant.key,
                "IDEMPOTENCY_EXPIRES_AFTER_SECONDS": str(variant.expires_after_seconds),
                "PASS_KEY_DOWNSTREAM": str(variant.pass_key_downstream).lower(),
            },
        )

    def deploy_handler(
        self,
        label: str,
        code: bytes,
        handler: str,
        template_key: str = HANDLER_TEMPLATE_FUNCTION,
        variables: dict[str, str] | None = None,
    ) -> str:
        """A function of ``code`` (a zip) with the template function's role and environment plus
        ``variables``; by default ``checkout_naive``'s, which may invoke the card processor
        (CARD_PROCESSOR_FUNCTION). Its name once it is active."""
        template = self.lambda_.get_function_configuration(FunctionName=self.stack["functions"][template_key])
        name = f"{template['FunctionName'][:40]}-{label}"[:64]
        settings = {key: template[key] for key in ("Role", "Runtime", "Timeout", "MemorySize")}
        variables = {**template["Environment"]["Variables"], **(variables or {})}
        settings.update(Handler=handler, Environment={"Variables": variables})
        # The template's tags (the participant's among them): `make workshop-destroy` and the
        # leftover check find a variant as part of its participant's stack.
        tags = self.lambda_.list_tags(Resource=template["FunctionArn"])["Tags"]
        try:
            self.lambda_.create_function(FunctionName=name, Code={"ZipFile": code}, Tags=tags, **settings)
            self.lambda_.get_waiter("function_active_v2").wait(FunctionName=name)
        except self.lambda_.exceptions.ResourceConflictException:
            for update in (
                lambda: self.lambda_.update_function_code(FunctionName=name, ZipFile=code),
                lambda: self.lambda_.update_function_configuration(FunctionName=name, **settings),
            ):
                update()
                self.lambda_.get_waiter("function_updated_v2").wait(FunctionName=name)
        self.deployed[label] = name
        return name

    def send(self, variant: Variant | str, event: dict) -> dict:
        """One synchronous delivery to the variant; its answer (outcome, charge id)."""
        return lessons.invoke(self.lambda_, self.deployed[getattr(variant, "name", variant)], event)

    def remove(self) -> list[str]:
        """Delete every variant this object deployed (they are not part of the Terraform stack)."""
        removed = list(self.deployed.values())
        for name in removed:
            with contextlib.suppress(self.lambda_.exceptions.ResourceNotFoundException):
                self.lambda_.delete_function(FunctionName=name)
        self.deployed.clear()
        return removed
