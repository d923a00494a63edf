"""The cost of idempotency: each strategy's handler run on a deployed stack, and what it costs.

`make bench` (``measure_on_own_backend``) and notebook 05 (``short_run``) deploy the stack to
an embedded backend started for them, never the learner's: only the embedded backend
counts requests where they are served. `make bench BACKEND=aws` runs the same uncounted.

Every measured thing runs alone: the backend's DynamoDB request counter is read before and
after it, so the difference is its requests, by table and action (strategy_report.py sorts
them by purpose). Latency is the Invoke round trip seen by the caller (HTTP, the execution
environment, and for a checkout the nested call to the card processor).

Three shapes of delivery: first, duplicate (after the first answered) and concurrent
(``copies`` identical invocations released together on warm environments: a first delivery
and ``copies - 1`` duplicates racing it). Every strategy's environments are started first
(cold starts recorded apart), then each round samples every strategy in a rotating order,
never one strategy's block, so the report's intervals resample whole rounds (intervals.py).
"""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from idemlab import progress, settings, stack
from idemlab.barrier import all_at_once
from idemlab.bench import strategy_report
from idemlab.bench.intervals import percentiles, round_order
from idemlab.bench.strategies import CHARGE, DELIVERIES, ROW, STRATEGIES, Strategy, new_delivery
from idemlab.clients import client
from idemlab.embedded.server import EmbeddedBackend, request_counts
from idemlab.lessons.checkout import Ledger
from idemlab.testing.lab import LOCAL_VARIABLES, aws_environment

# Samples per strategy and delivery, copies released together, rounds of them. The full
# run gives p99 from 40 invocations per cell (nearest rank: the slowest) and fits, with
# the deploy and the backend section, in the 5 minutes `make bench` may take on 2 cores.
# Eight rounds of copies: the fewest for which the throughput ratio gets an interval.
FULL = {"samples": 40, "copies": 16, "rounds": 8}
QUICK = {"samples": 8, "copies": 4, "rounds": 2}
# The notebook's version: enough to show every count, short enough for a 60 s CI budget
# (plus the deploy to its own backend).
SHORT = {"samples": 2, "copies": 2, "rounds": 1}

# Requests a measured handler can make. Anything else in a difference (the sweeper's
# Query, fired by its schedule) came from something else running on the backend at
# that moment: the sample is taken again on a fresh request (see StrategyBench.undisturbed).
HANDLER_ACTIONS = frozenset({"GetItem", "PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems"})
MAX_TRIES = 5
# New execution environments started at once while warming up (see start_environments).
WARM_UP_STEP = 4
# No DynamoDB request for this long: nothing else is running on the backend.
QUIET_SECONDS = 0.3


@dataclass
class Sample:
    counts: Counter  # requests by (table, action), the table by its key in the stack's outputs
    seconds: list[float]  # one per invocation
    effects: int  # charges, claims won or rows, as counted for this sample
    wall_seconds: float
    request_key: str | None  # the checkout's idempotency key (the ledger's reference)


def summary(samples: list[Sample]) -> dict:
    """The samples of one delivery shape of one strategy, per sample and per round."""
    count, per_sample, wall = len(samples), len(samples[0].seconds), sum(s.wall_seconds for s in samples)
    by_table: dict[str, dict] = {}
    for (table, action), n in sorted(sum((s.counts for s in samples), Counter()).items()):
        by_table.setdefault(table, {})[action] = n / count
    return {
        "samples": count,
        "invocations_per_sample": per_sample,
        "calls_by_table_per_sample": by_table,
        "effects_per_sample": sum(s.effects for s in samples) / count,
        "latency_ms": percentiles([t for s in samples for t in s.seconds]),
        "throughput_per_s": count * per_sample / wall if wall else None,
        # Per round, for the report's intervals.
        "round_latencies_ms": [[round(t * 1000, 3) for t in s.seconds] for s in samples],
        "round_throughput_per_s": [per_sample / s.wall_seconds for s in samples if s.wall_seconds],
    }


