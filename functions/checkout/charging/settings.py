"""Names of the tables and functions, from the environment Terraform sets.

Each table a function uses comes as ``<KEY>_TABLE``, each function it calls as
``<KEY>_FUNCTION``; one that is missing is a deployment error, and is named as one.
"""

from __future__ import annotations

import os


def table(key: str) -> str:
    """The table name for a design key, e.g. ``table("ledger")`` reads LEDGER_TABLE."""
    return _name(f"{key.upper()}_TABLE")


def function(key: str) -> str:
    """The function name for a design key, e.g. ``function("card_processor")`` reads CARD_PROCESSOR_FUNCTION."""
    return _name(f"{key.upper()}_FUNCTION")


def _name(variable: str) -> str:
    if name := os.environ.get(variable):
        return name
    raise RuntimeError(f"{variable} is not set; the function's configuration is incomplete")
