"""The bench's peer column and its other services: measured on real servers, rendered with
intervals, and absent with its reason said."""

from __future__ import annotations

import random
import statistics

from idemlab.bench import embedded

ROUNDS = 10


def test_the_other_services_rounds_run_on_the_embedded_backend_and_plain_moto(backend):
    """SQS send + receive + delete on both; StartSyncExecution on the embedded backend only
    (plain moto has none): one rate per kept round each."""
    with embedded.child_server(embedded.PLAIN_MOTO_CODE) as plain:
        results = embedded.service_rounds({embedded.PLAIN: plain, embedded.FAST: backend}, rounds=2, calls=3)
    assert sorted(results[embedded.SQS_ROUND_TRIP]["1"]) == sorted([embedded.PLAIN, embedded.FAST])
    assert list(results[embedded.SYNC_EXECUTION]["1"]) == [embedded.FAST]
    for by_server in (results[embedded.SQS_ROUND_TRIP]["1"], results[embedded.SYNC_EXECUTION]["1"]):
        assert all(len(rates) == 2 and min(rates) > 0 for rates in by_server.values()), by_server


def test_no_localstack_column_when_not_asked_for_and_the_reason_is_given():
    with embedded.localstack_peer(wanted=False) as (url, absent):
        assert url is None and "--no-localstack" in absent


def _rates(rng: random.Random, mean: float) -> list[float]:
    return [rng.gauss(mean, mean * 0.05) for _ in range(ROUNDS)]


def test_the_localstack_column_has_a_ratio_with_its_interval_on_every_row_it_was_measured():
    rng = random.Random(3)
    rates = {
        op: {
            "1": {
                embedded.PLAIN: _rates(rng, 300),
                embedded.FAST: _rates(rng, 900),
                embedded.LOCALSTACK: _rates(rng, 200),
            }
        }
        for op in embedded.OPERATIONS
    }
    others = {
        embedded.SQS_ROUND_TRIP: {
            "1": {
                embedded.PLAIN: _rates(rng, 100),
                embedded.FAST: _rates(rng, 300),
                embedded.LOCALSTACK: _rates(rng, 50),
            }
        },
        embedded.SYNC_EXECUTION: {"1": {embedded.FAST: _rates(rng, 200), embedded.LOCALSTACK: _rates(rng, 20)}},
    }
    warm = {
        name: [[ms / 1000] for ms in _rates(rng, mean)]
        for name, mean in ((embedded.FAST, 2.0), (embedded.LOCALSTACK, 9.0))
    }
    warm[embedded.DIRECT] = [[0.000001]] * ROUNDS
    table = embedded.table(
        {
            "sizes": {"rounds": ROUNDS, "calls": 80},
            "dynamodb_calls_per_s": rates,
            "other_calls_per_s": others,
            "lambda": {"cold_start_s": {}, "warm_s": warm},
        }
    )
    lines = table.splitlines()
    header = [
        cell.strip() for cell in next(line for line in lines if "fast / LocalStack" in line).strip("| ").split("|")
    ]
    assert embedded.SLOW not in header  # not measured: no column
    measured = {
        f"{op}, {t} thread(s)": by_server
        for group in (rates, others)
        for op, by_threads in group.items()
        for t, by_server in by_threads.items()
    }
    rows = {
        cells[0]: cells
        for cells in ([c.strip() for c in line.strip("| ").split("|")] for line in lines if "thread(s)" in line)
    }
    assert sorted(rows) == sorted(measured)
    for label, by_server in measured.items():
        expected = statistics.fmean(by_server[embedded.FAST]) / statistics.fmean(by_server[embedded.LOCALSTACK])
        ratio = rows[label][header.index("fast / LocalStack")]
        assert ratio.startswith(f"{expected:.2f}x (95 % CI "), (label, ratio)
    assert rows[f"{embedded.SYNC_EXECUTION}, 1 thread(s)"][header.index(embedded.PLAIN)] == "-"  # plain moto has none

    def pooled(name: str) -> list[float]:
        return [sample for samples in warm[name] for sample in samples]

    slower = statistics.median(pooled(embedded.LOCALSTACK)) / statistics.median(pooled(embedded.FAST))
    assert f"LocalStack / fast path on: {slower:.2f}x (95 % CI " in table, table
