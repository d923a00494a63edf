"""Ctrl-C during `make deploy`, at several points, each followed by a rerun that is stopped
again: every run says it was interrupted and what to run next, and the last rerun ends
deployed, with a second plan empty.

In a copy of the lab with its own `.lab/` (tests/support/lab_copies.py), on an embedded
backend of its own; SIGINT goes to the command's whole process group, as a terminal's Ctrl-C
does (tests/support/interrupting.py). The points are events: a line of the deploy's output,
or resources appearing on the backend, never a time.
"""

from __future__ import annotations

import pytest

from idemlab.embedded.server import EmbeddedBackend
from support.interrupting import created, run_interrupting
from support.lab_copies import clone, machine_env

# One lesson's stack (it has tables, functions, a workflow and queues to cut short): the
# points below come early in any deploy, and the rerun that finishes a whole stack made this
# test 379 s in one CI run.
DEPLOY = ["-m", "idemlab", "deploy", "--lessons", "vehicles"]


@pytest.mark.timeout(3600)
def test_ctrl_c_at_any_point_of_a_deploy_leaves_what_a_rerun_finishes(tmp_path):
    root = clone(tmp_path / "lab")
    with EmbeddedBackend() as server:
        # CI=true: plain lines, one a stage ("...: started"), which the first point waits for.
        env = machine_env(root, BACKEND="embedded", LAB_PORT=str(server.port), CI="true")
        points = {
            "as Terraform starts": lambda before: lambda output: ": started" in output,
            # A function's CreateFunction takes the embedded backend longest: Terraform cancels it
            # in flight, after the backend made the function, more often than any other call.
            "as its first function appears": lambda before: lambda output: created(server.url, "functions") > 0,
            # The rerun plans first (its state holds resources), then applies: replacing what the
            # last interruption left tainted, creating the rest.
            "as the rerun's apply starts": lambda before: lambda output: "resources done: started" in output,
        }
        for point, moment_after in points.items():
            ended = run_interrupting(root, env, DEPLOY, moment_after(created(server.url)))
            assert ended.interrupted, f"the deploy ended before the point '{point}':\n{ended.output}"
            assert ended.code == 130, f"interrupted {point}, the deploy exited {ended.code}:\n{ended.output}"
            said = [line for line in ended.output.splitlines() if line.startswith("interrupted: ")]
            assert len(said) == 1 and "run `make deploy`" in said[0], f"interrupted {point}:\n{ended.output}"

        finished = run_interrupting(root, env, DEPLOY)
        assert finished.code == 0, f"the rerun after the interruptions failed:\n{finished.output}"
        planned = run_interrupting(root, env, ["-m", "idemlab", "plan"])
        assert planned.code == 0 and "No changes." in planned.output, planned.output