class StrategyBench:
    """The deployed stack, its Lambda client and the backend's request counter."""

    def __init__(self, outputs: dict, endpoint_url: str | None):
        """``endpoint_url`` None: AWS (`make bench BACKEND=aws`), which has no request
        counter like the embedded backend's: latency and throughput only, no counts."""
        self.outputs, self.endpoint_url, self.counting = outputs, endpoint_url, endpoint_url is not None
        self._table_keys = {name: key for key, name in outputs["tables"].items()}
        # One attempt per call: an SDK retry would be a duplicate delivery we did not ask for.
        retries = {"total_max_attempts": 1}
        self._lambda = client("lambda", endpoint_url, retries=retries, read_timeout=90, max_pool_connections=64)
        self._dynamodb = client("dynamodb", endpoint_url)

    def counted(self) -> Counter:
        """Requests served so far, by (table, action); the table by its key in the outputs."""
        if not self.counting:
            return Counter()
        served = request_counts(self.endpoint_url)["dynamodb_by_table"].items()
        return Counter({(self._table_keys.get(t, t), a): n for t, by_action in served for a, n in by_action.items()})

    def wait_until_quiet(self, quiet_seconds: float = QUIET_SECONDS, timeout: float = 10.0) -> None:
        """Return once DynamoDB has served nothing for ``quiet_seconds`` (or after ``timeout``): work
        still running on the backend (a retried event, the sweeper) would land in the next counts."""
        deadline, last = time.monotonic() + timeout, self.counted()
        while self.counting and time.monotonic() < deadline:
            time.sleep(quiet_seconds)
            now = self.counted()
            if now == last:
                return
            last = now

    def invoke(self, function_key: str, event: dict, check: bool = True) -> tuple[float, float, dict | None]:
        """When the call started and ended (perf_counter) and the answer; a function error raises
        (or is None unchecked)."""
        started = time.perf_counter()
        function = self.outputs["functions"][function_key]
        response = self._lambda.invoke(FunctionName=function, Payload=json.dumps(event).encode())
        body = json.loads(response["Payload"].read() or b"null")
        ended = time.perf_counter()
        if response.get("FunctionError") and check:
            raise RuntimeError(f"{function_key} failed during the bench: {body}")
        return started, ended, None if response.get("FunctionError") else body

    def _together(self, function_key: str, events: list[dict], check: bool = True) -> tuple[list, float]:
        """Invoke once per event, all released at the same moment; (round trip, answer)s and wall time."""
        timed = all_at_once([partial(self.invoke, function_key, event, check) for event in events], join_seconds=None)
        wall = max(ended for _, ended, _ in timed) - min(started for started, _, _ in timed)
        return [(ended - started, answer) for started, ended, answer in timed], wall

    def undisturbed(self, before: Counter, after: Counter) -> bool:
        """Whether the requests counted between ``before`` and ``after`` are all a handler's."""
        return all(action in HANDLER_ACTIONS for _, action in after - before)

    def _try(self, strategy: Strategy, events: list[dict]) -> Sample | None:
        """Invoke ``events`` together, counting around them; None if the count was disturbed."""
        before = self.counted()
        results, wall = self._together(strategy.function, events)
        after = self.counted()
        if not self.undisturbed(before, after):
            return None
        outcomes = [answer.get("outcome") if isinstance(answer, dict) else None for _, answer in results]
        effects = sum(1 for outcome in outcomes if strategy.effect in (ROW, outcome)) if strategy.effect else 0
        seconds, key = [elapsed for elapsed, _ in results], events[0].get("idempotency_key")
        return Sample(after - before, seconds, effects, wall, key)

    def start_environments(self, strategy: Strategy, copies: int) -> list[float]:
        """``copies`` warm environments (fresh requests, not counted), so no copy waits on a cold start.

        Ramped up a few at a time: sixteen Python runtimes importing boto3 and Powertools
        at once on two busy cores can outlast the 30 s init timeout. Each step reuses the
        environments already warm and starts only the new ones. Returns the round trips
        (seconds) of the first step's invocations: cold starts, reported apart.
        """
        in_flight, cold = 0, []
        while in_flight < copies:
            in_flight = min(copies, in_flight + WARM_UP_STEP)
            for _ in range(MAX_TRIES):  # an init timeout kills its environment: start it again
                events = [new_delivery(strategy, self.outputs)(0) for _ in range(in_flight)]
                answered, _ = self._together(strategy.function, events, check=False)
                cold = cold or [elapsed for elapsed, body in answered if body is not None]
                if all(body is not None for _, body in answered):
                    break
        return cold

    def take(self, strategy: Strategy, shapes: list[tuple[list[Sample], int]]) -> None:
        """On one fresh request, a sample of ``copies`` events released together for each
        (samples, copies) in turn: [(first, 1), (duplicate, 1)] or [(together, copies)].

        A disturbed count drops the samples taken so far (a duplicate needs its first) and
        starts again on a new request: the disturbed try's invocations ran, and re-sending
        its events would add their charges, rows and claims to that request's ledger.
        """
        for _ in range(MAX_TRIES):
            event_for, taken, copy = new_delivery(strategy, self.outputs), [], 0
            for _, copies in shapes:
                taken.append(self._try(strategy, [event_for(copy + n) for n in range(copies)]))
                copy += copies
                if taken[-1] is None:
                    break
            else:
                for (samples, _), sample in zip(shapes, taken, strict=False):
                    samples.append(sample)
                return
        busy = f"DynamoDB was busy with other work in {MAX_TRIES} tries; run the bench alone"
        raise RuntimeError(f"{strategy.key}: {busy}")

    def processor_calls_per_charge(self, samples: int = 3) -> dict:
        """The card processor's own requests for one charge (no downstream key), measured alone:
        the most common count of a few charges, so one stray request from elsewhere cannot skew it."""
        charge = {"amount": 1999, "currency": "EUR"}
        self.invoke("card_processor", charge | {"reference": f"bench-warm-{time.time_ns()}"})
        self.wait_until_quiet()
        seen = []
        for _ in range(samples):
            before = self.counted()
            self.invoke("card_processor", charge | {"reference": f"bench-processor-{time.time_ns()}"})
            seen.append(tuple(sorted(Counter(action for _, action in (self.counted() - before).elements()).items())))
        return dict(statistics.mode(seen))

    def ledger_disagreements(self, samples: list[Sample]) -> dict:
        """Requests whose reported charges differ from the ledger's entries: {key: [reported, ledger]}."""
        reported: Counter = Counter()
        for sample in samples:
            reported[sample.request_key] += sample.effects
        ledger = Ledger(self.outputs["tables"]["ledger"], self._dynamodb).charges(reported)
        return {key: [reported[key], ledger[key]] for key in reported if reported[key] != ledger[key]}


