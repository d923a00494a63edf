"""The strategies the cost bench compares, and what each one needs at the least.

One entry per deployed handler (lesson 1's two writers, lesson 2's four checkouts, lesson
3's claim step): the DynamoDB requests the strategy itself must make, by action, on a first
delivery and on a duplicate, and why that is the least (``why_minimum``). The effect it
protects and the lab's fault probes are measured by the table each request named
(strategy_report.py), never counted here: a change to a fault check shows in the numbers.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from idemlab.lessons import deletion
from idemlab.lessons.vehicles import VALID_VIN

# How effects are counted, from the answers: a charge is a "charged" answer (checked
# against the ledger's entries), a claim a "claimed" one, a row the naive writer's
# insert (one per invocation: it never refuses).
CHARGE, CLAIM, ROW = "charged", "claimed", "row"

# Tables by their key in the stack's outputs (the Terraform owns their names).
PROBE_TABLE = "faults"  # what the lab's fault hooks read; no production handler would

# Three shapes of delivery: a first one, its duplicate after it answered, copies released together.
DELIVERIES = ("first", "duplicate", "concurrent")

VEHICLE_REGISTRATION = "vehicle registration"
CHECKOUT = "checkout"
ACCOUNT_DELETION = "account deletion"


@dataclass(frozen=True)
class Strategy:
    key: str
    lesson: str
    label: str
    function: str  # key under outputs["functions"]
    pattern: str
    why_minimum: str
    minimum_first: Counter = field(default_factory=Counter)  # the strategy's own requests a first delivery needs
    minimum_duplicate: Counter = field(default_factory=Counter)  # ... and a duplicate
    compared_with: str | None = None  # the naive strategy of the same lesson
    effect: str | None = None  # what one unit of business effect is (CHARGE, CLAIM, ROW)
    # The table the protected effect is written to: its requests are the effect's cost.
    # None for a claim, whose write is also the check.
    effect_table: str | None = None

    def minimum(self, firsts: int, duplicates: int) -> Counter:
        """The least ``firsts`` first deliveries and ``duplicates`` duplicates need (no zero counts)."""
        first = Counter({action: n * firsts for action, n in self.minimum_first.items()})
        return first + Counter({action: n * duplicates for action, n in self.minimum_duplicate.items()})


_checkout = partial(Strategy, lesson=CHECKOUT, effect=CHARGE, effect_table="ledger", compared_with="checkout_naive")
CLAIM_FIRST, CLAIM_DUPLICATE = Counter(PutItem=1, UpdateItem=1), Counter(PutItem=1)  # Powertools' claim, then record
POWERTOOLS = {"pattern": "claim, then record", "minimum_first": CLAIM_FIRST, "minimum_duplicate": CLAIM_DUPLICATE}

STRATEGIES: tuple[Strategy, ...] = (
    Strategy(
        key="vehicle_naive",
        lesson=VEHICLE_REGISTRATION,
        label="naive insert",
        function="write_vehicle_naive",
        pattern="plain write, fresh key",
        effect=ROW,
        effect_table="vehicles_naive",
        why_minimum="no idempotency: every delivery inserts a row",
    ),
    Strategy(
        key="vehicle_idempotent",
        lesson=VEHICLE_REGISTRATION,
        label="conditional insert",
        pattern="conditional insert",
        function="write_vehicle_idempotent",
        minimum_first=Counter(PutItem=1),
        minimum_duplicate=Counter(PutItem=1),
        compared_with="vehicle_naive",
        why_minimum="the insert itself carries attribute_not_exists; a refusal returns the stored row",
    ),
    _checkout(
        key="checkout_naive",
        label="naive",
        function="checkout_naive",
        pattern="no check",
        compared_with=None,
        why_minimum="no idempotency: every delivery charges",
    ),
    _checkout(
        key="checkout_handrolled",
        label="hand-rolled",
        function="checkout_handrolled",
        pattern="check, then record",
        minimum_first=Counter(GetItem=1, PutItem=1),
        minimum_duplicate=Counter(GetItem=1),
        why_minimum="read the key, charge, write the key; a duplicate only reads (and races)",
    ),
    _checkout(
        key="checkout_powertools",
        label="Powertools",
        function="checkout_powertools",
        **POWERTOOLS,
        why_minimum="conditional put INPROGRESS, update to COMPLETED; a duplicate's refused put returns the record",
    ),
    _checkout(
        key="checkout_powertools_cached",
        label="Powertools, local cache",
        function="checkout_powertools_cached",
        **POWERTOOLS,
        why_minimum="as Powertools; the cache can only answer in the environment that stored the result",
    ),
    Strategy(
        key="deletion_claim",
        lesson=ACCOUNT_DELETION,
        label="claim step",
        function="claim_deletion",
        pattern="conditional claim",
        minimum_first=Counter(UpdateItem=1),
        minimum_duplicate=Counter(UpdateItem=1),
        effect=CLAIM,
        why_minimum="one conditional update takes the lease or returns who holds it",
    ),
)

BY_KEY = {strategy.key: strategy for strategy in STRATEGIES}


def new_delivery(strategy: Strategy, outputs: dict) -> Callable[[int], dict]:
    """A fresh request for ``strategy``; call the result with a copy number for its event: every
    copy is the same request (for the claim step, another worker reaching the same deletion)."""
    tag = uuid.uuid4().hex[:12]
    if strategy.lesson == ACCOUNT_DELETION:
        # Written before the counting starts, through lesson 3's own code (a SCHEDULED request).
        request_id = deletion.new_request_item(outputs, user_id=f"bench-user-{tag}")
        return lambda copy: {"deletion_request_id": request_id, "owner": f"bench-worker-{tag}-{copy}"}
    event = {
        VEHICLE_REGISTRATION: {"request_id": f"bench-{tag}", "vin": VALID_VIN, "owner": "Bench Owner"},
        CHECKOUT: {"idempotency_key": f"bench-{tag}", "amount": 1999, "currency": "EUR"},
    }[strategy.lesson]
    return lambda copy: event


# Where a strategy may leave its minimum, and why: (strategy, action, direction) -> reason.
# The bench names the reason only when it counts the deviation.
KNOWN_DEVIATIONS: dict[tuple[str, str, int], str] = {
    ("checkout_handrolled", "PutItem", +1): "race: copies that read 'no record' before the first one recorded each "
    "charged and recorded (one extra PutItem per extra charge)",
    ("checkout_powertools", "GetItem", +1): "the refused put came back without the stored item "
    "(ReturnValuesOnConditionCheckFailure unsupported), so Powertools read it with a GetItem",
    ("checkout_powertools_cached", "GetItem", +1): "the refused put came back without the stored item, so Powertools "
    "read it with a GetItem",
    ("checkout_powertools_cached", "PutItem", -1): "answered from the environment's local cache: a duplicate that "
    "reached the environment holding the finished record made no request (other environments, and in-progress "
    "records, still go to DynamoDB)",
}
