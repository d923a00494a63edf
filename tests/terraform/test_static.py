"""The Terraform code checked without any AWS API: format, validity, plan-level assertions
with a mocked provider (terraform test), checkov, and the generated README tables."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from idemlab import build, module_spec, settings, stack, tfdocs
from support.terraform_cli import MOCKED_AWS, terraform

TERRAFORM_DIR = settings.ROOT / "terraform"
MODULE_DIR = TERRAFORM_DIR / "modules" / "idempotency_lab"
CHECKOV = settings.STATE_DIR / "tools" / "bin" / "checkov"
CHECKOV_INSTALL = "make tools  (or: python3 -m venv .lab/tools && .lab/tools/bin/pip install checkov==3.3.30)"


def test_init_here_waits_while_a_deploy_holds_the_plugin_cache(terraform_copy):
    """A CI run with six workers failed `init` here: a worker's deploy was putting the
    provider into the shared plugin cache at the same moment ("mkdir ...: file exists")."""
    finished = threading.Event()
    with stack.plugin_cache_lock():
        waiting = threading.Thread(
            target=lambda: (terraform("init", "-backend=false", "-input=false", cwd=terraform_copy), finished.set())
        )
        waiting.start()
        assert not finished.wait(5), "init ran while the plugin cache was held"
    waiting.join(timeout=120)
    assert finished.is_set()


def _provider_links(directory: Path) -> list[tuple[str, int, int]]:
    """Each link from a working directory's AWS provider folder to the provider's files
    (into the plugin cache, from there into the mirror): path, inode and change time."""
    providers = directory / ".terraform" / "providers" / stack.AWS_PROVIDER
    path = next(providers.glob("*/*"))  # <version>/<os>_<arch>
    links = []
    while path.is_symlink():
        status = path.lstat()
        links.append((str(path), status.st_ino, status.st_ctime_ns))
        path = path.parent / os.readlink(path)  # an absolute target replaces the parent
    return links


def test_an_init_elsewhere_leaves_the_provider_of_an_initialised_directory_in_place(tmp_path):
    """A fresh-clone CI run failed `terraform test` with "fork/exec
    .terraform/providers/.../terraform-provider-aws_v5.100.0_x5: no such file or directory":
    a worker's deploy ran `terraform init` in a new working copy (no lock file yet), which
    removed and re-made the plugin cache's provider folder, the folder every other
    initialised directory links to, while the test was starting the provider from it."""
    ignored = shutil.ignore_patterns(".terraform", ".terraform.lock.hcl", "tests", "examples")
    running, fresh = tmp_path / "running", tmp_path / "fresh"
    for directory in (running, fresh):
        shutil.copytree(MODULE_DIR, directory, ignore=ignored)
    init = terraform("init", "-backend=false", "-input=false", "-no-color", cwd=running)
    assert init.returncode == 0, init.stdout + init.stderr
    before = _provider_links(running)
    assert before, "the provider folder is no link: nothing shared to check"
    init = terraform("init", "-backend=false", "-input=false", "-no-color", cwd=fresh)
    assert init.returncode == 0, init.stdout + init.stderr
    assert _provider_links(running) == before, (
        "an init elsewhere replaced a link the running directory's provider goes through"
    )


@pytest.fixture(scope="module")
def terraform_copy(tmp_path_factory) -> Path:
    """A private copy of terraform/, so init never touches the shared tree."""
    copy = tmp_path_factory.mktemp("tf") / "terraform"
    ignored = (".terraform", ".terraform.lock.hcl", "terraform.tfstate*", "localstack_providers_override.tf")
    shutil.copytree(TERRAFORM_DIR, copy, ignore=shutil.ignore_patterns(*ignored))
    return copy


@pytest.fixture(scope="module")
def zips(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("zips")
    build.build_all(out_dir=out)
    return out


def _version(text: str) -> tuple[int, ...]:
    parts = [int(p) for p in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def constraint_allows(constraint: str, version: str) -> bool:
    """Terraform's version constraint operators (>=, >, <=, <, =, !=, ~>), enough for these files."""
    wanted = _version(version)
    for part in constraint.split(","):
        op, ref = re.fullmatch(r"\s*(>=|<=|!=|~>|>|<|=)?\s*([0-9.]+)\s*", part).groups()
        low = _version(ref)
        if op == "~>":  # the rightmost given component may grow: ~> 5.100 is >= 5.100, < 6.0
            given = [int(p) for p in ref.split(".")]
            high = (*given[:-2], given[-2] + 1) if len(given) > 1 else None
            if wanted < low or (high and wanted >= _version(".".join(map(str, high)))):
                return False
        elif not {
            ">=": wanted >= low,
            ">": wanted > low,
            "<=": wanted <= low,
            "<": wanted < low,
            "!=": wanted != low,
        }.get(op or "=", wanted == low):
            return False
    return True


