"""Is each checkout handler safe when Lambda delivers an event twice?

Two of these tests fail on purpose: they show the two bugs the plugin catches.
"""

import pytest
from conftest import charges_for, new_order

from idemlab.testing import Crash, DuplicateEffectError


def test_powertools_charges_once_when_two_copies_race(idemlab):
    idemlab.assert_exactly_once("checkout.with_powertools", new_order, charges_for, rounds=100, copies=2)


def test_handrolled_charges_once_when_two_copies_race(idemlab):  # fails: check-then-act race
    idemlab.assert_exactly_once("checkout.handrolled", new_order, charges_for, rounds=100, copies=2)


def test_handrolled_charges_once_when_retried_after_a_crash(idemlab):  # fails: charged, then crashed
    crash = Crash.after("checkout.charge", how="exit")  # the first copy dies right after charging
    idemlab.assert_exactly_once("checkout.handrolled", new_order, charges_for, rounds=5, copies=2, together=False, crash=crash)


def test_handrolled_still_double_charges_in_its_kept_schedule(idemlab):
    # explore() named this schedule: the first copy dies right after its 2nd step (the charge's
    # write), then the retry checks, finds no record and charges again. Kept as an id, it
    # reruns exactly that, every time; this test holds the bug in place as a demonstration.
    with pytest.raises(DuplicateEffectError, match="crash-exit-2"):
        idemlab.explore("checkout.handrolled", new_order, charges_for, schedule="crash-exit-2")


def test_powertools_double_charges_when_a_copy_dies_after_charging(idemlab):
    # explore() found what racing copies never show: the first copy dies right after the
    # charge, the retry finds its in-progress record and fails, and the next delivery comes
    # once that record has expired with the dead copy's invocation: it charges again. Passing
    # an idempotency key on to the card processor is the fix; until then, this id reruns it.
    with pytest.raises(DuplicateEffectError, match="crash-exit-2"):
        idemlab.explore("checkout.with_powertools", new_order, charges_for, schedule="crash-exit-2")
