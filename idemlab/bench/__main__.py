"""python -m idemlab.bench [--quick]: run every benchmark, print the tables, save JSON."""

from __future__ import annotations

import argparse
import json
import platform
import os
from datetime import datetime, timezone

from idemlab import settings
from idemlab.bench import cost_of_idempotency, embedded

RESULTS_DIR = settings.STATE_DIR / "bench"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer samples (for a smoke run)")
    args = parser.parse_args()
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(f"Idempotency Lab benchmarks, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {machine}\n")
    results = {"machine": machine, "taken_at": datetime.now(timezone.utc).isoformat(), "embedded_backend": embedded.run(args.quick)}
    print("Embedded backend against the parts it extends")
    print(embedded.table(results["embedded_backend"]))
    results["idempotency_strategies"] = cost_of_idempotency.run_section(args.quick, RESULTS_DIR)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    out = RESULTS_DIR / "results.json"
    out.write_text(json.dumps(results, indent=2))
    print(f"\nsaved {out.relative_to(settings.ROOT)}")


if __name__ == "__main__":
    main()
