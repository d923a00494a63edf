"""Pictures drawn from the sources they describe, so they cannot drift from them.

Each picture has two halves: a function that reads its source into plain nodes and edges
(``asl_graph``, ``request_states``, ``architecture``, ``sequence``), and one that draws exactly
those (``draw_graph``, ``draw_sequence``). Lesson 2's charts draw the checkouts' own answers
and the ledger's counts (``draw_checkout_timeline``, ``draw_checkout_charges``). Every drawn
node and arrow carries a ``gid`` (``node:<name>``, ``edge:<src>-><dst>:<kind>``,
``message:<n>:...``), so a test can read back from the figure what it shows and compare it with
what the source says (tests/harness/test_pictures.py).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from idemlab import lambda_code, module_spec, settings

# How each kind of transition is drawn: (colour, line style).
EDGE_STYLE = {
    "next": ("black", "-"),
    "choice": ("tab:blue", "-"),
    "default": ("tab:blue", "--"),
    "catch": ("tab:red", ":"),
    "retry": ("tab:orange", "-"),
    "branch": ("tab:green", "-."),
    "uses": ("grey", "-"),
    "watches": ("tab:red", ":"),
    "starts": ("tab:purple", "-"),
    "transition": ("black", "-"),
}
NODE_COLOURS = {
    "Task": "#dbe9f6",
    "Choice": "#fff2cc",
    "Succeed": "#d9ead3",
    "Fail": "#f4cccc",
    "Pass": "#eeeeee",
    "Parallel": "#d9d2e9",
    "Map": "#d9d2e9",
    "Wait": "#eeeeee",
    "End": "#d9ead3",
}
# How a lane marks an outcome: accepted (green dot), refused (red cross), a note (grey).
OUTCOME_LOOK = {True: ("#55a868", "o"), False: ("#c44e52", "X"), None: ("#777777", "d")}


@dataclass
class Graph:
    """Nodes (name -> kind) and directed edges (source, target, kind, label)."""

    title: str
    nodes: dict[str, str] = field(default_factory=dict)
    edges: list[tuple[str, str, str, str]] = field(default_factory=list)
    start: str | None = None

    def edge_set(self) -> set[tuple[str, str, str]]:
        return {(src, dst, kind) for src, dst, kind, _ in self.edges}


def axes(ax, width: float, height: float):
    """``ax``, or the axes of a new figure ``width`` by ``height`` inches."""
    import matplotlib.pyplot as plt  # here, not above: importing this module does not load matplotlib

    return plt.subplots(figsize=(width, height))[1] if ax is None else ax


def lanes(ax, names: list[str], xlabel: str, title: str = "") -> dict[str, int]:
    """One lane per name, top to bottom, over a shared x axis; each name's lane."""
    ax.set_yticks(range(len(names)), names)
    ax.set(ylim=(len(names) - 0.3, -0.7), xlabel=xlabel, title=title)
    return {name: lane for lane, name in enumerate(names)}


def mark(ax, x: float, y: float, outcome: bool | None, label: str, dy: float, fontsize: str) -> None:
    """A mark in a lane for an outcome, labelled ``dy`` above or below it."""
    colour, marker = OUTCOME_LOOK[outcome]
    ax.plot(x, y, marker=marker, color=colour, markersize=10, zorder=3)
    ax.annotate(label, (x, y + dy), fontsize=fontsize, ha="center", va="center", color=colour)


def _box(ax, x: float, y: float, name: str, colour: str, fontsize: int) -> None:
    bbox = {"boxstyle": "round,pad=0.3", "facecolor": colour, "edgecolor": "grey"}
    ax.text(x, y, name, ha="center", va="center", fontsize=fontsize, gid=f"node:{name}", bbox=bbox)


def asl_graph(definition: dict, title: str = "", graph: Graph | None = None) -> Graph:
    """States and transitions of an ASL definition: Next, Choice rules and Default, Catch,
    Retry (a loop on the state, labelled with its attempts) and the branches of Parallel
    and Map states, drawn into the same ``graph``."""
    graph = Graph(title=title, start=definition["StartAt"]) if graph is None else graph
    for name, state in definition["States"].items():
        graph.nodes[name] = "End" if state.get("End") and state["Type"] not in ("Succeed", "Fail") else state["Type"]
        targets = [(state.get("Next"), "next"), *[(rule["Next"], "choice") for rule in state.get("Choices", [])]]
        targets += [(state.get("Default"), "default"), *[(catch["Next"], "catch") for catch in state.get("Catch", [])]]
        graph.edges += [(name, target, how, "") for target, how in targets if target]
        if attempts := sum(int(retrier.get("MaxAttempts", 3)) for retrier in state.get("Retry", [])):
            graph.edges.append((name, name, "retry", f"retry x{attempts}"))
        for branch in [*state.get("Branches", []), *[state[k] for k in ("ItemProcessor", "Iterator") if k in state]]:
            graph.edges.append((name, branch["StartAt"], "branch", ""))
            asl_graph(branch, graph=graph)
    return graph


