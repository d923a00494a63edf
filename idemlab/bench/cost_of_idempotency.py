"""The cost of idempotency on an embedded backend started for it: `make bench`'s section
(``measure_on_own_backend``) and notebook 05's short version (``short_run``).

The stack is deployed to a fresh embedded backend, every strategy measured, and the
backend stopped, whatever backend the learner uses: the requests are counted by action
where they are served, and only the embedded backend has such a counter. The learner's
own backend is never called.
"""

from __future__ import annotations

from pathlib import Path

from idemlab import settings, stack
from idemlab.bench import strategy_report, strategy_runs
from idemlab.embedded.server import EmbeddedBackend
from idemlab.testing.lab import aws_environment

# Samples per strategy and delivery, copies released together, rounds of them. The full
# run gives p99 from 40 invocations per cell (nearest rank: the slowest) and fits, with
# the deploy and the backend section, in the 5 minutes `make bench` may take on 2 cores.
# Eight rounds of copies: the fewest for which the throughput ratio gets an interval.
FULL = {"samples": 40, "copies": 16, "rounds": 8}
QUICK = {"samples": 8, "copies": 4, "rounds": 2}
# The notebook's version: enough to show every count, short enough for a 60 s CI budget
# (plus the deploy to its own backend).
SHORT = {"samples": 2, "copies": 2, "rounds": 1}


def measure_on_own_backend(samples: int, copies: int, rounds: int, prefix: str = "bench") -> dict:
    """Start an embedded backend on a free port, deploy the stack to it, measure, stop it."""
    with EmbeddedBackend() as backend:
        # The harness (and Terraform) point at this backend for the duration, then at the learner's again.
        pointed = {"AWS_ENDPOINT_URL": backend.url, "BACKEND": "embedded", "LAB_PORT": str(backend.port)}
        credentials = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
        with aws_environment(pointed | credentials | {"AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}):
            try:
                outputs = stack.deploy(prefix=prefix)
                return strategy_runs.run(strategy_runs.StrategyBench(outputs, backend.url), samples, copies, rounds)
            finally:
                stack.forget(prefix)  # the working copy and outputs die with the backend


def short_run(chart_path: Path = settings.STATE_DIR / "bench" / "cost_of_idempotency_notebook.png") -> dict:
    """The notebook's live version: the report, with the chart's path under "chart"."""
    # Its own prefix, not "bench": `make bench` may run at the same time.
    result = strategy_report.report(measure_on_own_backend(**SHORT, prefix="cost-notebook"))
    result["chart"] = str(strategy_report.chart(result, chart_path))
    return result
