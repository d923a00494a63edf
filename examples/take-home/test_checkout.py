"""Is each checkout handler safe when Lambda delivers an event twice?

Two of these tests fail on purpose: they show the two bugs the plugin catches.
"""

from conftest import charges_for, new_order

from idemlab.testing import Crash


def test_powertools_charges_once_when_two_copies_race(idemlab):
    idemlab.assert_exactly_once("checkout.with_powertools", new_order, charges_for, rounds=100, copies=2)


def test_handrolled_charges_once_when_two_copies_race(idemlab):  # fails: check-then-act race
    idemlab.assert_exactly_once("checkout.handrolled", new_order, charges_for, rounds=100, copies=2)


def test_handrolled_charges_once_when_retried_after_a_crash(idemlab):  # fails: charged, then crashed
    crash = Crash.after("checkout.charge", how="exit")  # the first copy dies right after charging
    idemlab.assert_exactly_once("checkout.handrolled", new_order, charges_for, rounds=5, copies=2, together=False, crash=crash)
