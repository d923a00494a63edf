"""python -m idemlab.bench [--quick] [--backend aws]: run every benchmark, print the tables, save JSON."""

from __future__ import annotations

import argparse
import json
import os
import platform
from datetime import UTC, datetime

from idemlab import settings, stack
from idemlab.bench import cost_of_idempotency, embedded, strategy_report

RESULTS_DIR = settings.STATE_DIR / "bench"


def options(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer samples (for a smoke run)")
    backend_help = "aws: the same tables on real DynamoDB and Lambda (needs `make deploy BACKEND=aws`; costs cents); "
    backend_help += "anything else: on embedded backends the bench starts itself"
    parser.add_argument("--backend", default=os.environ.get("BACKEND") or "embedded", help=backend_help)
    args = parser.parse_args(argv)
    if args.backend == "aws":
        os.environ["BACKEND"] = "aws"  # every client of the run (idemlab.clients) goes to AWS, not a local port
    return args


def main() -> None:
    args = options()
    aws, sizes = args.backend == "aws", cost_of_idempotency.QUICK if args.quick else cost_of_idempotency.FULL
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(f"Idempotency Lab benchmarks, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {machine}")
    print(f"machine load (1/5/15 min) at start: {_load()}\n")
    results = {"machine": machine, "taken_at": datetime.now(UTC).isoformat(), "load_at_start": _load()}
    strategies: dict = {"sizes": sizes}
    if aws:
        results |= {"backend": "aws", "aws_dynamodb": embedded.aws_dynamodb(args.quick)}
        print(embedded.aws_table(results["aws_dynamodb"]))
        # The stack `make deploy BACKEND=aws` made, measured as on the embedded backend but
        # uncounted: AWS has no per-action request counter that answers within a sample
        # (CloudWatch's consumed-capacity metrics arrive minutes later, per table), so the
        # request counts stay the embedded run's: they come from the handlers' code, the same everywhere.
        bench = cost_of_idempotency.StrategyBench(stack.outputs(backend="aws"), endpoint_url=None)
        strategies["report"] = result = strategy_report.report(cost_of_idempotency.run(bench, **sizes))
    else:
        results["embedded_backend"] = embedded.run(args.quick)
        print("Embedded backend against plain moto, fast path off and on")
        print(embedded.table(results["embedded_backend"]))
        strategies["measured"] = cost_of_idempotency.measure_on_own_backend(**sizes)
        strategies["report"] = result = strategy_report.report(strategies["measured"])
        chart = strategy_report.chart(result, RESULTS_DIR / "cost_of_idempotency.png").relative_to(settings.ROOT)
        strategies["chart"] = str(chart)
        print(f"\nThe cost of idempotency: DynamoDB requests per delivery, counted at the backend ({sizes})")
        print(strategy_report.requests_table(result))
    where = "on AWS (Invoke round trip from this machine)" if aws else "(Invoke round trip)"
    print(f"\nLatency of the handler invocation {where} and throughput, against naive ({sizes})")
    print(strategy_report.latency_table(result))
    if not aws:
        print(f"\n{strategy_report.notes(result)}\nchart: {chart}")
    results |= {"idempotency_strategies": strategies, "load_at_end": _load()}
    print(f"\nmachine load (1/5/15 min) at end: {results['load_at_end']}")
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    out = RESULTS_DIR / ("results-aws.json" if aws else "results.json")
    out.write_text(json.dumps(results, indent=2))
    print(f"\nsaved {out.relative_to(settings.ROOT)}")


def _load() -> str:
    """The load average: the numbers are only as quiet as the machine was."""
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
