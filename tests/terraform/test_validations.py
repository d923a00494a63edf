"""The module's validation rules: short lines, one list of wrong entries per rule, a refused
input for every rule, and messages that name the entry they refuse."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from idemlab import build, module_spec, settings
from support.terraform_cli import MOCKED_AWS
from support.terraform_cli import terraform as terraform_cli

TERRAFORM_DIR = settings.ROOT / "terraform"
MODULE_DIR = TERRAFORM_DIR / "modules" / "idempotency_lab"
MAX_LINE = 160


def terraform_files() -> list[Path]:
    return sorted(
        path
        for pattern in ("*.tf", "*.tftest.hcl")
        for path in TERRAFORM_DIR.rglob(pattern)
        if ".terraform" not in path.parts
    )


def validations() -> dict[str, list[dict]]:
    """Every validation rule of the module, by the variable it belongs to."""
    variables = module_spec.module_blocks(MODULE_DIR, "variable")
    return {name: block.body.get("validation", []) for name, block in variables.items()}


def test_no_terraform_line_is_longer_than_160_characters():
    long_lines = [
        f"{path.relative_to(settings.ROOT)}:{number}: {len(line)} characters"
        for path in terraform_files()
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if len(line) > MAX_LINE
    ]
    assert terraform_files() and not long_lines, "\n".join(long_lines)


def test_a_rule_that_names_entries_counts_the_entries_it_names():
    # A rule cannot read its wrong entries from a local (functions.tf says why), so it writes
    # the list twice: `condition = length(<list>) == 0`, and the message joins the same <list>.
    # python-hcl2 prints both copies in one layout, whatever their line breaks.
    naming = 0
    for variable, rules in validations().items():
        for rule in rules:
            if "Wrong:" not in rule["error_message"]:
                continue
            naming += 1
            condition = rule["condition"]
            assert condition.startswith("${length(") and condition.endswith(") == 0}"), (variable, condition)
            wrong = condition.removeprefix("${length(").removesuffix(") == 0}")
            assert f'join("; ", {wrong})' in rule["error_message"], (variable, wrong, rule["error_message"])
    assert naming >= 14, naming


def test_every_validation_rule_has_a_refused_input_in_the_module_tests():
    runs = module_spec.blocks(MODULE_DIR / "tests" / "module.tftest.hcl", "run")
    refused = Counter(
        failure.removeprefix("${var.").removesuffix("}")
        for body in runs.values()
        for failure in body.get("expect_failures", [])
        if failure.startswith("${var.")
    )
    missing = {
        variable: f"{len(rules)} rules, {refused[variable]} refused inputs"
        for variable, rules in validations().items()
        if refused[variable] < len(rules)
    }
    assert not missing, f"add a run with expect_failures to tests/module.tftest.hcl: {missing}"


# Each rule that names entries, with one wrong input: the file whose rule refuses it, and the
# end of its message. One file per plan: a failed run skips the runs after it in its file.
NAMING_RULES = {
    "function_tables": (
        'functions = { sweeper = { lesson = "deletion", tables = { deletion_request = "query_update" } } }',
        "variables.tf",
        'Wrong: sweeper: deletion_request = "query_update".',
    ),
    "function_invokes": (
        'functions = { sweeper = { lesson = "deletion", invokes = ["complete_deletions"] } }',
        "variables.tf",
        "Wrong: sweeper invokes complete_deletions.",
    ),
    "function_sends": (
        'functions = { sweeper = { lesson = "deletion", sends = ["orders"] } }',
        "variables.tf",
        "Wrong: sweeper sends to orders.",
    ),
    "function_grants": (
        'functions = { sweeper = { lesson = "deletion", grants = ["put_metric"] } }',
        "variables.tf",
        "Wrong: sweeper: grant put_metric.",
    ),
    "function_settings": (
        'functions = { sweeper = { lesson = "deletion", settings = ["deletion_leases"] } }',
        "variables.tf",
        "Wrong: sweeper: settings deletion_leases.",
    ),
    "function_dlq": (
        'functions = { sweeper = { lesson = "deletion", dlq = "orders" } }',
        "variables.tf",
        "Wrong: sweeper (orders).",
    ),
    "function_lesson_without_dlq": (
        'functions = { sweeper = { lesson = "deletions" } }',
        "variables.tf",
        "Wrong: sweeper (no DLQ for lesson deletions).",
    ),
    "workflow_invokes": (
        'workflows = { account_deletion = { type = "STANDARD", definition = "account_deletion.asl.json", '
        'invokes = ["claim_deletions"], aliases = { claim = "claim_deletion" } } }',
        "variables.tf",
        "Wrong: account_deletion invokes claim_deletions.",
    ),
    "workflow_tables": (
        'workflows = { account_deletion = { type = "STANDARD", definition = "account_deletion.asl.json", '
        'invokes = [], tables = { deletion_requests = "write", deletion = "read" } } }',
        "variables.tf",
        'Wrong: account_deletion: deletion = "read"; account_deletion: deletion_requests = "write".',
    ),
    "function_starts": (
        'functions = { sweeper = { lesson = "deletion", starts = ["account_deletions"], knows = ["deletion"] } }\n'
        'workflows = { account_deletion = { type = "STANDARD", definition = "account_deletion.asl.json", invokes = [] } }\n'
        "event_sources = {}",
        "variables.tf",
        "Wrong: sweeper names account_deletions; sweeper names deletion.",
    ),
    "workflow_definition": (
        'workflows = { account_deletion = { type = "STANDARD", definition = "account_deletion.json", invokes = [] } }',
        "variables.tf",
        "Wrong: account_deletion: workflows/account_deletion.json.",
    ),
    "event_source_references": (
        'event_sources = { orders = { function = "fulfil_idempotents", queue = "orders" }, '
        'dead = { function = "fulfil_naive", queue = "orders_dlq" } }',
        "variables.tf",
        "Wrong: dead: fulfil_naive <- orders_dlq; orders: fulfil_idempotents <- orders.",
    ),
    "event_source_visibility": (
        'event_sources = { orders = { function = "sweeper", queue = "orders" } }',
        "variables.tf",
        "Wrong: orders: orders 12 s, sweeper 60 s.",
    ),
    "event_source_batching_window": (
        'event_sources = { orders = { function = "fulfil_idempotent", queue = "orders", batching_window_seconds = 301 } }',
        "variables.tf",
        "Wrong: orders (301 s).",
    ),
    "key_in_two_maps": (
        'functions = { sweeper = { lesson = "deletion" }, ledger = { lesson = "checkout" }, orders = { lesson = "queues" } }\n'
        "event_sources = {}",
        "variables.tf",
        "Wrong: ledger (functions and tables); orders (functions and queues).",
    ),
    "queue_redrive": (
        "queues = { scheduler_dlq = {}, sweeper_rule_dlq = {}, orders_dlq = {}, "
        'orders_fifo = { redrive = { dlq = "orders_dlq", max_receive_count = 2 }, fifo = true }, '
        'scheduler_dlq_dlq = { redrive = { dlq = "orders_dlq", max_receive_count = 2 } } }',
        "variables.tf",
        "Wrong: orders_fifo -> orders_dlq; scheduler_dlq_dlq -> orders_dlq.",
    ),
}


@pytest.fixture(scope="module")
def zips(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("zips")
    build.build_all(out_dir=out)
    return out


@pytest.mark.timeout(600)
def test_each_rule_that_names_entries_stops_the_plan_naming_them(tmp_path, zips):
    module = tmp_path / "idempotency_lab"
    shutil.copytree(
        MODULE_DIR, module, ignore=shutil.ignore_patterns(".terraform", ".terraform.lock.hcl", "tests", "examples")
    )
    (module / "tests").mkdir()
    for name, (variables, _, _) in NAMING_RULES.items():
        run = f'run "plan" {{\n  command = plan\n  variables {{\n{variables}\n  }}\n}}\n'
        (module / "tests" / f"{name}.tftest.hcl").write_text(MOCKED_AWS + run)
    init = terraform("init", "-backend=false", "-input=false", "-no-color", cwd=module)
    assert init.returncode == 0, init.stdout
    done = terraform("test", "-no-color", "-var", f"artifacts_dir={zips}", cwd=module, timeout=600)
    assert done.returncode != 0 and f"0 passed, {len(NAMING_RULES)} failed" in done.stdout, done.stdout[-3000:]
    for name, (_, file, message) in NAMING_RULES.items():
        # This file's part of the output, words joined by single spaces (Terraform wraps lines).
        part = done.stdout.partition(f"tests/{name}.tftest.hcl... in progress")[2]
        part = " ".join(part.partition("... in progress")[0].split())
        assert "Invalid value for variable" in part and message in part, f"{name}: {part[-2000:]}"
        assert f"checked by the validation rule at {file}:" in part, f"{name}: {part[-2000:]}"
        # Refused at the variable: no resource was evaluated with the wrong entry.
        assert "Invalid index" not in part, f"{name}: {part[-2000:]}"


def terraform(*args: str, cwd: Path, timeout: int = 300):
    """Terraform's output and errors in one stream, in order (a message reads as printed)."""
    return terraform_cli(*args, cwd=cwd, timeout=timeout, merged=True)