def aws_constraint(versions_tf: Path) -> str:
    block = module_spec.document(versions_tf)["terraform"][0]
    return block["required_providers"][0]["aws"]["version"]


def test_constraint_reader_knows_the_pessimistic_operator():
    assert constraint_allows("~> 5.100", "5.100.0") and constraint_allows("~> 5.100", "5.123.4")
    assert not constraint_allows("~> 5.100", "6.0.0") and not constraint_allows("~> 5.100", "5.99.0")
    assert constraint_allows(">= 5.100.0", "6.2.0")


EXAMPLES = module_spec.examples()


@pytest.mark.parametrize(
    "versions_tf", ["versions.tf", *(f"modules/idempotency_lab/examples/{name}/main.tf" for name in EXAMPLES)]
)
def test_the_root_and_the_examples_stay_on_provider_5(versions_tf):
    # On a laptop that reaches the registry, an open constraint resolves to 6.x, which the
    # lab has never been applied with.
    constraint = aws_constraint(TERRAFORM_DIR / versions_tf)
    assert constraint == "~> 5.100", constraint
    assert not constraint_allows(constraint, "6.0.0")


def test_the_module_sets_only_a_minimum_provider_version():
    # As terraform-aws-modules do: the root that applies the module pins (and locks) the
    # provider; a reusable module that capped it would refuse its callers' newer roots.
    constraint = aws_constraint(MODULE_DIR / "versions.tf")
    assert constraint_allows(constraint, "5.100.0") and constraint_allows(constraint, "5.120.0")
    assert constraint_allows(constraint, "6.0.0") and constraint_allows(constraint, "7.3.0")
    assert not constraint_allows(constraint, "5.99.0")


LOCK_FILE = TERRAFORM_DIR / ".terraform.lock.hcl"


def test_the_roots_lock_file_is_committed_and_records_the_pinned_provider():
    # HashiCorp: include the dependency lock file of a root configuration in version control
    # (Terraform language docs, "Dependency Lock File"); a module's own is not used by its callers.
    ignored = subprocess.run(["git", "check-ignore", "-q", str(LOCK_FILE)], cwd=settings.ROOT)
    assert ignored.returncode == 1, "terraform/.terraform.lock.hcl is gitignored"
    (locked,) = module_spec.document(LOCK_FILE)["provider"]
    aws = locked[stack.AWS_PROVIDER]
    assert aws["constraints"] == aws_constraint(TERRAFORM_DIR / "versions.tf"), aws
    assert constraint_allows(aws["constraints"], aws["version"]), aws
    # One h1 (this platform's unpacked package) and the registry's zh for every platform, so
    # an init on a learner's laptop, which downloads the provider, can check it too.
    assert len([h for h in aws["hashes"] if h.startswith("h1:")]) >= 1
    assert len([h for h in aws["hashes"] if h.startswith("zh:")]) >= 10, aws["hashes"]


