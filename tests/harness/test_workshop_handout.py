"""Issue 37, items 1 and 2: a participant reaches their stack from another machine with a
handout, and the region is set once for every target.

Two copies of the lab stand for two machines (each with its own `.lab/`: no state is shared
but the handout, carried as a file), on one embedded backend the test starts for itself.
"""

from __future__ import annotations

import json
import shutil

import boto3
import nbformat
import pytest
from nbclient import NotebookClient

from idemlab import handout, settings, stack, workshop
from idemlab.embedded.server import EmbeddedBackend
from support.lab_copies import DROPPED, clone, machine_env, run

# Two deploys two at a time, a notebook, a plan and two destroys on a loaded 2-core machine.
pytestmark = pytest.mark.timeout(2400)

REGION = "eu-west-2"  # not the default, set once in the instructor's clone
NOTEBOOK = "01_vehicles.ipynb"


@pytest.fixture
def own_backend():
    server = EmbeddedBackend().start()
    yield server
    server.stop()


def test_a_participant_runs_notebook_01_on_their_stack_from_another_machine_with_a_handout(tmp_path, own_backend):
    instructor, participant = clone(tmp_path / "instructor"), clone(tmp_path / "participant")
    at_instructor = machine_env(instructor, BACKEND="embedded", LAB_PORT=str(own_backend.port))

    # The region, set once, at the top of the runbook; no AWS_REGION anywhere after.
    assert run(instructor, at_instructor, "-m", "idemlab", "region", REGION).returncode == 0
    # The vehicles lesson only: all that notebook 01 uses (a whole stack each cost this test
    # most of its 567 s in one CI run).
    up = run(instructor, at_instructor, "-m", "idemlab.workshop", "up", "p01,p02", "--yes", "--lessons", "vehicles")
    assert up.returncode == 0
    handouts = instructor / ".lab" / "handouts"
    assert sorted(path.name for path in handouts.iterdir()) == ["p01.json", "p02.json"]
    given = json.loads((handouts / "p01.json").read_text())
    assert (given["participant"], given["backend"], given["region"]) == ("p01", "embedded", REGION)
    assert given["endpoint"] == own_backend.url and given["outputs"]["tables"]["vehicles"] == "p01-vehicles"
    assert not any(word in json.dumps(given).lower() for word in ("secret", "aws_access_key", "password"))

    # The handout, carried to the other machine; it joins, and holds no Terraform state.
    shutil.copy2(handouts / "p01.json", participant / "p01.json")
    at_participant = machine_env(participant)
    assert run(participant, at_participant, "-m", "idemlab", "join", "p01.json").returncode == 0
    # Every later target reaches that stack: deploy only checks it answers; plan and destroy
    # belong to the instructor, who holds the state.
    checked = run(participant, at_participant, "-m", "idemlab", "deploy")
    assert checked.returncode == 0 and "participant 'p01'" in checked.stdout and REGION in checked.stdout
    refused = run(participant, at_participant, "-m", "idemlab", "destroy")
    assert refused.returncode == 1 and "state is on the instructor's machine" in refused.stdout

    notebook = nbformat.read(participant / "notebooks" / NOTEBOOK, as_version=4)
    NotebookClient(
        notebook, timeout=None, kernel_name="python3", resources={"metadata": {"path": str(participant / "notebooks")}}
    ).execute(env=at_participant)
    first = next(cell for cell in notebook.cells if cell.cell_type == "code")
    shown = "".join(output.get("text", "") for output in first.get("outputs", []))
    assert "participant 'p01'" in shown and own_backend.url in shown
    assert not (participant / ".lab" / "terraform").exists()  # no Terraform state on this machine

    # Back on the instructor's machine: plan and destroy reach the deployed stacks in the
    # region set once (the issue's drift: a plan elsewhere showed everything to add).
    plan = run(instructor, at_instructor, "-m", "idemlab", "plan", "--prefix", "p01")
    assert plan.returncode == 0 and "No changes." in plan.stdout
    down = run(instructor, at_instructor, "-m", "idemlab.workshop", "down")
    assert down.returncode == 0, down.stdout
    keys = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}
    dynamodb = boto3.client("dynamodb", endpoint_url=own_backend.url, region_name=REGION, **keys)
    assert [name for name in dynamodb.list_tables()["TableNames"] if name.startswith(("p01-", "p02-"))] == []


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    """A `.lab/` of the test's own, no lab variables in the environment."""
    for name, value in {
        "STATE_DIR": tmp_path,
        "PARTICIPANT_FILE": tmp_path / "participant",
        "REGION_FILE": tmp_path / "region",
        "BACKEND_FILE": tmp_path / "backend",
        "JOINED_FILE": tmp_path / "joined.json",
    }.items():
        monkeypatch.setattr(settings, name, value)
    monkeypatch.setattr(stack, "OUTPUTS_DIR", tmp_path / "outputs")
    for name in DROPPED:
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def a_handout(**changes) -> dict:
    outputs = {"tables": {"vehicles": "p01-vehicles"}, "functions": {"notify": "p01-notify"}}
    return {
        "version": 1,
        "participant": "p01",
        "backend": "aws",
        "region": REGION,
        "endpoint": None,
        "outputs": outputs,
    } | changes


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"participant": "P_01"}, "the handout's participant 'P_01' must be"),
        ({"region": "mars"}, "the handout's region 'mars' is not a region name"),
        ({"backend": "cloud"}, "backend 'cloud' is not one of"),
        ({"endpoint": "http://127.0.0.1:4566"}, "an endpoint exactly when its backend is an emulator"),
        ({"outputs": {"tables": {}}}, "outputs lack tables and functions"),
        ({"version": 2}, "version 2 handout"),
        ({"secret": "x"}, "must hold exactly"),
    ],
)
def test_a_bad_handout_is_refused_and_changes_nothing(state_dir, tmp_path, changes, message):
    path = tmp_path / "given.json"
    path.write_text(json.dumps(a_handout(**changes)))
    with pytest.raises(handout.HandoutError, match=message):
        handout.join(path)
    assert sorted(p.name for p in state_dir.iterdir()) == ["given.json"]


def test_joining_uses_the_handouts_stack_without_terraform_and_refuses_its_plan(state_dir, tmp_path):
    path = tmp_path / "given.json"
    path.write_text(json.dumps(a_handout()))
    handout.join(path)
    assert (settings.backend(), settings.region(), settings.participant()) == ("aws", REGION, "p01")
    assert settings.endpoint_url() is None
    assert stack.outputs()["tables"]["vehicles"] == "p01-vehicles"
    with pytest.raises(stack.JoinedClone, match="plan runs there, not here"):
        stack.plan()
    with pytest.raises(stack.JoinedClone, match="the workshop's plan runs there"):
        workshop.check(["p01"])


def test_the_region_is_set_once_and_a_different_aws_region_is_refused(state_dir, monkeypatch):
    assert settings.region() == settings.DEFAULT_REGION
    settings.set_region(REGION)
    assert settings.region() == REGION
    assert stack.stack_name("p01", "aws") == f"p01-aws-{REGION}"
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")  # a profile's default does not move it
    assert settings.region() == REGION
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    with pytest.raises(ValueError, match=r"this clone.s region is eu-west-2 .*`make region REGION=us-east-1`"):
        settings.region()
    with pytest.raises(ValueError, match="'eu west' is not a region name"):
        settings.set_region("eu west")
    assert (state_dir / "region").read_text() == f"{REGION}\n"
