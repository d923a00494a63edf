"""From counted requests to the answer a team wants: the cost of each strategy.

Each delivery's requests are split by purpose, by the table each one named (the backend
counts them so: nothing here models how many requests a handler's code makes):
- effect: the business write the strategy protects, what reached its effect table (the
  card processor's ledger write per charge, checked against the ledger; the naive rows);
- lab probes: the fault-injection reads only this lab's handlers make (the faults table);
- own: everything else, the strategy's price, compared with its minimum action by action,
  every difference named with its reason.
Then dollars per million invocations (all requests, and the strategy's own share), and
latency and throughput against the naive handler of the same lesson, each ratio with its
95 % bootstrap interval over the interleaved rounds, or no ratio at all (intervals.py).
"""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path

from idemlab.bench import prices
from idemlab.bench.intervals import per_round, ratio_interval, ratio_text
from idemlab.bench.strategies import DELIVERIES, KNOWN_DEVIATIONS, PROBE_TABLE, STRATEGIES, Strategy


def _minus(a: dict, b: dict) -> dict:
    """a - b action by action, sorted, without zeros (negative where b has more)."""
    difference = Counter(a)
    difference.subtract(b)
    return {action: n for action, n in sorted(difference.items()) if abs(n) > 1e-9}


def attribute(strategy: Strategy, measured: dict, delivery: str, copies: int) -> dict:
    """One delivery's requests by purpose, per sample (one invocation, or one round of ``copies``)."""
    shape = measured[delivery]
    by_table, invocations = shape["calls_by_table_per_sample"], shape["invocations_per_sample"]
    calls = _minus(sum((Counter(table_calls) for table_calls in by_table.values()), Counter()), {})
    effect = by_table.get(strategy.effect_table, {})  # a claim has none: its write is also its check
    probes = by_table.get(PROBE_TABLE, {})
    own = _minus(_minus(calls, effect), probes)
    firsts, duplicates = {"first": (1, 0), "duplicate": (0, 1), "concurrent": (1, copies - 1)}[delivery]
    minimum = dict(strategy.minimum(firsts, duplicates))
    excess = _minus(own, minimum)
    why = [
        KNOWN_DEVIATIONS.get((strategy.key, action, 1 if n > 0 else -1))
        or f"unexplained: {n:+g} {action} against the stated minimum"
        for action, n in excess.items()
    ]
    usd = prices.usd_per_million_invocations  # linear in the counts: a sample's dollars over its invocations
    return {
        "invocations": invocations,
        "effects": shape["effects_per_sample"],
        "counted": calls,
        "effect": dict(effect),
        "probes": dict(probes),
        "own": own,
        "minimum": minimum,
        "excess": excess,
        "why": why,
        "usd_per_million_invocations": usd(calls) / invocations,
        "own_usd_per_million_invocations": usd(own) / invocations,
    }


def report(raw: dict) -> dict:
    """Per strategy: attribution per delivery, latency and throughput ratios to naive (None without one)."""
    rows = {}
    for strategy in (s for s in STRATEGIES if s.key in raw):
        measured, naive = raw[strategy.key], raw.get(strategy.compared_with)
        row = {key: getattr(strategy, key) for key in ("lesson", "label", "pattern", "compared_with")}
        for delivery in DELIVERIES:
            # Ratios to naive round by round (the rounds were interleaved): p50 latency over
            # each round's invocations, and the mean of the rounds' throughputs.
            shape, theirs = measured[delivery], naive and naive[delivery]
            row[delivery] = part = attribute(strategy, measured, delivery, raw["copies"])
            part["latency_ms"] = shape["latency_ms"]
            part["p50_ratio_to_naive"] = theirs and ratio_interval(*(s["round_latencies_ms"] for s in (shape, theirs)))
            if delivery == "concurrent":
                part["throughput_per_s"] = shape["throughput_per_s"]
                throughputs = (per_round(s["round_throughput_per_s"]) for s in (shape, theirs))
                part["throughput_ratio_to_naive"] = theirs and ratio_interval(*throughputs, statistics.fmean)
        row |= {key: measured[key] for key in ("cold_start_ms", "ledger_disagreements") if key in measured}
        rows[strategy.key] = row
    processor, copies = raw["processor_calls_per_charge"], raw["copies"]
    return {"copies": copies, "processor_calls_per_charge": processor, "prices": prices.citation(), "strategies": rows}


