"""Ctrl-C during `make workshop`, twice, each time while stacks are being made: the command
says who is done, who was stopped and who was not started, and what to run next; that rerun
ends with every participant deployed and each one's second plan empty.

In a copy of the lab with its own `.lab/` (tests/support/lab_copies.py), on an embedded
backend of its own; SIGINT goes to the command's whole process group, as a terminal's Ctrl-C
does (tests/support/interrupting.py), when resources appear on the backend, never at a time.
"""

from __future__ import annotations

import pytest

from idemlab.embedded.server import EmbeddedBackend
from support.interrupting import created, run_interrupting
from support.lab_copies import clone, machine_env

PARTICIPANTS = "p01,p02"
WORKSHOP = ["-m", "idemlab.workshop", "up", PARTICIPANTS, "--parallel", "2", "--yes"]


@pytest.mark.long
@pytest.mark.timeout(3600)
def test_ctrl_c_during_a_workshop_leaves_what_a_rerun_finishes(tmp_path):
    root = clone(tmp_path / "room")
    with EmbeddedBackend() as server:
        env = machine_env(root, BACKEND="embedded", LAB_PORT=str(server.port), CI="true")
        points = {
            "at the room's first resource": 1,
            "twenty resources later": 20,
        }
        for point, more in points.items():
            before = created(server.url)
            ended = run_interrupting(root, env, WORKSHOP, lambda output: created(server.url) >= before + more)
            assert ended.interrupted, f"the workshop ended before the point '{point}':\n{ended.output}"
            assert ended.code == 130, f"interrupted {point}, the workshop exited {ended.code}:\n{ended.output}"
            said = [line for line in ended.output.splitlines() if line.startswith("interrupted: ")]
            assert len(said) == 1, f"interrupted {point}:\n{ended.output}"
            assert "stopped mid-way" in said[0] and f"make workshop PARTICIPANTS={PARTICIPANTS} YES=1" in said[0]

        finished = run_interrupting(root, env, WORKSHOP)
        assert finished.code == 0, f"the rerun after the interruptions failed:\n{finished.output}"
        for name in PARTICIPANTS.split(","):
            planned = run_interrupting(root, env, ["-m", "idemlab", "plan", "--prefix", name])
            assert planned.code == 0 and "No changes." in planned.output, planned.output
