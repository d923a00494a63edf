"""python -m idemlab.bench [--quick] [--backend aws]: run every benchmark, print the tables, save JSON."""

from __future__ import annotations

import argparse
import json
import os
import platform
from datetime import datetime, timezone

from idemlab import settings
from idemlab.bench import cost_of_idempotency, embedded

RESULTS_DIR = settings.STATE_DIR / "bench"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer samples (for a smoke run)")
    parser.add_argument(
        "--backend",
        default=os.environ.get("BACKEND") or "embedded",
        help="aws: the same tables on real DynamoDB and Lambda (needs `make deploy BACKEND=aws`; costs cents); "
        "anything else: on embedded backends the bench starts itself",
    )
    args = parser.parse_args()
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(f"Idempotency Lab benchmarks, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {machine}")
    print(f"machine load (1/5/15 min) at start: {_load()}\n")
    results = {"machine": machine, "taken_at": datetime.now(timezone.utc).isoformat(), "load_at_start": _load()}
    if args.backend == "aws":
        results |= {"backend": "aws", "aws_dynamodb": embedded.aws_dynamodb(args.quick)}
        print(embedded.aws_table(results["aws_dynamodb"]))
        results["idempotency_strategies"] = cost_of_idempotency.run_aws_section(args.quick)
    else:
        results["embedded_backend"] = embedded.run(args.quick)
        print("Embedded backend against plain moto, fast path off and on")
        print(embedded.table(results["embedded_backend"]))
        results["idempotency_strategies"] = cost_of_idempotency.run_section(args.quick, RESULTS_DIR)
    results["load_at_end"] = _load()
    print(f"\nmachine load (1/5/15 min) at end: {_load()}")
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    out = RESULTS_DIR / ("results-aws.json" if args.backend == "aws" else "results.json")
    out.write_text(json.dumps(results, indent=2))
    print(f"\nsaved {out.relative_to(settings.ROOT)}")


def _load() -> str:
    """The load average: the numbers are only as quiet as the machine was."""
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


if __name__ == "__main__":
    main()
