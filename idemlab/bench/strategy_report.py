"""From counted requests to the answer a team wants: the cost of each strategy.

Each delivery's counted requests are split by purpose:
- effect: the business write the strategy protects (the card processor's ledger write
  per charge, measured on its own; the naive writer's row);
- lab probes: the fault-injection reads that only this lab's handlers make;
- own: everything else, the strategy's price; compared with its minimum, action by
  action, and every difference is named with its reason.
The backend counts each request under the table it named, so the split is measured:
the effect is what went to the strategy's effect table (the ledger, the naive rows), the
probes what went to the faults table, and the charges are checked against the ledger's
entries. Nothing here models how many requests a handler's code makes.
Then dollars per million invocations (all requests, and the strategy's own share),
latency and throughput against the naive handler of the same lesson: each ratio with its
95 % bootstrap interval over the interleaved rounds, and "no measurable difference at
this sample size" instead of a ratio when that interval contains 1 (intervals.py).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from idemlab.bench import intervals, prices
from idemlab.bench.intervals import ratio_text
from idemlab.bench.strategies import DELIVERIES, KNOWN_DEVIATIONS, PROBE_TABLE, STRATEGIES, Strategy

SHORT = {"GetItem": "Get", "PutItem": "Put", "UpdateItem": "Update", "DeleteItem": "Delete", "TransactWriteItems": "Transact"}
# First deliveries and duplicates in one sample of each delivery shape (``copies`` together: one first).
FIRSTS_AND_DUPLICATES = {
    "first": lambda copies: (1, 0), "duplicate": lambda copies: (0, 1), "concurrent": lambda copies: (1, copies - 1)
}


def _scaled(calls: dict, factor: float) -> Counter:
    return Counter({action: n * factor for action, n in calls.items() if n * factor})


def _minus(a: dict, b: dict) -> dict:
    differences = {action: a.get(action, 0) - b.get(action, 0) for action in sorted(set(a) | set(b))}
    return {action: n for action, n in differences.items() if abs(n) > 1e-9}


def attribute(strategy: Strategy, measured: dict, delivery: str, copies: int) -> dict:
    """One delivery's requests (per sample: one invocation, or one round of ``copies``) by
    purpose, each purpose from the requests counted on its own tables."""
    shape = measured[delivery]
    calls, by_table = shape["calls_per_sample"], shape["calls_by_table_per_sample"]
    invocations = shape["invocations_per_sample"]
    # A claim's write is also its check: it has no effect table.
    effect = Counter(by_table.get(strategy.effect_table, {})) if strategy.effect_table else Counter()
    probes = Counter(by_table.get(PROBE_TABLE, {}))
    own = _minus(_minus(calls, effect), probes)
    minimum = strategy.minimum(*FIRSTS_AND_DUPLICATES[delivery](copies))
    excess = _minus(own, minimum)
    why = [
        KNOWN_DEVIATIONS.get((strategy.key, action, 1 if n > 0 else -1))
        or f"unexplained: {n:+g} {action} against the stated minimum"
        for action, n in excess.items()
    ]
    return {
        "invocations": invocations,
        "effects": shape["effects_per_sample"],
        "counted": dict(calls),
        "effect": dict(effect),
        "probes": dict(probes),
        "own": own,
        "minimum": dict(minimum),
        "excess": excess,
        "why": why,
        "usd_per_million_invocations": prices.usd_per_million_invocations(_scaled(calls, 1 / invocations)),
        "own_usd_per_million_invocations": prices.usd_per_million_invocations(_scaled(own, 1 / invocations)),
    }


def report(raw: dict) -> dict:
    """Per strategy: attribution per delivery, latency and throughput ratios to naive."""
    copies = raw["copies"]
    rows = {}
    for strategy in (s for s in STRATEGIES if s.key in raw):
        measured = raw[strategy.key]
        naive = raw.get(strategy.compared_with) if strategy.compared_with else None
        row = {"lesson": strategy.lesson, "label": strategy.label, "pattern": strategy.pattern, "compared_with": strategy.compared_with}
        for delivery in DELIVERIES:
            shape, theirs = measured[delivery], naive and naive[delivery]
            part = attribute(strategy, measured, delivery, copies)
            part["latency_ms"] = shape["latency_ms"]
            part["p50_ratio_to_naive"] = _interval(shape, theirs, "round_latencies_ms", intervals.median)
            if delivery == "concurrent":
                part["throughput_per_s"] = shape["throughput_per_s"]
                throughput = _interval(shape, theirs, "round_throughput_per_s", intervals.mean, per_round=True)
                part["throughput_ratio_to_naive"] = throughput
            row[delivery] = part
        row |= {key: measured[key] for key in ("cold_start_ms", "ledger_disagreements") if key in measured}
        rows[strategy.key] = row
    return {"copies": copies, "processor_calls_per_charge": raw["processor_calls_per_charge"], "prices": prices.citation(), "strategies": rows}


def _interval(measured: dict, naive: dict | None, field: str, statistic, per_round: bool = False) -> dict | None:
    """The strategy's statistic over naive's, round by round (the rounds were interleaved)."""
    if not naive or field not in measured or field not in naive:
        return None
    mine, theirs = measured[field], naive[field]
    if per_round:  # one number per round
        mine, theirs = [[x] for x in mine], [[x] for x in theirs]
    return intervals.ratio_interval(mine, theirs, statistic)


def calls_text(calls: dict, signed: bool = False) -> str:
    """``{"GetItem": 1, "PutItem": 2}`` as "1 Get + 2 Put" (signed: "+1 Get -2 Put")."""
    calls = {action: n for action, n in calls.items() if n}
    if not calls:
        return "0"
    numbers = {action: f"{n:g}" if abs(n - round(n)) < 1e-9 else f"{n:.2f}" for action, n in calls.items()}
    if signed:
        return " ".join(f"{'+' * (n > 0)}{numbers[a]} {SHORT.get(a, a)}" for a, n in calls.items())
    return " + ".join(f"{numbers[a]} {SHORT.get(a, a)}" for a in sorted(calls))


def _row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def _markdown(header: str, align: str, rows: list[str]) -> str:
    """A table: ``header`` names the columns, "|" between them; ``align`` is the markdown separator row."""
    return "\n".join([_row(*header.split("|")), align, *rows])


def requests_table(result: dict) -> str:
    rows = []
    for row in result["strategies"].values():
        for delivery in DELIVERIES:
            part = row[delivery]
            label = f"{result['copies']} together, per round" if delivery == "concurrent" else delivery
            rows.append(_row(
                row["lesson"], row["label"], label,
                *(calls_text(part[purpose]) for purpose in ("counted", "effect", "probes", "own", "minimum")),
                calls_text(part["excess"], signed=True) if part["excess"] else "at minimum",
                f"{part['usd_per_million_invocations']:.3f} ({part['own_usd_per_million_invocations']:.3f})",
            ))
    header = "lesson|strategy|delivery|requests counted|effect|lab probes|strategy's own|minimum|excess|"
    header += "$ per M invocations (own)"
    return _markdown(header, "|---|---|---|---|---|---|---|---|---|---:|", rows)


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
        cells.append(f"{cold['p50']:.0f} ({cold['samples']})" if cold and cold.get("p50") is not None else "-")
        rows.append(_row(*cells))
    header = (
        "lesson|strategy|first p50 / p99 ms|p50 x naive|duplicate p50 / p99 ms|p50 x naive"
        f"|{result['copies']} together p50 / p99 ms|invocations/s|x naive|cold start p50 ms (n)"
    )
    return _markdown(header, "|---|---|---:|---|---:|---|---:|---:|---|---:|", rows)


def notes(result: dict) -> str:
    lines = [f"- card processor, one charge without a downstream key: {calls_text(result['processor_calls_per_charge'])} (measured alone)"]
    for row in result["strategies"].values():
        lines += [f"- {row['label']}, {delivery}: {why}" for delivery in DELIVERIES for why in row[delivery]["why"]]
        if row.get("ledger_disagreements"):
            disagreements = row["ledger_disagreements"]
            lines.append(f"- {row['label']}: reported charges differ from the ledger (key: [reported, ledger]): {disagreements}")
    lines.append(f"- prices: {result['prices']}")
    return "\n".join(lines)


def _tick(row: dict) -> str:
    """A short two- or three-line axis label: the lesson's first word, then the strategy."""
    return row["lesson"].split()[0] + "\n" + row["label"].replace(", ", ",\n")


