"""The bench's "cost of idempotency" section, and its short version for notebook 05.

`make bench` calls ``run_section``: a fresh embedded backend of its own, the whole stack
deployed to it once (prefix "bench"), every strategy measured, the tables printed and
the chart saved. The notebook calls ``short_run``, which does the same with fewer
samples, whatever backend the notebook is connected to: the requests are counted by
action where they are served, and only the embedded backend has such a counter. The
learner's own backend is never called.
"""

from __future__ import annotations

from pathlib import Path

from idemlab import settings, stack
from idemlab.bench import strategy_report, strategy_runs
from idemlab.embedded.server import EmbeddedBackend
from idemlab.testing.lab import aws_environment

PREFIX = "bench"
NOTEBOOK_PREFIX = "cost-notebook"  # not "bench": `make bench` may run at the same time
CHART_NAME = "cost_of_idempotency.png"
NOTEBOOK_CHART = settings.STATE_DIR / "bench" / "cost_of_idempotency_notebook.png"
# Samples per strategy and delivery, copies released together, rounds of them. The full
# run gives p99 from 40 invocations per cell (nearest rank: the second slowest) and fits,
# with the deploy and the backend section, in the 5 minutes `make bench` may take on 2 cores.
# Eight rounds of copies: the fewest for which the throughput ratio gets an interval.
FULL = {"samples": 40, "copies": 16, "rounds": 8}
QUICK = {"samples": 8, "copies": 4, "rounds": 2}
# The notebook's version: enough to show every count, short enough for a 60 s CI budget
# (plus the deploy to its own backend).
SHORT = {"samples": 2, "copies": 2, "rounds": 1}
# The notebook's backend also runs the lessons' leftovers (retried events, the sweeper
# restarting stuck deletions): a sample needs this long of quiet on either side.
SHARED_BACKEND_GUARD_SECONDS = 0.2


def measure_on_own_backend(samples: int, copies: int, rounds: int, prefix: str = PREFIX) -> dict:
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


def run_section(quick: bool, results_dir: Path) -> dict:
    """Measure, print the tables, save the chart; the section of results.json."""
    sizes = QUICK if quick else FULL
    measured = measure_on_own_backend(**sizes)
    result = strategy_report.report(measured)
    chart = strategy_report.chart(result, results_dir / CHART_NAME)
    print(f"\nThe cost of idempotency: DynamoDB requests per delivery, counted at the backend ({sizes})")
    print(strategy_report.requests_table(result))
    print("\nLatency of the handler invocation (Invoke round trip) and throughput, against naive")
    print(strategy_report.latency_table(result))
    print("\n" + strategy_report.notes(result))
    print(f"chart: {chart.relative_to(settings.ROOT)}")
    return {"sizes": sizes, "measured": measured, "report": result, "chart": str(chart.relative_to(settings.ROOT))}


def run_aws_section(quick: bool, prefix: str = "lab") -> dict:
    """`make bench BACKEND=aws`: latency and throughput of every strategy on the stack
    deployed to AWS (`make deploy BACKEND=aws`), interleaved as on the embedded backend.

    AWS has no per-action request counter that answers within a sample (CloudWatch's
    consumed-capacity metrics arrive minutes later, per table), so the request counts
    stay the embedded run's: they come from the handlers' code, the same on every backend.
    """
    sizes = QUICK if quick else FULL
    outputs = stack.outputs(prefix=prefix, backend="aws")
    bench = strategy_runs.StrategyBench(outputs, endpoint_url=None, counting=False)
    result = strategy_report.report(strategy_runs.run(bench, **sizes))
    print(f"\nLatency of the handler invocation on AWS (Invoke round trip from this machine) and throughput, against naive ({sizes})")
    print(strategy_report.latency_table(result))
    return {"sizes": sizes, "report": result}


def short_run(chart_path: Path = NOTEBOOK_CHART) -> dict:
    """The notebook's live version, on an embedded backend of its own (started and stopped here)."""
    result = strategy_report.report(measure_on_own_backend(**SHORT, prefix=NOTEBOOK_PREFIX))
    result["chart"] = str(strategy_report.chart(result, chart_path))
    return result