@pytest.mark.timeout(300)
def test_init_installs_the_locked_provider_and_leaves_the_lock_file_as_committed(tmp_path):
    """Where the provider comes from the machine's mirror, its package must match a hash the
    committed file records; the init keeps the file byte for byte. A hash that no longer
    matches is refused: the file is what decides, not whatever the mirror holds."""
    ignored = shutil.ignore_patterns(".terraform", "terraform.tfstate*", "localstack_providers_override.tf")
    for name, hashes_kept in (("committed", True), ("tampered", False)):
        copy = tmp_path / name
        shutil.copytree(TERRAFORM_DIR, copy, ignore=ignored)
        text = LOCK_FILE.read_text()
        if not hashes_kept:
            text = re.sub(r'"h1:[^"]+"', '"h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="', text)
            text = re.sub(r'\s*"zh:[^"]+",', "", text)
        (copy / ".terraform.lock.hcl").write_text(text)
        init = terraform("init", "-backend=false", "-input=false", "-no-color", cwd=copy)
        if hashes_kept:
            assert init.returncode == 0, init.stdout + init.stderr
            assert (copy / ".terraform.lock.hcl").read_text() == text
        else:
            assert init.returncode != 0 and "checksum" in " ".join((init.stdout + init.stderr).split()), init.stderr


def test_terraform_files_are_formatted():
    done = terraform("fmt", "-check", "-recursive", "-diff", str(TERRAFORM_DIR), cwd=settings.ROOT)
    assert done.returncode == 0, f"run `terraform fmt -recursive terraform`:\n{done.stdout}{done.stderr}"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("where", ["root", "module", "complete example"])
def test_configuration_is_valid(terraform_copy, where):
    # Every example is applied by tests/terraform/test_examples.py; the complete one is validated here too.
    directory = {
        "root": terraform_copy,
        "module": terraform_copy / "modules" / "idempotency_lab",
        "complete example": terraform_copy / "modules" / "idempotency_lab" / "examples" / "complete",
    }[where]
    init = terraform("init", "-backend=false", "-input=false", "-no-color", cwd=directory)
    assert init.returncode == 0, init.stdout + init.stderr
    done = terraform("validate", "-no-color", cwd=directory)
    assert done.returncode == 0, done.stdout + done.stderr


def test_there_is_an_example_per_lesson_and_a_complete_one():
    assert set(EXAMPLES) == set(module_spec.default("lessons")) | {"complete"}, EXAMPLES


@pytest.mark.parametrize("name", EXAMPLES)
def test_each_example_takes_the_zips_as_an_input_and_documents_its_outputs(name):
    example = MODULE_DIR / "examples" / name
    variables = module_spec.blocks(example / "variables.tf", "variable")
    # The zips' directory is the caller's to name: no default reaching into this repository.
    assert "default" not in variables["artifacts_dir"] and variables["artifacts_dir"].get("description")
    outputs = module_spec.blocks(example / "outputs.tf", "output")
    assert outputs and all(body.get("description") for body in outputs.values()), outputs
    (call,) = [body for block in module_spec.document(example / "main.tf")["module"] for body in block.values()]
    assert call["artifacts_dir"] == "${var.artifacts_dir}" and call["source"] == "../..", call
    assert (example / "README.md").exists()


def test_the_examples_readme_says_how_to_build_apply_and_destroy():
    readme = (MODULE_DIR / "examples" / "README.md").read_text()
    for step in ("python -m idemlab.build", "terraform apply", "tflocal apply", "terraform destroy", "artifacts_dir"):
        assert step in readme, f"examples/README.md does not say `{step}`"
    for name in EXAMPLES:
        assert f"`{name}/`" in readme, f"examples/README.md does not list {name}/"


