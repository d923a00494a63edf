"""The lesson 2 pictures draw what the answers say, including a copy that crashed."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from idemlab import pictures
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
    ax = pictures.draw_checkout_timeline(answers, "race")
    bars = [_start_and_width(collection) for collection in ax.collections]
    assert len(bars) == 6
    assert min(x for x, _ in bars) == 0.0  # milliseconds since the earliest step
    assert (300.0, 50.0) in bars
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[2].endswith(checkout.CRASHED)
    plt.close("all")


def test_charges_picture_stacks_rounds_by_how_often_they_charged():
    ax = pictures.draw_checkout_charges({"naive": [5, 5, 5], "Powertools": [1, 1, 1], "broken": [0, 1, 2]}, copies=5)
    heights = [round(p.get_height()) for p in ax.patches]
    # Three layers (once, more than once, never), each with one bar per strategy.
    assert heights == [0, 3, 1, 3, 0, 1, 0, 0, 1]
    plt.close("all")


def test_powertools_sequence_interleaves_racing_copies_by_their_clock():
    winner = _answer("charged", [("check", 10.000, 10.004), ("charge", 10.005, 10.050), ("record", 10.051, 10.052)])
    loser = {**_answer("in_progress", [("check", 10.002, 10.006)]), "outcome": "in_progress"}
    spec = checkout.powertools_sequence([("copy A", winner), ("copy B", loser)], "two copies at once")
    assert spec["participants"] == ["copy A", "copy B", checkout.TABLE, checkout.PROCESSOR]
    assert [(sender, receiver) for sender, receiver, _ in spec["messages"]] == [
        ("copy A", checkout.TABLE),  # 10.000 A claims
        ("copy B", checkout.TABLE),  # 10.002 B claims
        (checkout.TABLE, "copy A"),  # 10.004 A holds the key
        ("copy A", checkout.PROCESSOR),
        (checkout.TABLE, "copy B"),  # 10.006 B is refused
        (checkout.PROCESSOR, "copy A"),
        ("copy A", checkout.TABLE),
    ]
    assert spec["messages"][4][2] == checkout.CLAIM_ANSWERS["in_progress"]
    ax = pictures.draw_sequence(spec)
    assert len([a for a in ax.texts if a.get_text()]) >= len(spec["messages"])
    plt.close("all")


def test_powertools_sequence_names_the_second_charge_after_a_crash():
    crashed = {"strategy": "powertools", "outcome": checkout.CRASHED, "charge_id": None, "trace": []}
    retry = _answer("charged", [("check", 20.0, 20.1), ("charge", 20.2, 20.3), ("record", 20.3, 20.4)])
    spec = checkout.powertools_sequence([("first copy", crashed), ("retry", retry)])
    charges = [what for sender, receiver, what in spec["messages"] if receiver == checkout.PROCESSOR]
    assert charges == ["charge", "charge (a second time)"]
    assert ("first copy", checkout.TABLE, "(timed out: no COMPLETED; INPROGRESS expires)") in spec["messages"]
    plt.close("all")


def test_powertools_sequence_draws_a_replay_without_a_charge():
    replay = _answer("replayed", [("check", 1.0, 1.1)])
    spec = checkout.powertools_sequence([("retry", replay)])
    assert [what for _, _, what in spec["messages"]] == [
        "PutItem INPROGRESS if absent or expired",
        checkout.CLAIM_ANSWERS["replayed"],
    ]
