"""python -m idemlab.bench [--quick | --full] [--strategies] [--no-localstack] [--backend aws]:
measure, print the tables, save JSON.

By default: plain moto, the embedded backend and native LocalStack (where this machine can
run it) side by side, in a few minutes. --strategies adds the cost of idempotency (it deploys
a whole stack first); --full is the long run: twenty rounds, the fast path off beside on,
and the strategies.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from datetime import datetime, timezone

from idemlab import settings, stack
from idemlab.bench import cost_of_idempotency, embedded, strategy_report

RESULTS_DIR = settings.STATE_DIR / "bench"


def options(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer samples (for a smoke run)")
    parser.add_argument(
        "--full",
        action="store_true",
        help="the long run: 20 rounds of 160 calls, the fast path off beside on, and --strategies",
    )
    parser.add_argument(
        "--strategies",
        action="store_true",
        help="also the cost of idempotency per strategy (deploys a whole stack to its own backend first)",
    )
    parser.add_argument(
        "--no-localstack",
        dest="localstack",
        action="store_false",
        help="no LocalStack column (otherwise started natively where this machine can run it)",
    )
    backend_help = "aws: the same tables on real DynamoDB and Lambda (needs `make deploy BACKEND=aws`; costs cents); "
    backend_help += "anything else: on embedded backends the bench starts itself"
    parser.add_argument("--backend", default=os.environ.get("BACKEND") or "embedded", help=backend_help)
    args = parser.parse_args(argv)
    if args.backend == "aws":
        os.environ["BACKEND"] = "aws"  # every client of the run (idemlab.clients) goes to AWS, not a local port
    return args


def main() -> None:
    started = time.monotonic()
    args = options()
    aws, sizes = args.backend == "aws", cost_of_idempotency.QUICK if args.quick else cost_of_idempotency.FULL
    with_strategies = aws or args.full or args.strategies
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(f"Idempotency Lab benchmarks, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {machine}")
    print(f"machine load (1/5/15 min) at start: {_load()}\n")
    results = {"machine": machine, "taken_at": datetime.now(timezone.utc).isoformat(), "load_at_start": _load()}
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
        backend_sizes = embedded.QUICK if args.quick else embedded.FULL if args.full else embedded.DEFAULT
        peer_started = time.monotonic()
        with embedded.localstack_peer(args.localstack) as (localstack, absent):
            results["localstack_start_seconds"] = round(time.monotonic() - peer_started, 1)
            results["embedded_backend"] = embedded.run(backend_sizes, fast_path_off=args.full, localstack=localstack)
        results["localstack_absent_because"] = absent
        if localstack:
            print(
                f"(LocalStack started through the harness in {results['localstack_start_seconds']:.0f} s, "
                "not counted in its rates)"
            )
        print(
            "The embedded backend against plain moto"
            + (", fast path off and on" if args.full else "")
            + (f", and {embedded.LOCALSTACK}" if localstack else "")
        )
        if absent:
            print(f"No LocalStack column: {absent}.")
        print(embedded.table(results["embedded_backend"]))
    if not with_strategies:
        print(
            "\nThe cost of idempotency per strategy: `make bench BENCH=--strategies` (deploys a stack first; minutes)."
        )
        _finish(results, aws, started)
        return
    if not aws:
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
    results["idempotency_strategies"] = strategies
    _finish(results, aws, started)


def _finish(results: dict, aws: bool, started: float) -> None:
    results |= {"load_at_end": _load(), "total_seconds": round(time.monotonic() - started, 1)}
    print(f"\nmachine load (1/5/15 min) at end: {results['load_at_end']}")
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    out = RESULTS_DIR / ("results-aws.json" if aws else "results.json")
    out.write_text(json.dumps(results, indent=2))
    print(f"\nsaved {out.relative_to(settings.ROOT)}")
    print(f"bench total: {results['total_seconds']:.0f} s")


def _load() -> str:
    """The load average: the numbers are only as quiet as the machine was."""
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
