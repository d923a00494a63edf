"""The North-American VIN check digit (49 CFR 565.15, on the ISO 3779 character set).

Each of the 17 characters maps to a number, letters by transliteration; each number is
multiplied by the weight of its position; the sum modulo 11 is the check digit, written
as ``X`` when it is 10, and it must equal the ninth character.
"""

from __future__ import annotations

from .errors import InvalidVinError

LENGTH = 17
CHECK_INDEX = 8  # the ninth character holds the check digit

# I, O and Q are not allowed at all: they look too much like 1 and 0.
TRANSLITERATION = {
    **{str(d): d for d in range(10)},
    "A": 1, "B": 2, "C": 3, "D": 4, "E": 5, "F": 6, "G": 7, "H": 8,
    "J": 1, "K": 2, "L": 3, "M": 4, "N": 5, "P": 7, "R": 9,
    "S": 2, "T": 3, "U": 4, "V": 5, "W": 6, "X": 7, "Y": 8, "Z": 9,
}  # fmt: skip

# Position 9 weighs 0: the check digit does not take part in its own sum.
WEIGHTS = (8, 7, 6, 5, 4, 3, 2, 10, 0, 9, 8, 7, 6, 5, 4, 3, 2)


def check_digit(vin: str) -> str:
    """The check digit that ``vin`` (17 legal characters, any ninth one) should carry."""
    total = sum(TRANSLITERATION[ch] * weight for ch, weight in zip(vin, WEIGHTS, strict=True))
    remainder = total % 11
    return "X" if remainder == 10 else str(remainder)


def normalize_vin(raw: str) -> str:
    """``raw`` upper-cased if it is a valid VIN; otherwise InvalidVinError saying why."""
    vin = raw.upper()
    if len(vin) != LENGTH:
        raise InvalidVinError(f"VIN {raw!r} has {len(vin)} characters; a VIN has {LENGTH}")
    illegal = sorted({ch for ch in vin if ch not in TRANSLITERATION})
    if illegal:
        raise InvalidVinError(
            f"VIN {raw!r} contains {', '.join(map(repr, illegal))}; "
            "only digits and letters other than I, O and Q are allowed"
        )
    expected = check_digit(vin)
    if vin[CHECK_INDEX] != expected:
        raise InvalidVinError(
            f"VIN {raw!r} fails its check digit: position 9 is {vin[CHECK_INDEX]!r}, "
            f"the other characters require {expected!r}"
        )
    return vin
