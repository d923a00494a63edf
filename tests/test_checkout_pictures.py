"""The lesson 2 pictures draw what the answers say, including a copy that crashed."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from idemlab.lessons import checkout


def _answer(outcome: str, steps: list[tuple[str, float, float]], pid: int = 7) -> dict:
    return {
        "outcome": outcome,
        "pid": pid,
        "trace": [{"step": s, "start": a, "end": b, "pid": pid} for s, a, b in steps],
    }


def _start_and_width(collection) -> tuple[float, float]:
    xs = [x for x, _ in collection.get_paths()[0].vertices]
    return round(min(xs), 1), round(max(xs) - min(xs), 1)


def test_timeline_puts_every_step_on_one_axis_from_the_first_start():
    answers = [
        _answer("charged", [("check", 100.000, 100.010), ("charge", 100.300, 100.350), ("record", 100.350, 100.360)]),
        _answer("charged", [("check", 100.005, 100.015), ("charge", 100.305, 100.355), ("record", 100.355, 100.365)]),
        {"outcome": checkout.CRASHED, "trace": []},
    ]
    ax = checkout.plot_timeline(answers, "race")
    bars = [_start_and_width(collection) for collection in ax.collections]
    assert len(bars) == 6
    assert min(x for x, _ in bars) == 0.0  # milliseconds since the earliest step
    assert (300.0, 50.0) in bars
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[2].endswith(checkout.CRASHED)
    plt.close("all")


def test_charges_picture_stacks_rounds_by_how_often_they_charged():
    ax = checkout.plot_charges({"naive": [5, 5, 5], "Powertools": [1, 1, 1], "broken": [0, 1, 2]}, copies=5)
    heights = [round(p.get_height()) for p in ax.patches]
    # Three layers (once, more than once, never), each with one bar per strategy.
    assert heights == [0, 3, 1, 3, 0, 1, 0, 0, 1]
    plt.close("all")
