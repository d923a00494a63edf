"""Two effects per event, counted by name: each must happen exactly once.

These pass: two of them assert that a handler is NOT safe, and read the report.
"""

import pytest
from conftest import new_user, signup_effects

from idemlab.testing import Crash, DuplicateEffectError


def test_claimed_signup_pays_one_bonus_and_sends_one_email(idemlab):
    idemlab.assert_exactly_once("signup.claimed", new_user, signup_effects, rounds=20)


def test_naive_signup_is_not_safe(idemlab):
    with pytest.raises(DuplicateEffectError) as failure:
        idemlab.assert_exactly_once("signup.naive", new_user, signup_effects, rounds=5)
    assert failure.value.report.doubled() == [0, 1, 2, 3, 4]  # both effects, twice, in every round
    assert "email: 2 times" in str(failure.value)


def test_claimed_signup_loses_the_email_when_it_dies_after_the_bonus(idemlab):
    # Claimed, bonus paid, then the process dies: the retry finds the claim and skips the email.
    crash = Crash.after("signup.grant_bonus", how="exit")
    with pytest.raises(DuplicateEffectError) as failure:
        idemlab.assert_exactly_once(
            "signup.claimed", new_user, signup_effects, rounds=3, together=False, crash=crash
        )
    assert failure.value.report.lost() == [0, 1, 2]
    assert "bonus: 1 time" in str(failure.value) and "email: 0 times" in str(failure.value)