def workflow_graph(name: str) -> Graph:
    """The graph of one of the module's workflows (``account_deletion``, ...)."""
    return asl_graph(module_spec.workflows()[name], title=f"{name} (from {name}.asl.json)")


def request_states(transitions=None) -> Graph:
    """The deletion request's statuses and the writes that move it between them, from
    ``erasure.state.TRANSITIONS``: the table each conditional write takes its allowed
    source statuses from. A status nothing moves on from is final."""
    if transitions is None:
        transitions = lambda_code.load(settings.ROOT / "functions" / "deletion", "erasure.state").TRANSITIONS
    writes: dict[tuple[str, str], list[str]] = {}
    for source, target, by in transitions:
        writes.setdefault((str(source), str(target)), []).append(by)
    sources = {source for source, _ in writes}
    # A status no transition leaves is an end state, drawn as a Succeed box.
    nodes = {}
    for source, target in writes:
        for status in (source, target):
            nodes[status] = "State" if status in sources else "Succeed"
    # One edge per (source, target), labelled with every function that writes it.
    edges = [(source, target, "transition", ", ".join(dict.fromkeys(bys))) for (source, target), bys in writes.items()]
    return Graph(
        title="deletion request states (from erasure.state.TRANSITIONS)",
        start="SCHEDULED",
        nodes=nodes,
        edges=edges,
    )


KINDS = ("schedule_group", "state_machines", "functions", "tables", "queues", "alarms")


def architecture(outputs: dict) -> Graph:
    """The deployed resources from the stack's ``lab`` outputs, linked as the module declares
    them: a state machine uses the functions it invokes (``workflows.tf``), the schedule
    group's schedules start the workflows Scheduler's role may start (``iam.tf``), and an
    alarm watches the queue of the same key."""
    graph = Graph(title="The deployed lab (from the stack's `lab` outputs)")
    deployed = {kind: outputs.get(kind) or {} for kind in KINDS[1:]}
    group = f"schedules: {outputs['schedule_group']}" if outputs.get("schedule_group") else None
    graph.nodes.update({group: "schedule_group"} if group else {})
    for kind, names in deployed.items():  # an alarm shares its key with the queue it watches: named apart
        graph.nodes.update({f"alarm {key}" if kind == "alarms" else key: kind for key in sorted(names)})
    declared = module_spec.default("workflows")
    scheduled = module_spec.scheduler_starts()
    for machine in sorted(deployed["state_machines"]):
        invokes = declared.get(machine, {}).get("invokes", [])
        graph.edges += [(machine, function, "uses", "") for function in invokes if function in deployed["functions"]]
        graph.edges += [(group, machine, "starts", "")] if group and machine in scheduled else []
    watched = sorted(set(deployed["alarms"]) & set(deployed["queues"]))
    graph.edges += [(f"alarm {key}", key, "watches", "") for key in watched]
    return graph


