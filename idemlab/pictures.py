"""Pictures drawn from the sources they describe, so they cannot drift from them.

Each picture has two halves: a function that reads its source into plain nodes and
edges (``asl_graph``, ``architecture``, ``sequence``), and a function that draws exactly
those (``draw_graph``, ``draw_sequence``). Every drawn node and arrow carries a ``gid``
(``node:<name>``, ``edge:<src>-><dst>:<kind>``, ``message:<n>``), so a test can read back
from the figure what it shows and compare it with what the source says.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from idemlab import settings

WORKFLOWS = settings.ROOT / "terraform" / "modules" / "idempotency_lab" / "workflows"

# How each kind of transition is drawn: (colour, line style).
EDGE_STYLE = {
    kind: {"color": colour, "linestyle": style}
    for kind, colour, style in (
        ("next", "black", "-"), ("choice", "tab:blue", "-"), ("default", "tab:blue", "--"), ("catch", "tab:red", ":"),
        ("retry", "tab:orange", "-"), ("branch", "tab:green", "-."), ("uses", "grey", "-"), ("watches", "tab:red", ":"),
        ("starts", "tab:purple", "-"), ("transition", "black", "-"),
    )
}


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
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(width, height))
    return ax


def lanes(ax, names: list[str], xlabel: str, title: str = "") -> dict[str, int]:
    """One lane per name, top to bottom, over a shared x axis; each name's lane."""
    ax.set_yticks(range(len(names)), names)
    ax.set_ylim(len(names) - 0.3, -0.7)
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    return {name: lane for lane, name in enumerate(names)}


# How a lane marks an outcome: accepted (green dot), refused (red cross), a note (grey).
OUTCOME_LOOK = {True: ("#55a868", "o"), False: ("#c44e52", "X"), None: ("#777777", "d")}


def mark(ax, x: float, y: float, outcome: bool | None, label: str, dy: float, fontsize: str) -> None:
    """A mark in a lane for an outcome, labelled ``dy`` above or below it."""
    colour, marker = OUTCOME_LOOK[outcome]
    ax.plot(x, y, marker=marker, color=colour, markersize=10, zorder=3)
    ax.annotate(label, (x, y + dy), fontsize=fontsize, ha="center", va="center", color=colour)


# ---------------------------------------------------------------- workflow graphs


def workflow_files() -> dict[str, Path]:
    """Every ASL file of the module, by its name without ``.asl.json``."""
    return {path.name.removesuffix(".asl.json"): path for path in sorted(WORKFLOWS.glob("*.asl.json"))}


def load_asl(path: Path) -> dict:
    # Terraform fills ${...} placeholders in; they sit inside JSON strings, so the
    # template parses as it is.
    return json.loads(Path(path).read_text())


def asl_graph(definition: dict, title: str = "") -> Graph:
    """States and transitions of an ASL definition: Next, Choice rules and Default,
    Catch, Retry (a loop on the state, labelled with its attempts) and the branches
    of Parallel and Map states."""
    graph = Graph(title=title, start=definition["StartAt"])
    _add_states(graph, definition["States"])
    return graph


def _add_states(graph: Graph, states: dict) -> None:
    for name, state in states.items():
        kind = state["Type"]
        graph.nodes[name] = "End" if state.get("End") and kind not in ("Succeed", "Fail") else kind
        if "Next" in state:
            graph.edges.append((name, state["Next"], "next", ""))
        for rule in state.get("Choices", []):
            graph.edges.append((name, rule["Next"], "choice", _choice_label(rule)))
        if "Default" in state:
            graph.edges.append((name, state["Default"], "default", "default"))
        for catcher in state.get("Catch", []):
            graph.edges.append((name, catcher["Next"], "catch", ",".join(catcher["ErrorEquals"])))
        attempts = sum(int(retrier.get("MaxAttempts", 3)) for retrier in state.get("Retry", []))
        if attempts:
            graph.edges.append((name, name, "retry", f"retry x{attempts}"))
        branches = list(state.get("Branches", []))
        if "Iterator" in state or "ItemProcessor" in state:
            branches.append(state.get("ItemProcessor") or state["Iterator"])
        for branch in branches:
            graph.edges.append((name, branch["StartAt"], "branch", "branch"))
            _add_states(graph, branch["States"])


def _choice_label(rule: dict) -> str:
    for key, value in rule.items():
        if key not in ("Variable", "Next") and not isinstance(value, (list, dict)):
            return f"{rule.get('Variable', '')} {key} {value}".replace("$.", "").strip()
    return "rule"


def workflow_graph(name: str) -> Graph:
    """The graph of one of the module's workflows (``account_deletion``, ...)."""
    return asl_graph(load_asl(workflow_files()[name]), title=f"{name} (from {name}.asl.json)")


NODE_COLOURS = {
    "Task": "#dbe9f6", "Choice": "#fff2cc", "Succeed": "#d9ead3", "Fail": "#f4cccc",
    "Pass": "#eeeeee", "Parallel": "#d9d2e9", "Map": "#d9d2e9", "Wait": "#eeeeee", "End": "#d9ead3",
}


