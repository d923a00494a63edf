"""Names from the environment Terraform sets, read at call time, not import time.

Each table a function uses comes as ``<KEY>_TABLE``, each function it calls as
``<KEY>_FUNCTION`` (``docs/DESIGN.md``, "Function environment variables"); one that is
missing is a deployment error, and is named as one.
"""

from __future__ import annotations

import os


class ConfigurationError(RuntimeError):
    """The function was deployed without an environment variable it needs."""


def table(key: str) -> str:
    """The table name for a design key: ``table("ledger")`` reads LEDGER_TABLE."""
    return required(f"{key.upper()}_TABLE")


def function(key: str) -> str:
    """The function name for a design key: ``function("card_processor")`` reads CARD_PROCESSOR_FUNCTION."""
    return required(f"{key.upper()}_FUNCTION")


def required(variable: str) -> str:
    """The variable's value; ConfigurationError when it is unset or empty."""
    value = os.environ.get(variable)
    if not value:
        raise ConfigurationError(f"{variable} is not set; the function's configuration is incomplete")
    return value


def optional(variable: str) -> str | None:
    """The variable's value, or None when it is unset or empty."""
    return os.environ.get(variable) or None
