"""Lesson 09's cost table, from counts to dollars (no server): the arithmetic notebook 09
prints, at the dated prices of idemlab/bench/prices.py."""

from __future__ import annotations

import pytest

from idemlab.lessons import durable

MILLION = 1_000_000


def test_six_durable_operations_cost_48_dollars_per_million_deletions():
    usage = durable.DurableUsage(operations=6, invocations=2, bytes_written=0, retained_days=31)
    usd = usage.usd()
    assert usd["durable operations"] * MILLION == pytest.approx(48.0)
    assert usd["Lambda requests"] * MILLION == pytest.approx(0.40)
    assert usd["data written"] == usd["data retained"] == 0


def test_a_gigabyte_kept_thirty_days_is_one_gigabyte_month():
    usage = durable.DurableUsage(operations=0, invocations=0, bytes_written=10**9, retained_days=30)
    assert usage.usd()["data retained"] == pytest.approx(0.15)
    assert usage.usd()["data written"] == pytest.approx(0.25)


def test_nine_state_transitions_cost_225_dollars_per_million_deletions():
    workflow = durable.WorkflowUsage(schedule_invocations=1, state_transitions=9, lambda_invocations=6)
    rows = durable.cost_table(durable.DurableUsage(6, 2, 0, 31), workflow, MILLION)
    by_line = {(row["way"], row["line"]): row["usd"] for row in rows}
    scheduled = durable.WAYS[1]
    assert by_line[(scheduled, "state transitions")] == pytest.approx(225.0)
    assert by_line[(scheduled, "Scheduler invocations")] == pytest.approx(1.0)
    assert by_line[(scheduled, "Lambda requests")] == pytest.approx(1.2)
