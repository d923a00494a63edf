"""The VIN rule of the RMV check: the North-American check digit at position 9."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from idemlab.lessons.vehicles import import_function_module

# A loaded 2-core CI machine can pause one example past Hypothesis' 200 ms default.
no_deadline = settings(deadline=None)

vin = import_function_module("registration.vin")
errors = import_function_module("registration.errors")

# Published examples with their check digits (X stands for 10).
KNOWN_VALID = [
    "1M8GDM9AXKP042788",
    "11111111111111111",
    "1HGCM82633A004352",
    "JH4KA7561PC008269",
]
KNOWN_INVALID = {
    "1M8GDM9A1KP042788": "check digit",  # X replaced by 1
    "1HGCM82643A004352": "check digit",
    "5YJSA1E14HF000337": "check digit",
    "1M8GDM9AXKP04278": "16 characters",
    "1M8GDM9AXKP0427881": "18 characters",
    "1M8GDM9AXKP04278O": "'O'",
    "IM8GDM9AXKP042788": "'I'",
    "1M8GDM9AXKP0427-8": "'-'",
    "": "0 characters",
}

LEGAL = sorted(vin.TRANSLITERATION)
body = st.lists(st.sampled_from(LEGAL), min_size=16, max_size=16).map("".join)


def with_check_digit(sixteen: str) -> str:
    candidate = sixteen[:8] + "0" + sixteen[8:]
    return candidate[:8] + vin.check_digit(candidate) + candidate[9:]


@pytest.mark.parametrize("known", KNOWN_VALID)
def test_published_vins_pass(known):
    assert vin.normalize_vin(known) == known


@pytest.mark.parametrize("bad, reason", KNOWN_INVALID.items())
def test_invalid_vins_are_refused_with_the_reason(bad, reason):
    with pytest.raises(errors.InvalidVinError, match=reason):
        vin.normalize_vin(bad)


def test_lower_case_is_accepted_and_upper_cased():
    assert vin.normalize_vin("1m8gdm9axkp042788") == "1M8GDM9AXKP042788"


@no_deadline
@given(body)
def test_a_vin_carrying_its_computed_check_digit_passes(sixteen):
    assert vin.normalize_vin(with_check_digit(sixteen)) == with_check_digit(sixteen)


@no_deadline
@given(body, st.sampled_from("0123456789X"))
def test_any_other_check_digit_fails(sixteen, digit):
    good = with_check_digit(sixteen)
    tampered = good[:8] + digit + good[9:]
    if digit == good[8]:
        assert vin.normalize_vin(tampered) == good
    else:
        with pytest.raises(errors.InvalidVinError, match="check digit"):
            vin.normalize_vin(tampered)


@no_deadline
@given(body, st.integers(0, 16).filter(lambda i: i != vin.CHECK_INDEX), st.sampled_from(LEGAL))
def test_every_single_character_typo_is_caught(sixteen, position, replacement):
    # 11 is prime and no weight is a multiple of it, so changing one character's value
    # always changes the sum modulo 11.
    good = with_check_digit(sixteen)
    typo = good[:position] + replacement + good[position + 1 :]
    if vin.TRANSLITERATION[replacement] == vin.TRANSLITERATION[good[position]]:
        assert vin.normalize_vin(typo) == typo  # same value (e.g. A and J): not a detectable typo
    else:
        with pytest.raises(errors.InvalidVinError, match="check digit"):
            vin.normalize_vin(typo)
