"""Checks of the fields a caller sends; a bad value is refused before anything is written."""

from __future__ import annotations

import re

from erasure.errors import InvalidDeletionInputError

# Ids travel into schedule and execution names (letters, digits, - _ .; at most 64 and
# 80 characters), so they are held to that alphabet and a length that leaves room for
# the prefixes and suffixes those names add.
_ID = re.compile(r"[A-Za-z0-9._-]+")  # matched in full: "$" would let a trailing newline through
ID_MAX = 40
EXECUTION_NAME_MAX = 80  # Step Functions' limit; a claim's owner is an execution name


def event_object(event) -> dict:
    if not isinstance(event, dict):
        raise InvalidDeletionInputError(f"the event must be a JSON object, not {type(event).__name__}")
    return event


def identifier(event: dict, field: str, max_length: int = ID_MAX) -> str:
    value = event_object(event).get(field)
    if not isinstance(value, str) or not _ID.fullmatch(value) or len(value) > max_length:
        raise InvalidDeletionInputError(
            f"{field} must be 1-{max_length} letters, digits, '.', '_' or '-', not {value!r}"
        )
    return value


def flag(event: dict, field: str) -> bool:
    value = event.get(field, False)
    if not isinstance(value, bool):
        raise InvalidDeletionInputError(f"{field} must be true or false, not {value!r}")
    return value


def whole_seconds(event: dict, field: str, default: int, maximum: int) -> int:
    value = event.get(field, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise InvalidDeletionInputError(f"{field} must be a whole number of seconds from 0 to {maximum}, not {value!r}")
    return value