def draw_graph(graph: Graph, ax=None, positions: dict[str, tuple[float, float]] | None = None, legend_loc: str = "upper right"):
    """Draw ``graph``: boxes for nodes, arrows for edges, coloured by kind."""
    import matplotlib.pyplot as plt

    positions = positions or _layered_positions(graph)
    rows = Counter(y for _, y in positions.values())
    ax = axes(ax, max(8, 2.2 * max(rows.values())), 0.9 * (1 + len(rows)))
    for name, kind in graph.nodes.items():
        x, y = positions[name]
        ax.text(
            x, y, name, ha="center", va="center", fontsize=8, gid=f"node:{name}",
            bbox={"boxstyle": "round,pad=0.3", "facecolor": NODE_COLOURS.get(kind, "white"), "edgecolor": "grey"},
        )
    for src, dst, kind, label in graph.edges:
        style = EDGE_STYLE[kind]
        (x1, y1), (x2, y2) = positions[src], positions[dst]
        if src == dst:
            arrow = ax.annotate(
                "", xy=(x1 + 0.25, y1 + 0.12), xytext=(x1 + 0.25, y1 - 0.12),
                arrowprops={"arrowstyle": "->", "connectionstyle": "arc3,rad=-1.6", **style},
            )
            ax.text(x1 + 0.45, y1, label, fontsize=6, color=style["color"], va="center")
        else:
            bend = 0.0 if abs(y2 - y1) > 0 and abs(x2 - x1) < 0.01 else 0.15
            arrow = ax.annotate(
                "", xy=(x2, y2), xytext=(x1, y1),
                arrowprops={"arrowstyle": "->", "shrinkA": 12, "shrinkB": 12, "connectionstyle": f"arc3,rad={bend}", **style},
            )
        arrow.set_gid(f"edge:{src}->{dst}:{kind}")
    xs, ys = zip(*positions.values())
    ax.set_xlim(min(xs) - 1.2, max(xs) + 1.2)
    ax.set_ylim(min(ys) - 0.6, max(ys) + 0.6)
    ax.set_axis_off()
    handles = [
        plt.Line2D([], [], color=EDGE_STYLE[kind]["color"], linestyle=EDGE_STYLE[kind]["linestyle"], label=kind)
        for kind in dict.fromkeys(kind for _, _, kind, _ in graph.edges)
    ]
    if handles:
        ax.legend(handles=handles, loc=legend_loc, fontsize=7, frameon=False)
    if graph.title:
        ax.set_title(graph.title, fontsize=10)
    return ax


