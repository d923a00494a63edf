"""Every picture is drawn from its source: change the source, and the picture follows.

Each test reads back from the figure (the gids of its artists) what it shows and
compares it with what the source says, parsed here on its own terms.
"""

import copy
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

from idemlab import module_spec, pictures


def drawn(ax) -> dict[str, set]:
    """What a figure shows, read back from its artists' gids: nodes, edges, messages."""
    found: dict[str, set] = {"nodes": set(), "edges": set(), "messages": set()}
    for artist in ax.get_children():
        kind, _, what = (artist.get_gid() or "").partition(":")
        if kind == "edge":  # <src>-><dst>:<kind>; a source may hold a colon ("schedules: ...")
            found["edges"].add(re.fullmatch(r"(.*?)->(.*):(\w+)", what).groups())
        elif f"{kind}s" in found:
            found[f"{kind}s"].add(what)
    return found


def transitions_in(states: dict) -> set[tuple[str, str, str]]:
    """The transitions of an ASL States object, read independently of pictures.py."""
    found = set()
    for name, state in states.items():
        if "Next" in state:
            found.add((name, state["Next"], "next"))
        found |= {(name, rule["Next"], "choice") for rule in state.get("Choices", [])}
        if "Default" in state:
            found.add((name, state["Default"], "default"))
        found |= {(name, c["Next"], "catch") for c in state.get("Catch", [])}
        if any(r.get("MaxAttempts", 3) for r in state.get("Retry", [])):
            found.add((name, name, "retry"))
        for branch in state.get("Branches", []):
            found.add((name, branch["StartAt"], "branch"))
            found |= transitions_in(branch["States"])
    return found


def all_states(states: dict) -> set[str]:
    names = set(states)
    for state in states.values():
        for branch in state.get("Branches", []):
            names |= all_states(branch["States"])
    return names


@pytest.mark.parametrize("name", sorted(module_spec.workflows()))
def test_workflow_picture_shows_every_state_and_transition_of_its_asl(name):
    definition = module_spec.workflows()[name]
    ax = pictures.draw_graph(pictures.workflow_graph(name))
    shown = drawn(ax)
    plt.close("all")
    assert shown["nodes"] == all_states(definition["States"])
    assert shown["edges"] == transitions_in(definition["States"])


def test_workflow_picture_follows_a_state_added_to_the_asl():
    definition = module_spec.workflows()["account_deletion"]
    changed = copy.deepcopy(definition)
    # A new state between Complete and the end, with a Parallel of two branches.
    changed["States"]["Complete"].pop("End")
    changed["States"]["Complete"]["Next"] = "Audit"
    changed["States"]["Audit"] = {
        "Type": "Parallel",
        "Branches": [
            {"StartAt": "LogIt", "States": {"LogIt": {"Type": "Pass", "End": True}}},
            {"StartAt": "CountIt", "States": {"CountIt": {"Type": "Pass", "End": True}}},
        ],
        "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "CloseAfterFailure"}],
        "End": True,
    }
    shown = drawn(pictures.draw_graph(pictures.asl_graph(changed)))
    plt.close("all")
    assert {"Audit", "LogIt", "CountIt"} <= shown["nodes"]
    assert {
        ("Complete", "Audit", "next"),
        ("Audit", "LogIt", "branch"),
        ("Audit", "CountIt", "branch"),
        ("Audit", "CloseAfterFailure", "catch"),
    } <= shown["edges"]
    assert shown["edges"] == transitions_in(changed["States"])


def lab_outputs():
    return {
        "schedule_group": "lab-deletions",
        "tables": {"deletion_requests": "lab-deletion-requests", "outbox": "lab-outbox"},
        "functions": {"claim_deletion": "lab-claim", "delete_records": "lab-records", "sweeper": "lab-sweeper"},
        "state_machines": {"account_deletion": "arn:aws:states:::stateMachine:lab-deletion"},
        "queues": {"deletion_dlq": "https://queue/lab-deletion-dlq"},
        "alarms": {"deletion_dlq": "lab-deletion-dlq-not-empty"},
    }


