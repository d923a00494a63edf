"""The checkout handlers run in this process (tests only): moved here from
``idemlab.lessons.checkout``, which holds what the lesson and its notebook use."""

from __future__ import annotations

from idemlab import lambda_code, module_spec
from idemlab.lessons.checkout import FUNCTION_DIR, FUNCTION_KEYS, function_key
from support import invocation
from support.invocation import InvocationContext

__all__ = ["InvocationContext", "environment", "import_handler", "invoke_in_process"]


def environment(tables: dict[str, str], card_processor: str) -> dict[str, str]:
    """The variables Terraform gives the three checkouts (functions.tf), for these names."""
    variables: dict[str, str] = {}
    for key in FUNCTION_KEYS:
        variables.update(module_spec.environment(key, tables, {"card_processor": card_processor}))
    return variables


def import_handler(name: str):
    """A handler module of functions/checkout. Call after ``environment(...)`` is in
    ``os.environ``: like a Lambda cold start, a module reads its configuration when loaded."""
    return lambda_code.load(FUNCTION_DIR, name)


def invoke_in_process(strategy: str, request: dict, timeout_seconds: float = 6) -> dict:
    return invocation.invoke(import_handler(function_key(strategy)).handler, request, timeout_seconds)