def _layered_positions(graph: Graph) -> dict[str, tuple[float, float]]:
    """A row per depth from the start (breadth first), centred."""
    depth: dict[str, int] = {}
    frontier, level = [graph.start] if graph.start else [], 0
    while frontier:
        depth.update(dict.fromkeys(frontier, level))
        level += 1
        # Error paths (Catch) do not set the depth: they are drawn to the side.
        frontier = list(dict.fromkeys(
            dst for src, dst, kind, _ in graph.edges
            if src in frontier and kind != "catch" and dst in graph.nodes and dst not in depth
        ))
    positions = {}
    for level in set(depth.values()):
        members = [node for node in graph.nodes if depth.get(node) == level]
        positions.update({node: (2.2 * (i - (len(members) - 1) / 2), -float(level)) for i, node in enumerate(members)})
    # What only an error path reaches (and what follows it) goes in a column on the right.
    side = [node for node in graph.nodes if node not in depth]
    right = max((x for x, _ in positions.values()), default=0.0) + 2.6
    for i, node in enumerate(side):
        positions[node] = (right + 2.2 * (i % 2), -1.0 - 1.2 * (i // 2) - 0.5 * (i % 2))
    return positions


def drawn(ax) -> dict[str, set]:
    """What a figure shows, read back from its artists' gids: nodes, edges, messages."""
    found: dict[str, set] = {"nodes": set(), "edges": set(), "messages": set()}
    for artist in ax.get_children():
        gid = artist.get_gid() or ""
        if gid.startswith("node:"):
            found["nodes"].add(gid.removeprefix("node:"))
        elif gid.startswith("edge:"):
            body, kind = gid.removeprefix("edge:").rsplit(":", 1)
            src, dst = body.split("->", 1)
            found["edges"].add((src, dst, kind))
        elif gid.startswith("message:"):
            found["messages"].add(gid.removeprefix("message:"))
    return found


# ---------------------------------------------------------------- a deletion request's states


def request_states(transitions=None) -> Graph:
    """The deletion request's statuses and the writes that move it between them, from
    ``deletion_state.TRANSITIONS``: the table each conditional write takes its allowed
    source statuses from."""
    if transitions is None:
        from idemlab.lessons import deletion

        transitions = deletion.import_function_module("deletion_state").TRANSITIONS
    graph = Graph(title="deletion request states (from deletion_state.TRANSITIONS)", start="SCHEDULED")
    labels: dict[tuple[str, str], list[str]] = {}
    for source, target, by in transitions:
        for status in (source, target):
            graph.nodes.setdefault(str(status), "State")
        labels.setdefault((str(source), str(target)), []).append(by)
    for status in ("COMPLETED", "CANCELLED"):  # final: nothing moves them on
        if status in graph.nodes and not any(src == status for src, _ in labels):
            graph.nodes[status] = "Succeed"
    for (source, target), bys in labels.items():
        graph.edges.append((source, target, "transition", ", ".join(dict.fromkeys(bys))))
    return graph


# ---------------------------------------------------------------- the deployed architecture

_PLACEHOLDER = re.compile(r"\$\{(\w+?)_arn\}")
KINDS = ("schedule_group", "state_machines", "functions", "tables", "queues", "alarms")


def architecture(outputs: dict, workflows: dict[str, Path] | None = None) -> Graph:
    """The deployed resources from the stack's ``lab`` outputs, with the links the
    sources state: a state machine uses the functions its ASL names, an alarm watches
    the queue of the same key, the schedule group's schedules start the workflow that
    Scheduler targets (every Standard workflow whose ASL names a claim step)."""
    workflows = workflow_files() if workflows is None else workflows
    graph = Graph(title="The deployed lab (from the stack's `lab` outputs)")
    if outputs.get("schedule_group"):
        graph.nodes[f"schedules: {outputs['schedule_group']}"] = "schedule_group"
    for kind in KINDS[1:]:
        for key in sorted(outputs.get(kind) or {}):
            # An alarm shares its key with the queue it watches: name it apart.
            graph.nodes[f"alarm {key}" if kind == "alarms" else key] = kind
    for machine in sorted(outputs.get("state_machines") or {}):
        # Its ASL file: the longest workflow name the machine's key starts with.
        matches = [name for name in workflows if machine.startswith(name)]
        if not matches:
            continue
        asl = workflows[max(matches, key=len)].read_text()
        for function in sorted(set(_PLACEHOLDER.findall(asl))):
            if function in (outputs.get("functions") or {}):
                graph.edges.append((machine, function, "uses", ""))
        if "claim" in asl and outputs.get("schedule_group"):
            graph.edges.append((f"schedules: {outputs['schedule_group']}", machine, "starts", ""))
    for alarm in sorted(outputs.get("alarms") or {}):
        if alarm in (outputs.get("queues") or {}):
            graph.edges.append((f"alarm {alarm}", alarm, "watches", ""))
    return graph


def draw_architecture(outputs: dict, ax=None):
    """One column per kind of resource, left to right in the order requests flow."""
    graph = architecture(outputs)
    positions = {}
    for column, kind in enumerate(KINDS):
        for row, name in enumerate(name for name, k in graph.nodes.items() if k == kind):
            positions[name] = (3.0 * column, -0.55 * row)
    ax = axes(ax, 16, max(3, 0.42 * max(Counter(graph.nodes.values()).values(), default=0) + 1))
    draw_graph(graph, ax=ax, positions=positions, legend_loc="lower right")
    for column, kind in enumerate(KINDS):
        ax.text(3.0 * column, 0.55, kind.replace("_", " "), ha="center", fontsize=9, weight="bold")
    ax.set_ylim(ax.get_ylim()[0], 0.9)
    return ax


# ---------------------------------------------------------------- sequence diagrams

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
    parties = set(spec["participants"])
    for sender, receiver, what in spec["messages"]:
        unknown = {sender, receiver} - parties
        if unknown:
            raise ValueError(f"message {what!r} names undeclared participants {sorted(unknown)}")
    return [tuple(m) for m in spec["messages"]]


def draw_sequence(spec: dict, ax=None):
    """Lifelines for the participants, one arrow per message, top to bottom."""
    messages = sequence(spec)
    column = {name: i for i, name in enumerate(spec["participants"])}
    ax = axes(ax, 9, 0.45 * len(messages) + 1.4)
    bottom = -(len(messages) + 0.5)
    for name, x in column.items():
        ax.text(x, 0.6, name, ha="center", fontsize=9, gid=f"node:{name}",
                bbox={"boxstyle": "round", "facecolor": "#dbe9f6", "edgecolor": "grey"})
        ax.plot([x, x], [0.3, bottom], color="grey", linewidth=0.8)
    for n, (sender, receiver, what) in enumerate(messages):
        y = -(n + 0.5)
        arrow = ax.annotate("", xy=(column[receiver], y), xytext=(column[sender], y),
                            arrowprops={"arrowstyle": "->", "color": "tab:red" if "second" in what else "black"})
        arrow.set_gid(f"message:{n}:{sender}->{receiver}:{what}")
        ax.text((column[sender] + column[receiver]) / 2, y + 0.12, what, ha="center", fontsize=7)
    ax.set_xlim(-0.7, len(column) - 0.3)
    ax.set_ylim(bottom - 0.2, 1.0)
    ax.set_axis_off()
    ax.set_title(spec.get("title", ""), fontsize=10)
    return ax