def test_architecture_shows_every_resource_in_the_outputs_and_follows_a_new_one():
    outputs = lab_outputs()
    shown = drawn(pictures.draw_architecture(outputs))
    assert {
        "claim_deletion",
        "delete_records",
        "sweeper",
        "deletion_requests",
        "outbox",
        "account_deletion",
        "deletion_dlq",
        "alarm deletion_dlq",
        "schedules: lab-deletions",
    } == shown["nodes"]
    # The ASL names claim_deletion and delete_records, not the sweeper.
    assert ("account_deletion", "claim_deletion", "uses") in shown["edges"]
    assert ("account_deletion", "sweeper", "uses") not in shown["edges"]
    assert ("alarm deletion_dlq", "deletion_dlq", "watches") in shown["edges"]
    outputs["queues"]["orders"] = "https://queue/lab-orders"
    outputs["functions"]["send_goodbye"] = "lab-goodbye"
    shown = drawn(pictures.draw_architecture(outputs))
    plt.close("all")
    assert {"orders", "send_goodbye"} <= shown["nodes"]
    assert ("account_deletion", "send_goodbye", "uses") in shown["edges"]


def test_a_workflow_uses_the_functions_workflows_tf_binds_to_it():
    """Both vehicle workflows share one ASL, whose ${write_vehicle_arn} workflows.tf binds
    to a different function in each."""
    names = ["rmv_check", "write_vehicle_naive", "write_vehicle_idempotent", "notify"]
    machines = ["vehicle_registration_naive", "vehicle_registration_idempotent"]
    graph = pictures.architecture({"state_machines": dict.fromkeys(machines), "functions": dict.fromkeys(names)})
    assert {(m, f) for m, f, kind in graph.edge_set() if kind == "uses"} == {
        *[(machine, function) for machine in machines for function in ("rmv_check", "notify")],
        ("vehicle_registration_naive", "write_vehicle_naive"),
        ("vehicle_registration_idempotent", "write_vehicle_idempotent"),
    }


@pytest.mark.parametrize("spec", [pictures.CHECK_THEN_ACT, pictures.CLAIM_FIRST], ids=["check_then_act", "claim_first"])
def test_sequence_picture_draws_each_message_of_its_description_in_order(spec):
    changed = copy.deepcopy(spec)
    changed["messages"].append(("copy B", "idempotency table", "one more"))
    for description in (spec, changed):
        shown = drawn(pictures.draw_sequence(description))
        expected = {f"{n}:{s}->{r}:{w}" for n, (s, r, w) in enumerate(description["messages"])}
        assert shown["messages"] == expected
        assert shown["nodes"] == set(description["participants"])
    plt.close("all")


def test_claim_first_charges_once_and_check_then_act_twice():
    charges = {
        name: sum(1 for _, r, w in pictures.sequence(spec) if r == "card processor")
        for name, spec in (("check", pictures.CHECK_THEN_ACT), ("claim", pictures.CLAIM_FIRST))
    }
    assert charges == {"check": 2, "claim": 1}


def test_a_message_to_an_undeclared_participant_is_refused():
    with pytest.raises(ValueError, match="undeclared"):
        pictures.sequence({"participants": ["a"], "messages": [("a", "b", "hello")]})


def test_the_state_diagram_has_exactly_the_transitions_the_code_enforces():
    from idemlab.lessons import deletion

    state = deletion.import_function_module("erasure.state")
    ax = pictures.draw_graph(pictures.request_states())
    shown = drawn(ax)
    plt.close("all")
    assert shown["edges"] == {(str(t.source), str(t.target), "transition") for t in state.TRANSITIONS}
    assert shown["nodes"] == {str(s) for s in state.Status}


def test_the_state_diagram_names_the_writes_on_every_arrow():
    """Notebook 03 says each arrow's label names the write that makes it: every arrow's."""
    from idemlab.lessons import deletion

    state = deletion.import_function_module("erasure.state")
    texts = {text.get_text() for text in pictures.draw_graph(pictures.request_states()).texts}
    plt.close("all")
    named = {write for text in texts for write in text.split(", ")}
    assert {t.by for t in state.TRANSITIONS} <= named, {t.by for t in state.TRANSITIONS} - named


def test_a_transition_added_to_the_table_appears_in_the_state_diagram():
    from idemlab.lessons import deletion

    state = deletion.import_function_module("erasure.state")
    changed = (*state.TRANSITIONS, state.Transition(state.Status.CANCELLED, state.Status.SCHEDULED, "reopen"))
    shown = drawn(pictures.draw_graph(pictures.request_states(changed)))
    plt.close("all")
    assert ("CANCELLED", "SCHEDULED", "transition") in shown["edges"]


def test_every_status_write_takes_its_sources_from_the_table():
    """A write whose name is not in TRANSITIONS is a bug the code itself refuses, so the
    table (and the picture drawn from it) cannot fall behind the code."""
    from idemlab.lessons import deletion

    state = deletion.import_function_module("erasure.state")
    assert state._sources("claim") == ["SCHEDULED", "RETRYABLE"]
    with pytest.raises(state.UnknownRecoveryPointError, match="no transition"):
        state._sources("reopen")
