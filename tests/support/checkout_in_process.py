"""The checkout handlers run in this process (tests only): moved here from
``idemlab.lessons.checkout``, which holds what the lesson and its notebook use."""

from __future__ import annotations

import time

from idemlab import lambda_code, module_spec
from idemlab.lessons.checkout import FUNCTION_DIR, FUNCTION_KEYS, function_key


def environment(tables: dict[str, str], card_processor: str) -> dict[str, str]:
    """The variables Terraform gives the three checkouts (functions.tf), for these names."""
    variables: dict[str, str] = {}
    for key in FUNCTION_KEYS:
        variables.update(module_spec.environment(key, tables, {"card_processor": card_processor}))
    return variables


class InvocationContext:
    """The part of the Lambda context the handlers read: the time they have left."""

    def __init__(self, timeout_seconds: float):
        self._deadline = time.time() + timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.time()) * 1000))


def import_handler(name: str):
    """A handler module of functions/checkout. Call after ``environment(...)`` is in
    ``os.environ``: like a Lambda cold start, a module reads its configuration when loaded."""
    return lambda_code.load(FUNCTION_DIR, name)


def invoke_in_process(strategy: str, request: dict, timeout_seconds: float = 6) -> dict:
    return import_handler(function_key(strategy)).handler(request, InvocationContext(timeout_seconds))
