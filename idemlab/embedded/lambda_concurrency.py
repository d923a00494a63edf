"""Lambda's concurrency limits: a request past them is throttled, never run.

Lambda counts the invocations in flight per account and Region. A function with reserved
concurrency (PutFunctionConcurrency) runs at most that many at once; the others share what
is left of the account's limit. Past either, Invoke answers HTTP 429 TooManyRequestsException,
message "Rate Exceeded.", Type "User", with the Reason below (Invoke API reference, and what AWS
answered in the recordings of LocalStack's tests/aws/services/lambda_/test_lambda.py, v4.14.0).
Each invocation in flight is a process here, so the account limit also bounds the processes.
"""

from __future__ import annotations

import threading
from collections import Counter
from contextlib import contextmanager

# Lesson code runs at most 16 identical checkout requests at once (notebook 05's full
# benchmark), and each calls the card processor function synchronously while it runs:
# 32 invocations in flight. 40 leaves room for the sweeper and async retries besides,
# and bounds the busy workers (one Python process each: 48 MB resident with boto3 and a
# client loaded, measured with Python 3.11) to about 2 GB. AWS's own default is 1,000;
# a new account's can be much lower.
DEFAULT_CONCURRENT_EXECUTIONS = 40
LIMIT_VARIABLE = "LAMBDA_LIMITS_CONCURRENT_EXECUTIONS"  # LocalStack's knob: one setting for both emulators


class Throttled(Exception):
    """Past a concurrency limit: Lambda refuses the invocation before running it. Its argument is the Reason."""


class ConcurrencyLimit:
    """Invocations in flight: by function ARN for a function with reserved concurrency, else
    by account and Region, where the functions share the limit less what the others reserve."""

    def __init__(self, limit: int = DEFAULT_CONCURRENT_EXECUTIONS):
        self.limit = limit
        self._lock = threading.Lock()
        self._running: Counter = Counter()

    def unreserved(self, functions) -> int:
        """The limit less the concurrency reserved by `functions` (moto's, of one account and Region)."""
        return max(0, self.limit - sum(int(fn.reserved_concurrency or 0) for fn in functions))

    @contextmanager
    def lease(self, fn, functions):
        """Hold one unit of concurrency for moto function `fn` while the body runs, or raise Throttled."""
        if fn.reserved_concurrency is None:
            scope, limit = (fn.account_id, fn.region), self.unreserved(functions)
            reason = "ConcurrentInvocationLimitExceeded"
        else:  # PutFunctionConcurrency; 0 stops the function
            scope, limit = fn.function_arn, int(fn.reserved_concurrency)
            reason = "ReservedFunctionConcurrentInvocationLimitExceeded"
        with self._lock:
            if self._running[scope] >= limit:
                raise Throttled(reason)
            self._running[scope] += 1
        try:
            yield
        finally:
            with self._lock:
                self._running[scope] -= 1
