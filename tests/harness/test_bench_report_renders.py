"""The cost report renders from measurements: tables, notes and the chart.

The measurements here are written from the catalogue (every strategy exactly at its
minimum, the naive ones charging each time), so the report's plumbing is checked in
milliseconds; the counts themselves are checked on the stack in test_bench_strategy_counts.
"""

from __future__ import annotations

from collections import Counter

from idemlab.bench import strategy_report
from idemlab.bench.strategies import CHARGE, CLAIM, PROBE_TABLE, STRATEGIES

COPIES = 16
PROCESSOR = {"PutItem": 1}


def _shape(by_table: dict, effects: int, invocations: int, p50: float) -> dict:
    # 20 rounds, each within 2 % of p50: a clear 1.5x shows as a ratio with its interval.
    rounds = [p50 * (1 + 0.01 * ((n * 7) % 5 - 2)) for n in range(20)]
    return {
        "calls_by_table_per_sample": {table: dict(c) for table, c in by_table.items()},
        "effects_per_sample": effects,
        "invocations_per_sample": invocations,
        "latency_ms": {"p50": p50, "p99": p50 * 3},
        "throughput_per_s": 1000 / p50,
        "round_latencies_ms": [[ms] for ms in rounds],
        "round_throughput_per_s": [1000 / ms for ms in rounds],
    }


def _at_minimum(strategy, delivery: str) -> dict:
    firsts, duplicates = {"first": (1, 0), "duplicate": (0, 1), "concurrent": (1, COPIES - 1)}[delivery]
    invocations = firsts + duplicates
    naive = not strategy.minimum_first  # no protection: every delivery repeats the effect
    effects = invocations if naive else (firsts if strategy.effect in (CHARGE, CLAIM) else 0)
    by_table = {"own_table": strategy.minimum(firsts, duplicates)}
    if strategy.effect_table:
        by_table[strategy.effect_table] = Counter({a: n * effects for a, n in PROCESSOR.items()})
    by_table[PROBE_TABLE] = Counter(GetItem=invocations)  # a fault check per invocation
    return _shape(by_table, effects, invocations, p50=20.0 if naive else 30.0)


def _measured() -> dict:
    raw = {"copies": COPIES, "processor_calls_per_charge": PROCESSOR}
    for strategy in STRATEGIES:
        raw[strategy.key] = {d: _at_minimum(strategy, d) for d in strategy_report.DELIVERIES}
    return raw


def test_strategies_at_their_minimum_leave_nothing_unexplained():
    assert strategy_report.unexplained(strategy_report.report(_measured())) == []


def test_the_tables_have_a_row_per_strategy_and_delivery_with_ratios_to_naive():
    result = strategy_report.report(_measured())
    requests = strategy_report.requests_table(result).splitlines()
    latency = strategy_report.latency_table(result).splitlines()
    assert len(requests) == 2 + 3 * len(STRATEGIES)
    assert len(latency) == 2 + len(STRATEGIES)
    powertools = next(line for line in latency if "| Powertools |" in line)
    assert "| 1.50x (95 % CI 1.50-1.50, 20 rounds) |" in powertools  # 30 ms against naive's 20 ms, with its interval


def test_the_chart_is_written(tmp_path):
    path = strategy_report.chart(strategy_report.report(_measured()), tmp_path / "chart.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