def calls_text(calls: dict, signed: bool = False) -> str:
    """``{"GetItem": 1, "PutItem": 2}`` as "1 Get + 2 Put" (signed: "+1 Get -2 Put")."""
    terms = []
    for action, n in calls.items() if signed else sorted(calls.items()):
        number = f"{n:g}" if abs(n - round(n)) < 1e-9 else f"{n:.2f}"
        short = action.removesuffix("Item").removesuffix("WriteItems")  # GetItem: Get; TransactWriteItems: Transact
        terms += [f"{'+' * (signed and n > 0)}{number} {short}"] if n else []
    return (" " if signed else " + ").join(terms) or "0"


def markdown(header: str, align: str, rows: list[list[str]]) -> str:
    """A table: ``header`` names the columns, "|" between them; ``align`` is the markdown separator row."""
    lines = ["| " + " | ".join(cells) + " |" for cells in [header.split("|"), *rows]]
    return "\n".join([lines[0], align, *lines[1:]])


def requests_table(result: dict) -> str:
    rows = []
    for row in result["strategies"].values():
        for delivery in DELIVERIES:
            part = row[delivery]
            label = f"{result['copies']} together, per round" if delivery == "concurrent" else delivery
            rows.append(
                [
                    row["lesson"],
                    row["label"],
                    label,
                    *(calls_text(part[purpose]) for purpose in ("counted", "effect", "probes", "own", "minimum")),
                    calls_text(part["excess"], signed=True) if part["excess"] else "at minimum",
                    f"{part['usd_per_million_invocations']:.3f} ({part['own_usd_per_million_invocations']:.3f})",
                ]
            )
    header = "lesson|strategy|delivery|requests counted|effect|lab probes|strategy's own|minimum|excess|"
    return markdown(header + "$ per M invocations (own)", "|---|---|---|---|---|---|---|---|---|---:|", rows)


def latency_table(result: dict) -> str:
    """Latency and throughput; every ratio to naive with its interval, or "no measurable difference"."""
    rows = []
    for row in result["strategies"].values():
        cells = [row["lesson"], row["label"]]
        for delivery in DELIVERIES:
            part = row[delivery]
            cells.append(f"{part['latency_ms']['p50']:.0f} / {part['latency_ms']['p99']:.0f}")
            if delivery == "concurrent":
                cells += [f"{part['throughput_per_s']:.0f}", ratio_text(part["throughput_ratio_to_naive"])]
            else:
                cells.append(ratio_text(part["p50_ratio_to_naive"]))
        cold = row.get("cold_start_ms")
        rows.append([*cells, f"{cold['p50']:.0f} ({cold['samples']})" if cold and cold.get("p50") is not None else "-"])
    header = (
        "lesson|strategy|first p50 / p99 ms|p50 x naive|duplicate p50 / p99 ms|p50 x naive"
        f"|{result['copies']} together p50 / p99 ms|invocations/s|x naive|cold start p50 ms (n)"
    )
    return markdown(header, "|---|---|---:|---|---:|---|---:|---:|---|---:|", rows)


def _findings(result: dict) -> list[tuple[str, str]]:
    """(where, what) for every count off its minimum and every charge the ledger disagrees with."""
    found = []
    for row in result["strategies"].values():
        found += [(f"{row['label']}, {delivery}", why) for delivery in DELIVERIES for why in row[delivery]["why"]]
        if row.get("ledger_disagreements"):
            differ = f"reported charges differ from the ledger (key: [reported, ledger]): {row['ledger_disagreements']}"
            found.append((row["label"], differ))
    return found


def notes(result: dict) -> str:
    processor = calls_text(result["processor_calls_per_charge"])
    lines = [f"- card processor, one charge without a downstream key: {processor} (measured alone)"]
    lines += [f"- {where}: {what}" for where, what in _findings(result)]
    return "\n".join([*lines, f"- prices: {result['prices']}"])


