"""Native LocalStack and every process it started listen on loopback only (ss, as a learner
would check it): DynamoDB Local, kinesis-local and the Lambda environments included."""

from __future__ import annotations

import ipaddress
import re
import subprocess
from pathlib import Path

import pytest

from idemlab.backends.daemons import NATIVE


def process_tree(root: int) -> set[int]:
    """``root`` and every process descended from it (from /proc)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended while listed
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    tree, grew = {root}, True
    while grew:
        children = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= children
        grew = bool(children)
    return tree


def is_loopback(address: str) -> bool:
    host = address.rsplit(":", 1)[0].strip("[]").removeprefix("::ffff:")
    return host != "*" and ipaddress.ip_address(host).is_loopback


@pytest.mark.skipif(NATIVE.pid() is None, reason="LocalStack runs in Docker here: its container has its own network")
def test_native_localstack_listens_on_loopback_only(deployed):
    tree = process_tree(NATIVE.pid())
    listening = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    ours = []
    for line in listening.splitlines():
        pids = {int(pid) for pid in re.findall(r"pid=(\d+)", line)}
        if pids & tree:
            ours.append(line.split()[3])
    assert len(ours) >= 3, f"expected LocalStack, DynamoDB Local and kinesis-local among {ours}"
    assert [address for address in ours if not is_loopback(address)] == []
