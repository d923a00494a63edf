"""Ratios with their uncertainty: a paired bootstrap over interleaved rounds.

Every comparison the bench prints is measured in rounds: in each round, every contender
takes its sample, in an order that changes from round to round, so that a slow minute
on a shared machine lands on all of them alike (never all of one, then all of the
other). A round is the unit of resampling: the bootstrap draws rounds with replacement,
keeping each round's samples together, computes the statistic's ratio on each draw, and
reports the 2.5th and 97.5th percentiles of those ratios.

When that interval contains 1, the measurement cannot tell the two apart: the report
says "no measurable difference at this sample size" and prints no ratio. Plain Python
with a fixed seed, so the same samples always give the same interval.
"""

from __future__ import annotations

import math
import operator
import random
import statistics
from collections.abc import Callable, Sequence

NO_DIFFERENCE = "no measurable difference at this sample size"
RESAMPLES = 2000
SEED = 20261201
CONFIDENCE = 0.95
# Below this many rounds a percentile bootstrap's interval is too narrow to trust (it
# cannot be wider than the few rounds' spread): no ratio, no verdict either way.
MIN_ROUNDS = 8

Rounds = Sequence[Sequence[float]]
Statistic = Callable[[Sequence[float]], float]


def ratio_interval(value_rounds: Rounds, reference_rounds: Rounds, statistic: Statistic = statistics.median):
    """statistic(values) / statistic(references), with a 95 % paired-bootstrap interval.

    ``value_rounds[i]`` and ``reference_rounds[i]`` are the samples both took in round i
    (a round may hold several samples each, or one). None without a round with samples
    on both sides; with fewer than MIN_ROUNDS, only the count (the ratio, low and high None).
    """
    return _interval("ratio", lambda v, r: v / r if r > 0 else None, value_rounds, reference_rounds, statistic)


def difference_interval(value_rounds: Rounds, reference_rounds: Rounds, statistic: Statistic = statistics.median):
    """statistic(values) - statistic(references), with the same paired bootstrap."""
    return _interval("difference", operator.sub, value_rounds, reference_rounds, statistic)


def per_round(values: Sequence[float]) -> list[list[float]]:
    """One sample per round (a rate measured once a round), as the intervals take rounds."""
    return [[value] for value in values]


def _interval(name: str, compare: Callable, value_rounds: Rounds, reference_rounds: Rounds, statistic: Statistic):
    """{name: compare(statistic(values), statistic(references)), low, high, rounds, confidence}, or None."""
    rounds = [(list(v), list(r)) for v, r in zip(value_rounds, reference_rounds, strict=False) if v and r]
    if not rounds:
        return None
    found = {name: None, "low": None, "high": None, "rounds": len(rounds), "confidence": CONFIDENCE}
    if len(rounds) < MIN_ROUNDS:
        return found

    def on(drawn: list[tuple[list[float], list[float]]]) -> float | None:
        return compare(statistic([x for v, _ in drawn for x in v]), statistic([x for _, r in drawn for x in r]))

    point = on(rounds)
    if point is None:
        return None
    # Rounds drawn with replacement: a round's samples stay together, both sides as a pair.
    rng = random.Random(SEED)
    drawn = (on([rounds[rng.randrange(len(rounds))] for _ in rounds]) for _ in range(RESAMPLES))
    draws = sorted(d for d in drawn if d is not None)
    tail = (1 - CONFIDENCE) / 2
    low, high = draws[int(tail * (len(draws) - 1))], draws[int((1 - tail) * (len(draws) - 1) + 0.5)]
    return found | {name: point, "low": low, "high": high}


def measurable(interval: dict | None) -> bool:
    """True when the ratio's interval excludes 1: the two differ at this sample size."""
    return bool(interval) and interval["ratio"] is not None and not (interval["low"] <= 1.0 <= interval["high"])


def ratio_text(interval: dict | None) -> str:
    """'1.84x (95 % CI 1.52-2.20, 40 rounds)', or the no-difference sentence; '-' if unmeasured."""
    if not interval:
        return "-"
    if interval["ratio"] is None:
        return f"too few rounds to compare ({interval['rounds']}; a ratio needs {MIN_ROUNDS})"
    ci = f"95 % CI {interval['low']:.2f}-{interval['high']:.2f}, {interval['rounds']} rounds"
    return f"{interval['ratio']:.2f}x ({ci})" if measurable(interval) else f"{NO_DIFFERENCE} ({ci})"


def difference_text(interval: dict | None) -> str:
    """'+0.85 ms (95 % CI +0.80 to +0.91)'; '-' if unmeasured or too few rounds."""
    if not interval or interval["difference"] is None:
        return "-"
    return f"{interval['difference']:+.2f} ms (95 % CI {interval['low']:+.2f} to {interval['high']:+.2f})"


def percentiles(seconds: Sequence[float]) -> dict:
    """p50 and p99 in milliseconds, by nearest rank (few samples: p99 is the max)."""
    ordered = sorted(seconds)
    if not ordered:
        return {"p50": None, "p99": None}
    return {f"p{q}": ordered[math.ceil(q * len(ordered) / 100) - 1] * 1000 for q in (50, 99)}


def round_order(contenders: Sequence, round_number: int) -> list:
    """The contenders in this round's order: rotated by one each round, so each goes
    first, second, ... equally often over a whole number of cycles."""
    shift = round_number % max(len(contenders), 1)
    return [*contenders[shift:], *contenders[:shift]]