PARTS = ("own", "effect", "probes", "minimum")  # what the requests chart draws


def chart(result: dict, path: Path) -> Path:
    """Requests per invocation by purpose, next to the minimum; latency and throughput ratios."""
    import matplotlib

    matplotlib.use("Agg")  # files only: the bench runs headless
    import matplotlib.pyplot as plt

    rows = list(result["strategies"].values())
    fig, (calls_ax, ratio_ax) = plt.subplots(1, 2, figsize=(15, 5.5))
    width = 0.27
    # Three bars per strategy: first delivery, duplicate, one of the copies sent together.
    for offset, delivery, alpha in ((-width, "first", 1.0), (0.0, "duplicate", 0.6), (width, "concurrent", 0.35)):
        positions, bottom = [i + offset for i in range(len(rows))], [0.0] * len(rows)
        per_invocation = {p: [sum(r[delivery][p].values()) / r[delivery]["invocations"] for r in rows] for p in PARTS}
        for purpose, colour in (("own", "tab:blue"), ("effect", "tab:orange"), ("probes", "tab:gray")):
            label = purpose if delivery == "first" else None
            heights = per_invocation[purpose]
            calls_ax.bar(positions, heights, width, bottom=bottom, color=colour, label=label, alpha=alpha)
            bottom = [b + h for b, h in zip(bottom, heights)]
        label = "minimum (own)" if delivery == "first" else None
        calls_ax.scatter(positions, per_invocation["minimum"], marker="_", s=300, color="black", zorder=3, label=label)
    calls_ax.set_xticks(range(len(rows)), [_tick(r) for r in rows], fontsize=8)
    calls_ax.set_title("Requests counted at the backend, by purpose")
    calls_ax.set_ylabel(f"DynamoDB requests per invocation\n(bars: first, duplicate, {result['copies']} together)")
    calls_ax.legend(fontsize=8)
    compared = [r for r in rows if r["compared_with"]]
    series = (
        ("first p50", "first", "p50_ratio_to_naive"),
        ("duplicate p50", "duplicate", "p50_ratio_to_naive"),
        (f"{result['copies']} together: throughput", "concurrent", "throughput_ratio_to_naive"),
    )
    bar = 0.8 / len(series)
    for n, (label, delivery, ratio) in enumerate(series):
        found = [r[delivery][ratio] for r in compared]
        found = [v if v and v["ratio"] is not None else None for v in found]
        heights = [v["ratio"] if v else 0 for v in found]
        # The 95 % interval on every bar: a bar whose whisker crosses 1 shows no measurable difference.
        errors = [[v["ratio"] - v["low"] if v else 0 for v in found], [v["high"] - v["ratio"] if v else 0 for v in found]]
        ratio_ax.bar([i + (n - 1) * bar for i in range(len(compared))], heights, bar, label=label, yerr=errors, capsize=3)
    ratio_ax.axhline(1.0, color="black", linewidth=0.8)
    ratio_ax.set_xticks(range(len(compared)), [_tick(r) for r in compared], fontsize=8)
    ratio_ax.set_ylabel("idempotent / naive of the same lesson")
    ratio_ax.set_title("Latency and throughput against naive (1 = same; whiskers: 95 % interval)")
    ratio_ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def unexplained(result: dict) -> list[str]:
    """Every count the catalogue cannot explain: empty when each strategy is at its minimum
    or off it for a documented reason (what the notebook and the tests assert)."""
    found = []
    for key, row in result["strategies"].items():
        for delivery in DELIVERIES:
            found += [f"{key}, {delivery}: {why}" for why in row[delivery]["why"] if why.startswith("unexplained")]
        if row.get("ledger_disagreements"):
            found.append(f"{key}: reported charges differ from the ledger: {row['ledger_disagreements']}")
    return found


def minimums_table() -> str:
    """What each strategy needs at the least, from the catalogue (before anything runs)."""
    rows = [
        _row(s.lesson, s.label, s.pattern, calls_text(s.minimum_first), calls_text(s.minimum_duplicate), s.why_minimum)
        for s in STRATEGIES
    ]
    return _markdown("lesson|strategy|pattern|first delivery|duplicate|why", "|---|---|---|---|---|---|", rows)
