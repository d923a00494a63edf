"""Names of the tables, from the environment Terraform sets."""

from __future__ import annotations

import os


def table(key: str) -> str:
    """The table name for a design key, e.g. ``table("stock")`` reads STOCK_TABLE."""
    variable = f"{key.upper()}_TABLE"
    name = os.environ.get(variable)
    if not name:
        raise RuntimeError(f"{variable} is not set; the function's configuration is incomplete")
    return name