def draw_graph(graph: Graph, ax=None, positions: dict[str, tuple] | None = None, legend_loc: str = "upper right"):
    """Draw ``graph``: boxes for nodes, arrows for edges coloured by kind, with their labels."""
    from matplotlib.lines import Line2D

    positions = positions or _layered_positions(graph)
    rows = Counter(y for _, y in positions.values())
    ax = axes(ax, max(8, 2.2 * max(rows.values())), 0.9 * (1 + len(rows)))
    for name, kind in graph.nodes.items():
        _box(ax, *positions[name], name, NODE_COLOURS.get(kind, "white"), fontsize=8)
    for src, dst, kind, label in graph.edges:
        colour, linestyle = EDGE_STYLE[kind]
        (x1, y1), (x2, y2) = positions[src], positions[dst]
        loop = src == dst  # a retry, or a write that keeps the status: a small loop right of the box
        if loop:
            tail = (x1 + 0.25, y1 - 0.12)
            head = (x1 + 0.25, y1 + 0.12)
        else:
            tail = (x1, y1)
            head = (x2, y2)
        bend, shrink = (-1.6, 2) if loop else (0.0 if abs(x2 - x1) < 0.01 else 0.15, 12)
        ax.annotate(
            "",
            xy=head,
            xytext=tail,
            gid=f"edge:{src}->{dst}:{kind}",
            arrowprops={
                "arrowstyle": "->",
                "shrinkA": shrink,
                "shrinkB": shrink,
                "color": colour,
                "linestyle": linestyle,
                "connectionstyle": f"arc3,rad={bend}",
            },
        )
        if label:  # on the curve, halfway to the arc's control point, so two opposite arrows part
            x, y = (x1 + 0.45, y1) if loop else ((x1 + x2 + bend * (y2 - y1)) / 2, (y1 + y2 - bend * (x2 - x1)) / 2)
            ax.text(x, y, label, fontsize=6, color=colour, ha="left" if loop else "center", va="center")
    xs, ys = zip(*positions.values(), strict=True)
    ax.set(xlim=(min(xs) - 1.2, max(xs) + 1.2), ylim=(min(ys) - 0.6, max(ys) + 0.6))
    ax.set_axis_off()
    kinds = dict.fromkeys(kind for _, _, kind, _ in graph.edges)
    lines = [Line2D([], [], color=EDGE_STYLE[k][0], linestyle=EDGE_STYLE[k][1], label=k) for k in kinds]
    ax.legend(handles=lines, loc=legend_loc, fontsize=7, frameon=False)
    ax.set_title(graph.title, fontsize=10)
    return ax


