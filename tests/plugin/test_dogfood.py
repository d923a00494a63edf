"""The lab's own checkout handlers, tested the way a learner would test theirs: through
the take-home plugin (idemlab.testing), in Lambda worker processes, without the stack.

Compare tests/lessons/checkout/test_stack.py, which needs the whole Terraform stack for the
same claims.
"""

from __future__ import annotations

import pytest

from idemlab.lessons import checkout as checkout_lesson
from idemlab.testing import Crash, DuplicateEffectError
from support.checkout_plugin import checkout, deploy_ledger

ROUNDS = 20
RACE_WINDOW_MS = 20  # the hand-rolled check-to-charge pause (the request's own field)


@pytest.fixture
def ledger(idemlab):
    return deploy_ledger(idemlab, "dogfood")


def order(round_number: int, **options) -> dict:
    return checkout_lesson.order(f"dogfood-{round_number}", check_act_delay_ms=RACE_WINDOW_MS, **options)


@pytest.mark.race
def test_handrolled_checkout_double_charges_when_copies_race(idemlab, ledger):
    with pytest.raises(DuplicateEffectError) as failure:
        idemlab.assert_exactly_once(
            checkout("handrolled"), order, lambda o: ledger.count(o["idempotency_key"]), rounds=ROUNDS
        )
    doubled = failure.value.report.doubled()
    assert len(doubled) >= 0.9 * ROUNDS, f"raced in {len(doubled)} of {ROUNDS} rounds"


@pytest.mark.race
def test_powertools_checkout_charges_once_when_copies_race(idemlab, ledger):
    idemlab.assert_exactly_once(
        checkout("powertools"), order, lambda o: ledger.count(o["idempotency_key"]), rounds=ROUNDS
    )


@pytest.mark.parametrize("downstream, expected", [(False, 2), (True, 1)])
def test_powertools_retry_after_a_timeout_in_the_charge_charges_again_unless_the_key_goes_downstream(
    idemlab, ledger, downstream, expected
):
    # The first copy charges, then times out before Powertools records the result. Its
    # in-progress record expires with the invocation, so the retry charges again, unless
    # the card processor got the idempotency key and answers with the first charge.
    crash = Crash.after("charging.processor.charge", how="timeout")
    request = checkout_lesson.order("dogfood-timeout", pass_key_downstream=downstream)
    # The retry starts a new environment (the first one was stopped at its timeout): 6 s
    # leave room for a cold start with Powertools on a busy machine (2 s ran out once).
    delivery = idemlab.deliver(checkout("powertools"), request, copies=2, together=False, crash=crash, timeout=6)
    assert [copy.error_type for copy in delivery.copies] == ["Sandbox.Timedout", None]
    assert ledger.count(request["idempotency_key"]) == expected
