"""Lesson 2 plumbing (notebook 02): invoke the checkouts, many copies at once, count charges.

A charge is counted in the ledger (one entry per charge, grouped by the order's
idempotency key), never taken from what a checkout says about itself.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable

from idemlab import faults, lambda_code, lessons, progress, settings
from idemlab.barrier import all_at_once
from idemlab.clients import client

FUNCTION_DIR = settings.ROOT / "functions" / "checkout"
STRATEGIES = ("naive", "handrolled", "powertools")
# The checkouts' function keys; the card processor is the function they invoke.
FUNCTION_KEYS = tuple(f"checkout_{strategy}" for strategy in STRATEGIES)

# The answers and the fault point and kinds are defined once, next to the handlers that use them.
outcomes, checkout_faults = (lambda_code.load(FUNCTION_DIR, f"charging.{name}") for name in ("outcomes", "faults"))
# Not a checkout answer: the invocation was stopped (it ran past its timeout) or died
# before it could answer. Lambda then answers with a FunctionError.
CRASHED = "crashed"
# Each checkout invocation also calls the card processor, synchronously: two executions
# in flight per copy (Lambda's concurrency counts both).
EXECUTIONS_PER_COPY = 2
# Left for everything else in the account while the lesson runs (other lessons' functions,
# a sweeper on its schedule).
CONCURRENCY_HEADROOM = 2
# Copies of one checkout released together in notebook 02's race, where the account's
# concurrency allows (copies_that_fit); the workshop's quota check reads its peak from here.
RACE_COPIES = 5

Invoke = Callable[[str, dict], dict]


def function_key(strategy: str) -> str:
    """The key of a strategy's checkout function (``checkout_naive``, ...)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")
    return FUNCTION_KEYS[STRATEGIES.index(strategy)]


def order(prefix: str = "order", amount: int = 1999, currency: str = "EUR", **options) -> dict:
    """A checkout request with a fresh idempotency key, so every run starts clean."""
    return {"idempotency_key": f"{prefix}-{uuid.uuid4().hex[:12]}", "amount": amount, "currency": currency, **options}


def concurrently(call: Callable[[], dict], copies: int) -> list[dict]:
    """Run ``call`` in ``copies`` threads released together; answers in thread order."""
    if copies < 1:
        raise ValueError(f"copies must be at least 1, got {copies}")
    return all_at_once([call] * copies, join_seconds=None)


class Ledger:
    """The card processor's ledger: every charge is one entry."""

    def __init__(self, table: str, dynamodb=None):
        self.table = table
        self._dynamodb = dynamodb or client("dynamodb")

    def charges(self, references: Iterable[str] | None = None) -> Counter:
        """Charges per order reference (all of them, or only ``references``)."""
        counts = Counter(dict.fromkeys(references or (), 0))
        counts.update(reference for reference, _ in self._entries() if references is None or reference in counts)
        return counts

    def count(self, reference: str) -> int:
        return self.charges([reference])[reference]

    def charge_ids(self, reference: str) -> list[str]:
        return [charge_id for entry_reference, charge_id in self._entries() if entry_reference == reference]

    def _entries(self) -> list[tuple[str, str]]:
        """(reference, charge id) of every ledger entry: one consistent scan."""
        projection = {"ProjectionExpression": "#ref, charge_id", "ExpressionAttributeNames": {"#ref": "reference"}}
        items = lessons.scan(self.table, self._dynamodb, **projection)  # "reference" is a DynamoDB reserved word
        return [(item["reference"]["S"], item["charge_id"]["S"]) for item in items]


