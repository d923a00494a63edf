"""Lambda's concurrency limits: how many invocations may run at once.

Lambda counts the invocations in flight per account and Region. A function with reserved
concurrency (PutFunctionConcurrency) runs at most that many at once; the others share
what is left of the account's limit. Past either, Invoke answers HTTP 429
TooManyRequestsException, message "Rate Exceeded.", Type "User", with the Reason below
(Invoke API reference, and what AWS answered in the recordings of LocalStack's
tests/aws/services/lambda_/test_lambda.py, v4.14.0), before running anything. Each
invocation in flight is a process here, so the account limit also bounds the processes.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from moto.awslambda.models import LambdaFunction, lambda_backends

# The Reason field of the 429 answer, one per limit.
ACCOUNT_LIMIT_REASON = "ConcurrentInvocationLimitExceeded"
RESERVED_LIMIT_REASON = "ReservedFunctionConcurrentInvocationLimitExceeded"


class Throttled(Exception):
    """Past a concurrency limit: Lambda refuses the invocation before running it. Its argument is the Reason."""


class ConcurrencyLimits:
    """The invocations in flight, by function ARN for a function with reserved concurrency,
    else by account and Region; shared by every request thread."""

    def __init__(self, limit: int):
        self.limit = limit  # the account's concurrent executions (LAMBDA_LIMITS_CONCURRENT_EXECUTIONS)
        self._lock = threading.Lock()
        self._running: Counter = Counter()  # scope -> invocations in flight

    def unreserved(self, functions) -> int:
        """The limit less the concurrency reserved by `functions` (moto's, of one account and Region)."""
        return max(0, self.limit - sum(int(fn.reserved_concurrency or 0) for fn in functions))

    @contextmanager
    def slot(self, fn: LambdaFunction) -> Iterator[None]:
        """Hold one place of `fn`'s limit while the body runs; raises Throttled when none is free."""
        if fn.reserved_concurrency is None:
            functions = lambda_backends[fn.account_id][fn.region].list_functions()
            scope = (fn.account_id, fn.region)
            limit = self.unreserved(functions)
            reason = ACCOUNT_LIMIT_REASON
        else:  # PutFunctionConcurrency; 0 stops the function
            scope = fn.function_arn
            limit = int(fn.reserved_concurrency)
            reason = RESERVED_LIMIT_REASON
        with self._lock:
            if self._running[scope] >= limit:
                raise Throttled(reason)
            self._running[scope] += 1
        try:
            yield
        finally:
            with self._lock:
                self._running[scope] -= 1
