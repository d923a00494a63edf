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

import random
import statistics
from typing import Callable, Sequence

NO_DIFFERENCE = "no measurable difference at this sample size"
RESAMPLES = 2000
SEED = 20261201
CONFIDENCE = 0.95
# Below this many rounds a percentile bootstrap's interval is too narrow to trust (it
# cannot be wider than the few rounds' spread): no ratio, no verdict either way.
MIN_ROUNDS = 8

Rounds = Sequence[Sequence[float]]
Statistic = Callable[[Sequence[float]], float]


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def mean(values: Sequence[float]) -> float:
    return statistics.fmean(values)


def ratio_interval(value_rounds: Rounds, reference_rounds: Rounds, statistic: Statistic = median) -> dict | None:
    """statistic(values) / statistic(references), with a 95 % paired-bootstrap interval.

    ``value_rounds[i]`` and ``reference_rounds[i]`` are the samples both took in round i
    (a round may hold several samples each, or one). None without a round with samples
    on both sides; with fewer than MIN_ROUNDS, only the count (and no ratio).
    """
    rounds = _paired(value_rounds, reference_rounds)
    if not rounds:
        return None
    if len(rounds) < MIN_ROUNDS:
        return {"ratio": None, "low": None, "high": None, "rounds": len(rounds), "confidence": CONFIDENCE}

    def ratio(values: list[float], references: list[float]) -> float | None:
        reference = statistic(references)
        return statistic(values) / reference if reference > 0 else None

    point = ratio(*_pooled(rounds))
    if point is None:
        return None
    low, high = _bootstrap(rounds, ratio)
    return {"ratio": point, "low": low, "high": high, "rounds": len(rounds), "confidence": CONFIDENCE}


def measurable(interval: dict | None) -> bool:
    """True when the interval excludes 1: the two differ at this sample size."""
    return bool(interval) and interval["ratio"] is not None and not (interval["low"] <= 1.0 <= interval["high"])


def ratio_text(interval: dict | None, unit: str = "x") -> str:
    """'1.84x (95 % CI 1.52-2.20, 40 rounds)', or the no-difference sentence; '-' if unmeasured."""
    if not interval:
        return "-"
    if interval["ratio"] is None:
        return f"too few rounds to compare ({interval['rounds']}; a ratio needs {MIN_ROUNDS})"
    if not measurable(interval):
        return f"{NO_DIFFERENCE} (95 % CI {interval['low']:.2f}-{interval['high']:.2f}, {interval['rounds']} rounds)"
    return f"{interval['ratio']:.2f}{unit} (95 % CI {interval['low']:.2f}-{interval['high']:.2f}, {interval['rounds']} rounds)"


def difference_interval(value_rounds: Rounds, reference_rounds: Rounds, statistic: Statistic = median) -> dict | None:
    """statistic(values) - statistic(references), with the same paired bootstrap."""
    rounds = _paired(value_rounds, reference_rounds)
    if len(rounds) < MIN_ROUNDS:
        return None

    def difference(values: list[float], references: list[float]) -> float:
        return statistic(values) - statistic(references)

    low, high = _bootstrap(rounds, difference)
    return {"difference": difference(*_pooled(rounds)), "low": low, "high": high, "rounds": len(rounds), "confidence": CONFIDENCE}


def _paired(value_rounds: Sequence[Sequence[float]], reference_rounds: Sequence[Sequence[float]]) -> list[tuple[list[float], list[float]]]:
    """The rounds with samples on both sides, each as (values, references)."""
    return [(list(v), list(r)) for v, r in zip(value_rounds, reference_rounds) if v and r]


def _pooled(rounds: Sequence[tuple[list[float], list[float]]]) -> tuple[list[float], list[float]]:
    return [x for v, _ in rounds for x in v], [x for _, r in rounds for x in r]


def _bootstrap(rounds, compare: Callable[[list[float], list[float]], float | None]) -> tuple[float, float]:
    """The 95 % percentile interval of `compare` over rounds drawn with replacement: a
    round's samples stay together, so both sides of a round are resampled as a pair."""
    rng = random.Random(SEED)
    draws = []
    for _ in range(RESAMPLES):
        drawn = compare(*_pooled([rounds[rng.randrange(len(rounds))] for _ in rounds]))
        if drawn is not None:
            draws.append(drawn)
    draws.sort()
    tail = (1 - CONFIDENCE) / 2
    return draws[int(tail * (len(draws) - 1))], draws[int((1 - tail) * (len(draws) - 1) + 0.5)]


def round_order(contenders: Sequence, round_number: int) -> list:
    """The contenders in this round's order: rotated by one each round, so each goes
    first, second, ... equally often over a whole number of cycles."""
    items = list(contenders)
    if not items:
        return items
    shift = round_number % len(items)
    return items[shift:] + items[:shift]