def _layered_positions(graph: Graph) -> dict[str, tuple[float, float]]:
    """A row per depth from the start (breadth first, not along error paths), centred; what
    only an error path reaches goes in a column on the right."""
    depth: dict[str, int] = {}
    frontier = [graph.start] if graph.start else []
    while frontier:
        depth.update(dict.fromkeys(frontier, max(depth.values(), default=-1) + 1))
        reached = []
        for src, dst, kind, _ in graph.edges:
            if src in frontier and kind != "catch" and dst in graph.nodes and dst not in depth:
                reached.append(dst)
        frontier = list(dict.fromkeys(reached))
    rows = [[node for node in graph.nodes if depth.get(node) == level] for level in sorted(set(depth.values()))]
    positions = {}
    for y, row in enumerate(rows):
        for i, node in enumerate(row):
            positions[node] = (2.2 * (i - (len(row) - 1) / 2), -float(y))  # centred on x = 0
    right = max((x for x, _ in positions.values()), default=0.0) + 2.6
    for i, node in enumerate(node for node in graph.nodes if node not in depth):
        positions[node] = (right + 2.2 * (i % 2), -1.0 - 1.2 * (i // 2) - 0.5 * (i % 2))
    return positions


def draw_architecture(outputs: dict, ax=None):
    """One column per kind of resource, left to right in the order requests flow."""
    graph = architecture(outputs)
    columns = [[name for name, k in graph.nodes.items() if k == kind] for kind in KINDS]
    positions = {name: (3.0 * x, -0.55 * y) for x, names in enumerate(columns) for y, name in enumerate(names)}
    ax = axes(ax, 16, max(3, 0.42 * max(map(len, columns)) + 1))
    draw_graph(graph, ax=ax, positions=positions, legend_loc="lower right")
    for column, kind in enumerate(KINDS):
        ax.text(3.0 * column, 0.55, kind.replace("_", " "), ha="center", fontsize=9, weight="bold")
    ax.set_ylim(ax.get_ylim()[0], 0.9)
    return ax


# The steps of a checkout answer's trace (functions/checkout), and their colours.
STEP_COLOURS = {"check": "#4c72b0", "charge": "#c44e52", "record": "#55a868"}


def draw_checkout_timeline(answers: list[dict], title: str = "", ax=None):
    """Lesson 2: one row per checkout invocation; the check, charge and record bars of its
    answer's step trace on a shared time axis."""
    import matplotlib.pyplot as plt

    ax = axes(ax, 9, 0.5 + 0.45 * len(answers))
    labels = [f"copy {i + 1} (pid {a.get('pid', '?')}): {a['outcome']}" for i, a in enumerate(answers)]
    lanes(ax, labels, "milliseconds since the first step of any copy", title)
    origin = min((step["start"] for answer in answers for step in answer.get("trace", [])), default=0.0)
    for row, answer in enumerate(answers):
        for step in answer.get("trace", []):
            begin_ms = (step["start"] - origin) * 1000
            width_ms = max((step["end"] - step["start"]) * 1000, 1.0)
            ax.broken_barh([(begin_ms, width_ms)], (row - 0.35, 0.7), color=STEP_COLOURS[step["step"]])
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour) for colour in STEP_COLOURS.values()]
    ax.legend(handles, list(STEP_COLOURS), loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    return ax


def draw_checkout_charges(results: dict[str, list[int]], copies: int, ax=None):
    """Lesson 2: charges per round for each strategy, as the ledger counted them: one is
    right, more is a double charge."""
    ax = axes(ax, 9, 3.5)
    names = list(results)
    bottom = [0] * len(results)
    for label, colour, rounds_of in (
        ("charged once", "#55a868", lambda n: n == 1),
        ("charged more than once", "#c44e52", lambda n: n > 1),
        ("never charged", "#999999", lambda n: n == 0),
    ):
        heights = [sum(map(rounds_of, results[name])) for name in names]
        ax.bar(names, heights, bottom=bottom, color=colour, label=label)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    for x, name in enumerate(names):
        ax.annotate(
            f"{sum(results[name])} charges", (x, len(results[name])), ha="center", va="bottom", fontsize="small"
        )
    ax.set(ylabel=f"rounds of {copies} identical requests", ylim=(0, max(len(r) for r in results.values()) * 1.2))
    ax.legend(loc="upper left", fontsize="small", bbox_to_anchor=(1.0, 1.0))
    ax.tick_params(axis="x", labelrotation=15)
    return ax


# Two copies of one request, the table and the card processor. Each message is
# (sender, receiver, what); the check-then-act copy reads before anyone has written.
COPIES = ["copy A", "idempotency table", "copy B", "card processor"]
CHECK_THEN_ACT = {
    "title": "check-then-act: both copies check before either records",
    "participants": COPIES,
    "messages": [
        *[(copy, "idempotency table", "GetItem(key)") for copy in ("copy A", "copy B")],
        *[("idempotency table", copy, "absent") for copy in ("copy A", "copy B")],
        ("copy A", "card processor", "charge"),
        ("copy B", "card processor", "charge (second charge)"),
        *[(copy, "idempotency table", "PutItem(key, result)") for copy in ("copy A", "copy B")],
    ],
}
CLAIM_FIRST = {
    "title": "claim first: one conditional put decides, the loser charges nothing",
    "participants": COPIES,
    "messages": [
        *[(copy, "idempotency table", "PutItem(key, INPROGRESS) if absent") for copy in ("copy A", "copy B")],
        ("idempotency table", "copy A", "ok: A holds the key"),
        ("idempotency table", "copy B", "ConditionalCheckFailed: in progress"),
        ("copy A", "card processor", "charge"),
        ("copy A", "idempotency table", "UpdateItem(key, COMPLETED, result)"),
    ],
}


def sequence(spec: dict) -> list[tuple[str, str, str]]:
    """The messages of a sequence description, checked: every party is declared."""
    for sender, receiver, what in spec["messages"]:
        if unknown := {sender, receiver} - set(spec["participants"]):
            raise ValueError(f"message {what!r} names undeclared participants {sorted(unknown)}")
    return [tuple(message) for message in spec["messages"]]


def draw_sequence(spec: dict, ax=None):
    """Lifelines for the participants, one arrow per message, top to bottom."""
    messages = sequence(spec)
    column = {name: i for i, name in enumerate(spec["participants"])}
    ax = axes(ax, 9, 0.45 * len(messages) + 1.4)
    bottom = -(len(messages) + 0.5)
    for name, x in column.items():
        _box(ax, x, 0.6, name, "#dbe9f6", fontsize=9)
    ax.vlines(list(column.values()), bottom, 0.3, color="grey", linewidth=0.8)
    for n, (sender, receiver, what) in enumerate(messages):
        ax.annotate(
            "",
            xy=(column[receiver], -(n + 0.5)),
            xytext=(column[sender], -(n + 0.5)),
            gid=f"message:{n}:{sender}->{receiver}:{what}",
            arrowprops={"arrowstyle": "->", "color": "tab:red" if "second" in what else "black"},
        )
        ax.text((column[sender] + column[receiver]) / 2, 0.12 - (n + 0.5), what, ha="center", fontsize=7)
    ax.set(xlim=(-0.7, len(column) - 0.3), ylim=(bottom - 0.2, 1.0))
    ax.set_axis_off()
    ax.set_title(spec.get("title", ""), fontsize=10)
    return ax