def run(bench: StrategyBench, samples: int, copies: int, rounds: int, strategies=STRATEGIES) -> dict:
    """Measure every strategy, as the module says; raw results by strategy key (the report attributes them)."""
    processor = bench.processor_calls_per_charge() if bench.counting else {}
    results: dict = {"copies": copies, "processor_calls_per_charge": processor}
    cold = {strategy.key: bench.start_environments(strategy, copies) for strategy in strategies}
    bench.wait_until_quiet()
    measured: dict = {s.key: {delivery: [] for delivery in DELIVERIES} for s in strategies}
    for count, shapes in ((samples, (("first", 1), ("duplicate", 1))), (rounds, (("concurrent", copies),))):
        what = f"bench: {' and '.join(delivery for delivery, _ in shapes)} deliveries to {len(strategies)} strategies"
        with progress.Stage(what, count, "rounds") as stage:
            for number in range(count):
                for strategy in round_order(strategies, number):
                    bench.take(strategy, [(measured[strategy.key][delivery], n) for delivery, n in shapes])
                stage.advance()
    for strategy in strategies:
        taken, cold_seconds = measured[strategy.key], cold[strategy.key]
        results[strategy.key] = row = {delivery: summary(kept) for delivery, kept in taken.items()}
        row["cold_start_ms"] = percentiles(cold_seconds) | {"samples": len(cold_seconds)}
        if strategy.effect == CHARGE:
            row["ledger_disagreements"] = bench.ledger_disagreements([s for kept in taken.values() for s in kept])
    return results


def measure_on_own_backend(samples: int, copies: int, rounds: int, prefix: str = "bench") -> dict:
    """Start an embedded backend on a free port, deploy the stack to it, measure, stop it."""
    with EmbeddedBackend() as backend:
        # The harness (and Terraform) point at this backend for the duration, then at the learner's again.
        pointed = {"AWS_ENDPOINT_URL": backend.url, "BACKEND": "embedded", "LAB_PORT": str(backend.port)}
        with aws_environment(pointed | LOCAL_VARIABLES):  # and the dummy keys and Region
            try:
                outputs = stack.deploy(prefix=prefix)
                return run(StrategyBench(outputs, backend.url), samples, copies, rounds)
            finally:
                stack.forget(prefix)  # the working copy and outputs die with the backend


def short_run(chart_path: Path = settings.STATE_DIR / "bench" / "cost_of_idempotency_notebook.png") -> dict:
    """The notebook's live version: the report, with the chart's path under "chart"."""
    # Its own prefix, not "bench": `make bench` may run at the same time.
    result = strategy_report.report(measure_on_own_backend(**SHORT, prefix="cost-notebook"))
    result["chart"] = str(strategy_report.chart(result, chart_path))
    return result
