"""Names of the tables and functions, from the environment Terraform sets."""

from __future__ import annotations

import os


def table(key: str) -> str:
    """The table name for a design key, e.g. ``table("ledger")`` reads LEDGER_TABLE."""
    return required(f"{key.upper()}_TABLE")


def required(variable: str) -> str:
    value = os.environ.get(variable)
    if not value:
        raise RuntimeError(f"{variable} is not set; the function's configuration is incomplete")
    return value


def optional(variable: str) -> str | None:
    return os.environ.get(variable) or None
