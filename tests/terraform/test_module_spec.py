"""The Terraform module is read in one place, idemlab/module_spec.py, through python-hcl2's
parser: no other file of the harness or the tests opens a .tf file or imports the parser."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from idemlab import module_spec, settings

READER = Path("idemlab/module_spec.py")
THIS_FILE = Path("tests/terraform/test_module_spec.py")  # its planted readers below
# Files that open the Terraform's files without reading the Terraform, each with its reason.
NOT_READERS = {
    # Copies the root into a stack's working copy, and hashes those files' bytes to decide
    # whether `terraform init` must run again: it never looks inside them.
    Path("idemlab/stack.py"): "copies and hashes the working copy's files",
}
PARSER = re.compile(r"^\s*(import hcl2|from hcl2\b)")
TF_NAME = re.compile(r"""["'][^"']*\.tf["']""")
OPENS = re.compile(r"\b(open|read_text|read_bytes|glob|rglob|load|loads)\(")


def offending_lines(text: str) -> list[str]:
    """Lines that import the HCL parser, or open a file whose name ends in .tf."""
    found = []
    for line in text.splitlines():
        code = line.split("#", 1)[0]
        if PARSER.match(code) or (TF_NAME.search(code) and OPENS.search(code)):
            found.append(line.strip())
    return found


def test_only_module_spec_reads_the_terraform():
    offenders = {}
    for folder in ("idemlab", "tests"):
        for path in sorted((settings.ROOT / folder).rglob("*.py")):
            relative = path.relative_to(settings.ROOT)
            if relative in (READER, THIS_FILE) or relative in NOT_READERS:
                continue
            if lines := offending_lines(path.read_text()):
                offenders[str(relative)] = lines
    assert not offenders, f"read the Terraform through idemlab.module_spec: {offenders}"


@pytest.mark.parametrize(
    "planted",
    [
        'iam = (settings.MODULE_DIR / "iam.tf").read_text()',
        'with open(MODULE_DIR / "variables.tf") as handle:',
        'for path in MODULE_DIR.glob("*.tf"):',
        "import hcl2",
        "    from hcl2.query import DocumentView",
    ],
)
def test_the_check_finds_a_planted_reader(planted):
    assert offending_lines(f"x = 1\n{planted}\n") == [planted.strip()]


def test_writing_a_tf_file_or_naming_one_is_not_reading_it():
    assert not offending_lines('(source / "extra.tf").write_text("locals {}")\n# open("iam.tf")\n')


def test_the_prefix_rule_is_the_argument_of_the_validations_regex_call():
    pattern = module_spec.prefix_pattern()
    assert [name for name in ("lab", "a", "lab-1", "a" * 20) if not pattern.fullmatch(name)] == []
    assert [name for name in ("", "a-", "-a", "1ab", "Lab", "lab_1", "a" * 21) if pattern.fullmatch(name)] == []


def test_the_scheduler_may_start_the_workflows_its_policy_names():
    assert module_spec.scheduler_starts() == {"account_deletion"}
    assert module_spec.scheduler_starts() <= set(module_spec.default("workflows"))


def test_an_unknown_variable_or_function_is_named_in_the_error():
    with pytest.raises(KeyError, match="no variable 'nope'"):
        module_spec.default("nope")
    with pytest.raises(KeyError, match=r"no function 'nope' in variables\.tf"):
        module_spec.function("nope")