@pytest.mark.timeout(600)
def test_module_plan_assertions_pass_with_a_mocked_provider(terraform_copy, zips):
    module = terraform_copy / "modules" / "idempotency_lab"
    init = terraform("init", "-backend=false", "-input=false", "-no-color", cwd=module)
    assert init.returncode == 0, init.stdout + init.stderr
    done = terraform("test", "-no-color", "-var", f"artifacts_dir={zips}", cwd=module, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    # Every run block ran; none was skipped after an earlier failure.
    assert "0 failed" in done.stdout and " skip" not in done.stdout, done.stdout


@pytest.mark.timeout(1800)  # a guard against a hung scan only: a loaded CI machine took over 300 s
def test_checkov_finds_no_failed_check_and_every_skip_has_a_reason():
    assert CHECKOV.exists(), (
        f"checkov is not installed at {CHECKOV.relative_to(settings.ROOT)}; install it with: {CHECKOV_INSTALL}"
    )
    done = subprocess.run(
        [str(CHECKOV), "-d", str(TERRAFORM_DIR), "--framework", "terraform", "--skip-download", "-o", "json"],
        capture_output=True,
        text=True,
    )
    assert done.stdout.strip(), f"checkov printed no report (exit {done.returncode}):\n{done.stderr[-2000:]}"
    report = json.loads(done.stdout)
    reports = report if isinstance(report, list) else [report]
    failed = [c for r in reports for c in r["results"]["failed_checks"]]
    skipped = [c for r in reports for c in r["results"]["skipped_checks"]]
    passed = [c for r in reports for c in r["results"]["passed_checks"]]
    assert passed, "checkov scanned nothing"
    assert not failed, "\n".join(
        f"{c['check_id']} {c['resource']} ({c['file_path']}): {c['check_name']}" for c in failed
    )
    unexplained = [
        c["check_id"] for c in skipped if len((c.get("check_result") or {}).get("suppress_comment", "").strip()) < 20
    ]
    assert not unexplained, f"skips without a written reason: {unexplained}"


def test_module_readme_documents_every_variable_and_output_block():
    # Found on the syntax tree, not through the generator's own reading (plain values): a block
    # it missed would otherwise be missing from both sides of the comparison.
    declared = {"variable": set(), "output": set()}
    for path in module_spec.files(MODULE_DIR):
        for kind in declared:
            declared[kind].update(module_spec.labels(path, kind))
    readme = (MODULE_DIR / "README.md").read_text()
    inputs, _, outputs = readme.partition("## Inputs")[2].partition("## Outputs")
    documented_inputs = set(re.findall(r"^\| `([^`]+)` \|", inputs, flags=re.MULTILINE))
    documented_outputs = set(re.findall(r"^\| `([^`]+)` \|", outputs, flags=re.MULTILINE))
    assert declared["variable"] == documented_inputs, (
        f"inputs missing from the README: {sorted(declared['variable'] - documented_inputs)}; "
        f"documented but not declared: {sorted(documented_inputs - declared['variable'])}"
    )
    assert declared["output"] == documented_outputs, sorted(declared["output"] ^ documented_outputs)


def test_module_readme_has_the_sections_of_terraform_docs_and_lists_every_resource():
    readme = (MODULE_DIR / "README.md").read_text()
    generated = readme.partition(tfdocs.BEGIN)[2].partition(tfdocs.END)[0]
    headings = re.findall(r"^## (.+)$", generated, flags=re.MULTILINE)
    assert headings == ["Requirements", "Providers", "Resources", "Inputs", "Outputs"], headings
    # From the syntax tree, apart from the plain values the generator reads.
    addresses = {
        f"{'data.' if mode == 'data' else ''}{kind}.{name}"
        for path in module_spec.files(MODULE_DIR)
        for mode in ("resource", "data")
        for kind, name in module_spec.block_labels(path, mode)
    }
    resources = generated.partition("## Resources")[2].partition("## Inputs")[0]
    listed = set(re.findall(r"^\| `([^`]+)` \|", resources, flags=re.MULTILINE))
    assert addresses and listed == addresses, sorted(addresses ^ listed)
    requirements = generated.partition("## Requirements")[2].partition("## Providers")[0]
    assert f"| aws | `{aws_constraint(MODULE_DIR / 'versions.tf')}` |" in requirements, requirements


def test_module_readme_tables_are_current():
    readme = MODULE_DIR / "README.md"
    assert readme.read_text() == tfdocs.render_readme(readme.read_text(), MODULE_DIR), (
        "terraform/modules/idempotency_lab/README.md is out of date: run `python -m idemlab.tfdocs`"
    )


# One file per plan: a failed run skips the runs after it in the same file.
WRONG_INPUTS = {
    # A list where the type says map, a string where it says number.
    "wrong_type": """
run "plan" {
  command = plan
  variables {
    functions = {
      sweeper = { lesson = "deletion", timeout = "ten", tables = ["deletion_requests"] }
    }
  }
}
""",
    # A table and a function that do not exist, an access level that does not either.
    "wrong_references": """
run "plan" {
  command = plan
  variables {
    functions = {
      sweeper = { lesson = "deletion", tables = { vehicle_naive = "readwrite" }, invokes = ["card_procesor"] }
    }
  }
}
""",
}


@pytest.mark.timeout(300)
def test_wrong_module_inputs_stop_the_plan_with_a_message_naming_the_entry(tmp_path, zips):
    module = tmp_path / "idempotency_lab"
    shutil.copytree(
        MODULE_DIR, module, ignore=shutil.ignore_patterns(".terraform", ".terraform.lock.hcl", "tests", "examples")
    )
    (module / "tests").mkdir()
    for name, run in WRONG_INPUTS.items():
        (module / "tests" / f"{name}.tftest.hcl").write_text(MOCKED_AWS + run)
    init = terraform("init", "-backend=false", "-input=false", "-no-color", cwd=module)
    assert init.returncode == 0, init.stdout + init.stderr
    done = terraform("test", "-no-color", "-var", f"artifacts_dir={zips}", cwd=module)
    output = " ".join((done.stdout + done.stderr).split())
    assert done.returncode != 0 and "0 passed, 2 failed" in output, output[-3000:]
    for expected in (
        # The type constraint, before anything is planned.
        "Invalid value for input variable",
        'element "sweeper": attribute "tables": map of string required',
        # The validation rules, naming the entry and what it refers to.
        'Wrong: sweeper: vehicle_naive = "readwrite".',
        "Wrong: sweeper invokes card_procesor.",
    ):
        assert expected in output, output[-3000:]
    # Refused at the variable: no resource was evaluated with the wrong entry.
    assert "Invalid index" not in output, output[-3000:]


def test_the_embedded_rule_scheduler_states_the_sweepers_real_default_schedule():
    from idemlab.embedded import rule_scheduler

    default = module_spec.default("sweeper_schedule_expression")
    assert f"`{default}`" in rule_scheduler.__doc__ and "sweeper_schedule_expression" in rule_scheduler.__doc__, (
        rule_scheduler.__doc__
    )


def test_the_harness_prefix_check_agrees_with_the_modules_validation():
    # The rule's owner is the module's `prefix` validation; stack.py checks a copy before
    # Terraform runs, so a bad prefix never gets a working copy. Held to the owner here.
    # The conditions as plain values, apart from the syntax-tree reading stack.py's copy comes from.
    conditions = [rule["condition"] for rule in module_spec.variable("prefix")["validation"]]
    (can_regex,) = [condition for condition in conditions if condition.startswith('${can(regex("')]
    pattern = can_regex.removeprefix('${can(regex("').removesuffix('", var.prefix))}')
    refuses_a_dash_last = any('!endswith(var.prefix, "-")' in condition for condition in conditions)
    samples = ["lab", "a", "x1", "lab-1", "ab-cd", "a" * 20, "a" * 21, "", "a-", "ab--", "-a", "1ab", "Lab", "lab_1"]
    for prefix in samples:
        module_accepts = re.fullmatch(pattern, prefix) is not None and not (
            refuses_a_dash_last and prefix.endswith("-")
        )
        harness_accepts = stack.PREFIX_PATTERN.match(prefix) is not None
        assert harness_accepts == module_accepts, (
            f"prefix {prefix!r}: module {module_accepts}, stack.py {harness_accepts}"
        )
