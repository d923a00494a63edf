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


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def mean(values: Sequence[float]) -> float:
    return statistics.fmean(values)


def ratio_interval(
    value_rounds: Sequence[Sequence[float]],
    reference_rounds: Sequence[Sequence[float]],
    statistic: Callable[[Sequence[float]], float] = median,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> dict | None:
    """statistic(values) / statistic(references), with a 95 % paired-bootstrap interval.

    ``value_rounds[i]`` and ``reference_rounds[i]`` are the samples both took in round i
    (a round may hold several samples each, or one). None without a round with samples
    on both sides; with fewer than MIN_ROUNDS, only the count (and no ratio).
    """
    rounds = [(list(v), list(r)) for v, r in zip(value_rounds, reference_rounds) if v and r]
    if not rounds:
        return None
    if len(rounds) < MIN_ROUNDS:
        return {"ratio": None, "low": None, "high": None, "rounds": len(rounds), "confidence": CONFIDENCE}
    values = [x for v, _ in rounds for x in v]
    references = [x for _, r in rounds for x in r]
    if statistic(references) <= 0:
        return None
    ratio = statistic(values) / statistic(references)
    rng = random.Random(seed)
    draws = []
    for _ in range(resamples):
        picked = [rounds[rng.randrange(len(rounds))] for _ in rounds]
        reference = statistic([x for _, r in picked for x in r])
        if reference > 0:
            draws.append(statistic([x for v, _ in picked for x in v]) / reference)
    draws.sort()
    tail = (1 - CONFIDENCE) / 2
    low = draws[int(tail * (len(draws) - 1))]
    high = draws[int((1 - tail) * (len(draws) - 1) + 0.5)]
    return {"ratio": ratio, "low": low, "high": high, "rounds": len(rounds), "confidence": CONFIDENCE}


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


def difference_interval(
    value_rounds: Sequence[Sequence[float]],
    reference_rounds: Sequence[Sequence[float]],
    statistic: Callable[[Sequence[float]], float] = median,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> dict | None:
    """statistic(values) - statistic(references), with the same paired bootstrap."""
    rounds = [(list(v), list(r)) for v, r in zip(value_rounds, reference_rounds) if v and r]
    if len(rounds) < MIN_ROUNDS:
        return None
    difference = statistic([x for v, _ in rounds for x in v]) - statistic([x for _, r in rounds for x in r])
    rng = random.Random(seed)
    draws = []
    for _ in range(resamples):
        picked = [rounds[rng.randrange(len(rounds))] for _ in rounds]
        draws.append(statistic([x for v, _ in picked for x in v]) - statistic([x for _, r in picked for x in r]))
    draws.sort()
    tail = (1 - CONFIDENCE) / 2
    return {
        "difference": difference,
        "low": draws[int(tail * (len(draws) - 1))],
        "high": draws[int((1 - tail) * (len(draws) - 1) + 0.5)],
        "rounds": len(rounds),
        "confidence": CONFIDENCE,
    }


def round_order(contenders: Sequence, round_number: int) -> list:
    """The contenders in this round's order: rotated by one each round, so each goes
    first, second, ... equally often over a whole number of cycles."""
    items = list(contenders)
    if not items:
        return items
    shift = round_number % len(items)
    return items[shift:] + items[:shift]
