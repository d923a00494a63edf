"""The second day: `make down` (or a reboot) empties the embedded backend, but the stack's
Terraform state still lists every resource. The next deploy must not refresh them one by one
(each is gone): it starts from an empty state, says so in one line, and ends deployed, with
a second plan empty.

A backend of its own on a free port, started and stopped with the lab's command line as a
learner does (`make up`, `make down`); the deploys run in this process (`idemlab.stack`), on
a prefix of their own, so the clone's remembered participant is left alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from idemlab import settings, stack
from idemlab.embedded.server import free_port
from support.health import answer as health_answer

PREFIX = "dayone"
# One lesson's stack: what a stale state costs does not depend on how many lessons it holds,
# and a whole stack made this test's two deploys 336 s in one CI run. The second deploy
# takes the lessons the first one remembered.
LESSONS = ["vehicles"]


def lab_command(*args: str, port: int) -> subprocess.CompletedProcess:
    """`python -m idemlab <args>` as the Makefile runs it, waited for until it ends."""
    env = {**os.environ, "BACKEND": "embedded", "LAB_PORT": str(port)}
    env.pop("AWS_ENDPOINT_URL", None)  # the command line derives it from LAB_PORT
    ran = subprocess.run(
        [sys.executable, "-m", "idemlab", *args], capture_output=True, text=True, env=env, cwd=settings.ROOT
    )
    assert ran.returncode == 0, f"`{' '.join(args)}` failed:\n{ran.stdout}{ran.stderr}"
    return ran


def applied_resources(state_file) -> int:
    resources = json.loads(state_file.read_text())["resources"]
    return sum(len(resource["instances"]) for resource in resources if resource["mode"] == "managed")


@pytest.mark.timeout(2400)
def test_a_deploy_onto_a_restarted_backend_starts_from_an_empty_state(monkeypatch, capsys):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("BACKEND", "embedded")
    monkeypatch.setenv("LAB_PORT", str(port))
    monkeypatch.setenv("AWS_ENDPOINT_URL", url)
    working_copy = stack.WORKING_COPIES / stack.stack_name(PREFIX, "embedded")
    try:
        lab_command("up", port=port)
        first_instance = health_answer(url)["instance"]
        stack.deploy(prefix=PREFIX, lessons=LESSONS)
        created = applied_resources(working_copy / "terraform.tfstate")
        assert created > 20, f"the first deploy recorded only {created} resources"
        capsys.readouterr()

        lab_command("down", port=port)
        lab_command("up", port=port)
        assert health_answer(url)["instance"] != first_instance, "a restarted backend must be another instance"
        (working_copy / "last-apply.log").unlink()
        stack.deploy(prefix=PREFIX)
        said = capsys.readouterr().err

        # What Terraform was asked to do: one apply from an empty state, no plan of the old
        # one, no refresh of any old resource; everything created again.
        notes = [line for line in said.splitlines() if "starting from an empty state" in line]
        assert len(notes) == 1, f"the deploy should say once that it starts from an empty state; it said:\n{said}"
        assert f"its {created} resources" in notes[0]
        assert not (working_copy / "last-plan.log").exists(), "the second deploy planned against the stale state"
        applied = (working_copy / "last-apply.log").read_text()
        assert "Refreshing state" not in applied, "the second deploy refreshed resources of the restarted backend"
        assert f"Apply complete! Resources: {created} added, 0 changed, 0 destroyed." in applied
        messages = [json.loads(line) for line in (working_copy / "last-apply.jsonl").read_text().splitlines()]
        assert not [message for message in messages if message.get("type", "").startswith("refresh")]

        unchanged, shown = stack.plan(prefix=PREFIX, rebuild=False)
        assert unchanged, f"a second plan after the second day's deploy wants changes:\n{shown[-3000:]}"
    finally:
        stack.forget(PREFIX)
        lab_command("down", port=port)
