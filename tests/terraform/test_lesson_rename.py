"""A stack applied before Terraform called a lesson a lesson keeps every resource after it.

The module once named a function's lesson its `scenario` (the entry's attribute, the
`local.scenario_dlq` map, the `idemlab:scenario` tag on every function). The rename changes
no resource address: the code objects stay keyed by the lesson's slug, as they were, so no
`moved` block is needed. It does change one tag key on every function, which Terraform can
only update in place. This test applies the module of the last commit before the rename
(`git archive`) to a fresh embedded backend, plans the module of the rename's commit against
that state, and holds the plan to exactly that: nothing created or destroyed, and each update
the tag key alone. It then applies the plan and plans once more: nothing left to change.

Both plans use the same zips, built from today's `functions/`: the test is about the rename,
not about code or resources changed since (a later change to a deployed resource is its own
commit's to plan, and would show here as an update that is not the tag's).
"""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from idemlab import clients, settings, stack
from idemlab.embedded.server import EmbeddedBackend

# The last commit whose module says `scenario`: its root is what a learner had applied.
PRE_RENAME = "87004ced1f38ed3d3427ac92a34e1846a43f8e01"
# The commit that renamed it, and nothing else in the Terraform.
RENAMED = "4b89ccfc4f01e2e736efa764fdfe871f81cb48b9"
OLD_TAG, NEW_TAG = "idemlab:scenario", "idemlab:lesson"
PREFIX = "tfmv"
SAVED_PLAN = "rename.tfplan"


def root_of(commit: str, folder: Path) -> Path:
    """The Terraform root of ``commit``, unpacked into ``folder``."""
    known = subprocess.run(
        ["git", "-C", str(settings.ROOT), "cat-file", "-e", f"{commit}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if known.returncode != 0:
        pytest.fail(
            f"commit {commit} (the module before or at the rename) is not in this clone's history"
            f" ({known.stderr.strip() or 'no answer from git'}): this test needs a clone with full"
            " history (git fetch --unshallow)"
        )
    archive = subprocess.run(
        ["git", "-C", str(settings.ROOT), "archive", "--format=tar", commit, "terraform"],
        capture_output=True,
        check=True,
    )
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(folder, filter="data")
    return folder / "terraform"


@pytest.fixture
def fresh_backend(monkeypatch):
    """An embedded backend of this test's own, which every client and Terraform run talks to;
    the modules' own defaults (not the suite's TF_VAR_ inputs, which the old module cannot read)."""
    server = EmbeddedBackend().start()
    for name, value in {
        "BACKEND": "embedded",
        "AWS_ENDPOINT_URL": server.url,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    for name in ("TF_VAR_functions", "TF_VAR_queues"):
        monkeypatch.delenv(name, raising=False)
    yield server
    stack.forget(PREFIX)
    server.stop()


def renamed(tags: dict | None) -> dict | None:
    """The tags as today's module writes them: the old key's value under the new key."""
    return None if tags is None else {NEW_TAG if key == OLD_TAG else key: value for key, value in tags.items()}


@pytest.mark.long
@pytest.mark.timeout(900)
def test_a_stack_applied_before_the_rename_keeps_every_resource_and_plans_clean_after_it(
    fresh_backend, tmp_path, monkeypatch
):
    with monkeypatch.context() as old:
        old.setattr(stack, "TERRAFORM_SOURCE", root_of(PRE_RENAME, tmp_path / "before"))
        lab = stack.deploy(prefix=PREFIX)
    monkeypatch.setattr(stack, "TERRAFORM_SOURCE", root_of(RENAMED, tmp_path / "renamed"))
    function_name = lab["functions"]["sweeper"]
    function_arn = clients.client("lambda").get_function(FunctionName=function_name)["Configuration"]["FunctionArn"]
    assert clients.client("lambda").list_tags(Resource=function_arn)["Tags"][OLD_TAG] == "deletion"

    working = stack._Stack(PREFIX, "embedded")
    with stack._locked(working.name):
        working.prepare(rebuild=False)  # the renamed root, the zips the old one applied
        working.change("plan", f"-out={SAVED_PLAN}")
        shown = json.loads(working.terraform("show", "-json", SAVED_PLAN)[1])
        changes = [change for change in shown["resource_changes"] if change["mode"] == "managed"]
        not_kept = sorted(
            f"{change['address']}: {change['change']['actions']}"
            for change in changes
            if change["change"]["actions"] not in (["no-op"], ["update"])
        )
        assert not not_kept, f"the rename would create or destroy: {not_kept}"
        updates = {
            change["address"]: change["change"] for change in changes if change["change"]["actions"] == ["update"]
        }
        functions = {
            change["address"] for change in changes if change["address"].startswith("module.lab.aws_lambda_function.")
        }
        assert len(functions) == len(lab["functions"]), f"the plan and the old stack differ in functions: {functions}"
        assert set(updates) == functions, f"updated beyond the functions: {sorted(set(updates) - functions)}"
        for address, update in sorted(updates.items()):
            before, after = update["before"], update["after"]
            assert OLD_TAG in before["tags"], address
            expected = before | {"tags": renamed(before["tags"]), "tags_all": renamed(before["tags_all"])}
            unknown = {name for name, value in update["after_unknown"].items() if value}
            other = sorted(name for name in expected if name not in unknown and expected[name] != after.get(name))
            assert not other, f"{address} changes more than its tag key: {other}"
            assert not unknown, f"{address} becomes unknown in {sorted(unknown)}"
        working.terraform("apply", "-auto-approve", stack.PARALLELISM, SAVED_PLAN)

    empty, text = stack.plan(PREFIX, rebuild=False)
    assert empty, text[-4000:]
    tags = clients.client("lambda").list_tags(Resource=function_arn)["Tags"]
    assert (tags.get(NEW_TAG), OLD_TAG in tags) == ("deletion", False), tags
    stack.destroy(PREFIX)