def unexplained(result: dict) -> list[str]:
    """Every count the catalogue cannot explain: empty when each strategy is at its minimum
    or off it for a documented reason (what the notebook and the tests assert)."""
    return [f"{where}: {what}" for where, what in _findings(result) if what not in KNOWN_DEVIATIONS.values()]


def minimums_table() -> str:
    """What each strategy needs at the least, from the catalogue (before anything runs)."""
    rows = [
        [s.lesson, s.label, s.pattern, calls_text(s.minimum_first), calls_text(s.minimum_duplicate), s.why_minimum]
        for s in STRATEGIES
    ]
    return markdown("lesson|strategy|pattern|first delivery|duplicate|why", "|---|---|---|---|---|---|", rows)


def chart(result: dict, path: Path) -> Path:
    """Requests per invocation by purpose, next to the minimum; latency and throughput ratios."""
    import numpy as np
    from matplotlib.figure import Figure  # no pyplot: files only, the bench runs headless

    rows, copies = list(result["strategies"].values()), result["copies"]
    compared = [r for r in rows if r["compared_with"]]
    fig = Figure(figsize=(15, 5.5))
    calls_ax, ratio_ax = fig.subplots(1, 2)
    # Three bars per strategy: first delivery, duplicate, one of the copies sent together.
    for offset, delivery, alpha in ((-0.27, "first", 1.0), (0.0, "duplicate", 0.6), (0.27, "concurrent", 0.35)):
        x, bottom, first = np.arange(len(rows)) + offset, np.zeros(len(rows)), delivery == "first"
        heights = {
            purpose: np.array([sum(r[delivery][purpose].values()) / r[delivery]["invocations"] for r in rows])
            for purpose in ("own", "effect", "probes", "minimum")
        }
        for purpose, colour in (("own", "tab:blue"), ("effect", "tab:orange"), ("probes", "tab:gray")):
            calls_ax.bar(
                x, heights[purpose], 0.27, bottom=bottom, color=colour, alpha=alpha, label=purpose if first else None
            )
            bottom += heights[purpose]
        calls_ax.scatter(
            x, heights["minimum"], marker="_", s=300, color="black", zorder=3, label="minimum (own)" if first else None
        )
    series = (
        ("first p50", "first", "p50_ratio_to_naive"),
        ("duplicate p50", "duplicate", "p50_ratio_to_naive"),
        (f"{copies} together: throughput", "concurrent", "throughput_ratio_to_naive"),
    )
    none = {"ratio": 0, "low": 0, "high": 0}  # no bar where there is no ratio
    for n, (label, delivery, ratio) in enumerate(series):
        found = [r[delivery][ratio] if (r[delivery][ratio] or {}).get("ratio") else none for r in compared]
        heights = np.array([v["ratio"] for v in found])
        # The 95 % interval on every bar: a bar whose whisker crosses 1 shows no measurable difference.
        errors = np.abs(np.array([[v["low"] for v in found], [v["high"] for v in found]]) - heights)
        ratio_ax.bar(np.arange(len(compared)) + (n - 1) * 0.27, heights, 0.27, label=label, yerr=errors, capsize=3)
    ratio_ax.axhline(1.0, color="black", linewidth=0.8)
    axes = (
        (
            calls_ax,
            rows,
            "Requests counted at the backend, by purpose",
            f"DynamoDB requests per invocation\n(bars: first, duplicate, {copies} together)",
        ),
        (
            ratio_ax,
            compared,
            "Latency and throughput against naive (1 = same; whiskers: 95 % interval)",
            "idempotent / naive of the same lesson",
        ),
    )
    for ax, shown, title, ylabel in axes:
        # Two- or three-line labels: the lesson's first word, then the strategy.
        ticks = [r["lesson"].split()[0] + "\n" + r["label"].replace(", ", ",\n") for r in shown]
        ax.set_xticks(range(len(shown)), ticks, fontsize=8)
        ax.set(title=title, ylabel=ylabel)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path