class Checkout(lessons.Deployment):
    """The deployed checkout scenario, as the lesson uses it."""

    def __init__(self, stack: dict):
        # One attempt per call: an SDK retry of an invocation is itself a duplicate request.
        super().__init__(stack, retries={"total_max_attempts": 1}, read_timeout=90, max_pool_connections=64)
        self._dynamodb = client("dynamodb", max_pool_connections=64)
        self.ledger = Ledger(stack["tables"]["ledger"], self._dynamodb)

    def invoke(self, strategy: str, request: dict) -> dict:
        """One synchronous invocation of a strategy's checkout; a crash or timeout becomes a ``crashed`` answer."""
        try:
            return super().invoke(function_key(strategy), request)
        except lessons.FunctionFailed as failed:
            return {"strategy": strategy, "outcome": CRASHED, "charge_id": None, "trace": [], "error": failed.answer}

    def start_environments(self, strategy: str, copies: int, hold_ms: int = 300) -> set[int]:
        """Start ``copies`` execution environments, so that no copy of a later request
        waits for a cold start (which would spread the copies over a second or more).

        Lambda starts an environment for each request that finds all others busy, so
        ``copies`` one-cent orders that each hold their environment for ``hold_ms`` do it.
        They are real orders (one charge each, under ``warm-up-`` references); a request
        that is merely rejected returns too fast to keep an environment busy.
        """
        requests = [order(prefix="warm-up", amount=1, check_act_delay_ms=hold_ms) for _ in range(copies)]
        answers = all_at_once([lambda r=r: self.invoke(strategy, r) for r in requests], join_seconds=None)
        if failed := [a for a in answers if a["outcome"] != outcomes.CHARGED]:
            raise RuntimeError(f"warm-up orders should be charged, got {failed}")
        return {a["pid"] for a in answers}

    def charges(self, request_or_key: dict | str) -> int:
        key = request_or_key["idempotency_key"] if isinstance(request_or_key, dict) else request_or_key
        return self.ledger.count(key)

    def charge_card(self, request: dict, pass_key: bool = False) -> str:
        """Charge the card through the deployed card processor; with ``pass_key``, the
        request's idempotency key goes with the call, so a repeat gets the first charge."""
        call = {"reference": request["idempotency_key"], "amount": request["amount"], "currency": request["currency"]}
        if pass_key:
            call["idempotency_key"] = request["idempotency_key"]
        return super().invoke("card_processor", call)["charge_id"]

    def timeout_seconds(self, strategy: str) -> int:
        function = self.stack["functions"][function_key(strategy)]
        return self.lambda_.get_function_configuration(FunctionName=function)["Timeout"]

    def _arm(self, kind: str, request: dict, times: int = 1) -> None:
        point = checkout_faults.AFTER_CHARGE
        faults.arm(lessons.table(self.stack, "faults"), point, request["idempotency_key"], kind, times)

    # ``arm_x(request, times=1)``: the next ``times`` invocations for this key run past their
    # timeout right after charging, or lose the card processor's answer after it charged
    # (the checkout cannot tell whether it did).
    arm_crash_after_charge = functools.partialmethod(_arm, checkout_faults.CRASH)
    arm_lost_answer = functools.partialmethod(_arm, checkout_faults.LOSE_ANSWER)

    def concurrency_limit(self) -> int:
        """Executions this account may run at once outside reserved concurrency (GetAccountSettings).

        AWS, LocalStack and the embedded backend all answer it (API reference:
        https://docs.aws.amazon.com/lambda/latest/api/API_GetAccountSettings.html).
        """
        return self.lambda_.get_account_settings()["AccountLimit"]["UnreservedConcurrentExecutions"]


def copies_that_fit(wanted: int, concurrency_limit: int) -> int:
    """How many concurrent copies of a checkout fit the account's Lambda concurrency.

    Each copy holds two executions (the checkout and its card processor call); beyond
    the limit Lambda throttles (TooManyRequestsException), which is not the lesson.
    """
    fit = (concurrency_limit - CONCURRENCY_HEADROOM) // EXECUTIONS_PER_COPY
    if fit < 2:
        raise RuntimeError(
            f"this account runs {concurrency_limit} Lambda executions at once; a race needs at least "
            f"{2 * EXECUTIONS_PER_COPY + CONCURRENCY_HEADROOM}: ask AWS for a higher concurrency quota"
        )
    return min(wanted, fit)


def run_rounds(invoke: Invoke, ledger: Ledger, strategy: str, rounds: int, copies: int, **options) -> list[int]:
    """Send ``copies`` identical requests at once, ``rounds`` times; charges per round."""
    requests = [order(prefix=f"round-{strategy}", **options) for _ in range(rounds)]
    with progress.Stage(f"racing {copies} copies of a checkout through {strategy}", rounds, "rounds") as stage:
        for request in requests:
            concurrently(lambda: invoke(strategy, request), copies)
            stage.advance()
    keys = [request["idempotency_key"] for request in requests]
    counts = ledger.charges(keys)
    return [counts[key] for key in keys]


