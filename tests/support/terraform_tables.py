"""The keys of the module's tables, read from the Terraform (python-hcl2), for the tests that
make private copies of a scenario's tables: only tests need them, so they live here."""

from __future__ import annotations

from idemlab import lambda_code


def table_keys(*function_keys: str) -> dict[str, str]:
    """The hash key (``tables.tf``) of each table these functions name in ``functions.tf``:
    string-keyed tables without a sort key only."""
    tables = lambda_code.module_default("tables.tf", "tables")
    names = sorted({table for key in function_keys for table in lambda_code.spec(key).get("tables", {})})
    if unknown := [name for name in names if name not in tables]:
        raise KeyError(f"no table {', '.join(unknown)} in tables.tf")
    if composite := [name for name in names if "range_key" in tables[name] or "types" in tables[name]]:
        raise ValueError(f"{', '.join(composite)} has a sort key or typed attributes: read its whole entry")
    return {name: tables[name]["hash_key"] for name in names}
