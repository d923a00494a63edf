"""The bench prints no latency ratio without its interval, and none at all when the
interval contains 1.

Samples come from seeded random distributions: two identical ones must read "no
measurable difference", two clearly different ones a ratio with its 95 % interval; both
through the bootstrap and through the latency table the bench and notebook 05 print.
"""

from __future__ import annotations

import random

from idemlab.bench import intervals, strategy_report
from idemlab.bench.strategies import STRATEGIES

ROUNDS = 40


def _rounds(rng: random.Random, median_ms: float) -> list[list[float]]:
    # Latency-like: a floor plus a long right tail, one sample per round.
    return [[median_ms * (0.8 + rng.expovariate(1 / 0.3))] for _ in range(ROUNDS)]


def test_two_samples_of_one_distribution_show_no_measurable_difference():
    rng = random.Random(1)
    interval = intervals.ratio_interval(_rounds(rng, 20), _rounds(rng, 20))
    assert interval["low"] < 1 < interval["high"]
    text = intervals.ratio_text(interval)
    assert text.startswith(intervals.NO_DIFFERENCE)
    assert f"{interval['ratio']:.2f}x" not in text  # no bare ratio to believe


def test_clearly_different_distributions_give_a_ratio_with_its_interval():
    rng = random.Random(2)
    interval = intervals.ratio_interval(_rounds(rng, 40), _rounds(rng, 20))
    assert 1 < interval["low"] <= interval["ratio"] <= interval["high"]
    text = intervals.ratio_text(interval)
    assert text.startswith(
        f"{interval['ratio']:.2f}x (95 % CI {interval['low']:.2f}-{interval['high']:.2f}, {ROUNDS} rounds)"
    )
    assert intervals.NO_DIFFERENCE not in text


def test_a_few_rounds_give_no_ratio_and_no_verdict():
    # Notebook 05's short run: two rounds of a 3x difference are still too few to claim it.
    few = intervals.ratio_interval([[30.0], [31.0]], [[10.0], [10.5]])
    assert few["ratio"] is None and not intervals.measurable(few)
    assert intervals.ratio_text(few).startswith("too few rounds to compare (2;")
    assert intervals.ratio_text(None) == "-"


def test_rounds_rotate_so_no_contender_always_goes_first():
    firsts = [intervals.round_order("abc", n)[0] for n in range(6)]
    assert sorted(firsts) == ["a", "a", "b", "b", "c", "c"]


def _raw(naive_ms: float, idempotent_ms: float, seed: int) -> dict:
    rng = random.Random(seed)
    raw = {"copies": 2, "processor_calls_per_charge": {"PutItem": 1}}
    for strategy in STRATEGIES:
        median_ms = idempotent_ms if strategy.compared_with else naive_ms
        shape = {}
        for delivery in strategy_report.DELIVERIES:
            latencies = _rounds(rng, median_ms)
            shape[delivery] = {
                "calls_by_table_per_sample": {},
                "effects_per_sample": 0,
                "invocations_per_sample": 1,
                "latency_ms": {"p50": median_ms, "p99": median_ms * 3},
                "throughput_per_s": 1000 / median_ms,
                "round_latencies_ms": latencies,
                "round_throughput_per_s": [1000 / ms for (ms,) in latencies],
            }
        raw[strategy.key] = shape
    return raw


def _compared_rows(table: str) -> list[str]:
    labels = {s.label for s in STRATEGIES if s.compared_with}
    return [line for line in table.splitlines() if any(f"| {label} |" in line for label in labels)]


def test_the_latency_table_says_no_measurable_difference_for_identical_distributions():
    rows = _compared_rows(strategy_report.latency_table(strategy_report.report(_raw(20, 20, seed=3))))
    assert rows
    for row in rows:
        # first p50, duplicate p50 and throughput: three verdicts, no ratio among them
        assert row.count(intervals.NO_DIFFERENCE) == 3, row


def test_the_latency_table_gives_ratios_with_intervals_for_different_distributions():
    rows = _compared_rows(strategy_report.latency_table(strategy_report.report(_raw(20, 40, seed=4))))
    assert rows
    for row in rows:
        assert intervals.NO_DIFFERENCE not in row, row
        assert row.count("x (95 % CI ") == 3, row


def _backend_results(fast_rate: float, seed: int) -> dict:
    """What idemlab.bench.embedded.run returns, from seeded distributions (no servers)."""
    from idemlab.bench import embedded

    rng = random.Random(seed)

    def rates(mean: float) -> list[float]:
        return [rng.gauss(mean, mean * 0.1) for _ in range(ROUNDS)]

    dynamodb = {
        op: {
            str(t): {embedded.PLAIN: rates(300), embedded.SLOW: rates(300), embedded.FAST: rates(fast_rate)}
            for t in embedded.THREADS
        }
        for op in embedded.OPERATIONS
    }
    warm = {name: [[ms / 1000] for (ms,) in _rounds(rng, 2.0)] for name in (embedded.SLOW, embedded.FAST)}
    warm["in-process call"] = [[0.000001]] * ROUNDS
    return {
        "sizes": {"rounds": ROUNDS, "calls": 100, "invocations": ROUNDS},
        "dynamodb_calls_per_s": dynamodb,
        "lambda": {"cold_start_s": {embedded.SLOW: 0.1, embedded.FAST: 0.1}, "warm_s": warm},
    }


def test_the_backend_table_says_no_measurable_difference_between_identical_servers():
    from idemlab.bench import embedded

    table = embedded.table(_backend_results(fast_rate=300, seed=5))
    rows = [line for line in table.splitlines() if "thread(s)" in line]
    assert len(rows) == len(embedded.OPERATIONS) * len(embedded.THREADS)
    for row in rows:
        assert row.count(intervals.NO_DIFFERENCE) == 2, row
    assert f"fast path on / off: {intervals.NO_DIFFERENCE}" in table


def test_the_backend_table_gives_each_speed_up_with_its_interval():
    from idemlab.bench import embedded

    table = embedded.table(_backend_results(fast_rate=1200, seed=6))
    for row in (line for line in table.splitlines() if "thread(s)" in line):
        assert row.count("x (95 % CI ") == 2 and intervals.NO_DIFFERENCE not in row, row


def test_the_backend_table_prints_the_raw_http_view_and_the_boto3_ceiling_with_intervals():
    from idemlab.bench import embedded

    results = _backend_results(fast_rate=1200, seed=7)
    rng = random.Random(8)
    for rows in (rows for by_threads in results["dynamodb_calls_per_s"].values() for rows in by_threads.values()):
        rows[embedded.CEILING] = [rng.gauss(1500, 150) for _ in range(ROUNDS)]
    results["dynamodb_raw_calls_per_s"] = _backend_results(fast_rate=1500, seed=9)["dynamodb_calls_per_s"]
    table = embedded.table(results)
    boto3_part, raw_part = table.split("sent as raw HTTP")
    boto3_rows = [line for line in boto3_part.splitlines() if "thread(s)" in line]
    raw_rows = [line for line in raw_part.splitlines() if "thread(s)" in line]
    assert len(boto3_rows) == len(raw_rows) == len(embedded.OPERATIONS) * len(embedded.THREADS)
    for row in boto3_rows:  # fast/plain, fast/off, and the ceiling/plain
        assert row.count("x (95 % CI ") == 3, row
    for row in raw_rows:
        assert row.count("x (95 % CI ") == 2, row