def retry_until_answered(
    invoke: Invoke, strategy: str, request: dict, within_seconds: float, every: float = 0.5
) -> list[dict]:
    """Retry while the key is held by an invocation that will never finish; all answers.

    Raises TimeoutError naming the last outcome if the key is still held after ``within_seconds``.
    """
    answers: list[dict] = []
    deadline = time.monotonic() + within_seconds
    while True:
        answer = invoke(strategy, request)
        answers.append(answer)
        if answer["outcome"] != outcomes.IN_PROGRESS:
            return answers
        if time.monotonic() >= deadline:
            raise TimeoutError(
                f"{strategy}: still {answer['outcome']} after {within_seconds:.0f} s "
                f"({len(answers)} attempts), wanted any other outcome"
            )
        time.sleep(every)


# What the Powertools checkout's idempotency table answers its claim (a conditional PutItem
# of an INPROGRESS record: the key is absent, or its record has expired), by the outcome the
# copy reported. Powertools 3.37, `persistence/dynamodb.py` `_put_record` and `base.py`.
CLAIM_ANSWERS = {
    outcomes.CHARGED: "ok: the key is ours",
    outcomes.FAILED: "ok: the key is ours",
    outcomes.UNKNOWN: "ok: the key is ours",
    outcomes.REPLAYED: "refused: COMPLETED, here is the stored answer",
    outcomes.IN_PROGRESS: "refused: INPROGRESS and not expired",
    outcomes.REJECTED: "refused: the stored payload hash differs",
    CRASHED: "ok: the key is ours",
}
TABLE = "idempotency table"
PROCESSOR = "card processor"


def powertools_sequence(copies: list[tuple[str, dict]], title: str = "") -> dict:
    """A sequence description (``pictures.draw_sequence``) of Powertools checkout copies that
    really ran: ``copies`` is ``(label, answer)`` in the order they were sent. Each message
    comes from the copy's answer: its outcome and its step trace (check = the claim, charge =
    the card processor call, record = the COMPLETED update). A copy that crashed answers
    nothing; it was armed to crash right after its charge (``arm_crash_after_charge``), so it
    is drawn claiming, charging and never completing. Messages are ordered by the trace's
    clock where there is one; a second charge of the same order is named so (drawn red)."""
    events: list[tuple[float, int, tuple[str, str, str]]] = []
    charges = 0
    clock = 0.0
    for order_sent, (label, answer) in enumerate(copies):
        steps = {step["step"]: step for step in answer.get("trace", [])}
        check = steps.get("check")
        claimed_at = check["start"] if check else clock
        answered_at = check["end"] if check else claimed_at
        clock = max(clock, answered_at)
        events.append((claimed_at, order_sent, (label, TABLE, "PutItem INPROGRESS if absent or expired")))
        events.append((answered_at, order_sent, (TABLE, label, CLAIM_ANSWERS[answer["outcome"]])))
        charged = "charge" in steps or answer["outcome"] == CRASHED
        if charged:
            charges += 1
            charge = steps.get("charge", {"start": answered_at, "end": answered_at})
            what = "charge" if charges == 1 else "charge (a second time)"
            replayed = answer.get("processor_replayed")
            events.append((charge["start"], order_sent, (label, PROCESSOR, what)))
            events.append(
                (charge["end"], order_sent, (PROCESSOR, label, "the first charge, replayed" if replayed else "charged"))
            )
            clock = max(clock, charge["end"])
        if "record" in steps:
            events.append((steps["record"]["end"], order_sent, (label, TABLE, "UpdateItem COMPLETED + the answer")))
        elif answer["outcome"] == CRASHED:
            events.append((clock, order_sent, (label, TABLE, "(timed out: no COMPLETED; INPROGRESS expires)")))
    participants = [label for label, _ in copies] + [TABLE, PROCESSOR]
    messages = [message for _, _, message in sorted(events, key=lambda event: (event[0], event[1]))]
    return {"title": title, "participants": participants, "messages": messages}
