"""Every example of the module applied to the embedded backend, as a team would apply it from a
root of its own: `tflocal`'s override file, init, apply, a second plan that must change
nothing, destroy.

One backend (the session's) and one example at a time, each destroyed before the next: at
most one example's resources exist at once. The per-lesson examples are parts of the
complete one, so the whole costs a little over two full stacks (about 30 CPU-s each), most
of it the provider's own waits (queues, functions), not the backend's work.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from idemlab import build, module_spec, settings, stack

MODULE_DIR = settings.ROOT / "terraform" / "modules" / "idempotency_lab"
EXAMPLES = module_spec.examples()
PREFIX = "tfex"  # each example's stack: tfex-<example>, apart from every other test's


def _run(command: list[str], cwd: Path, env: dict[str, str], ok: tuple[int, ...] = (0,)) -> tuple[int, str]:
    done = subprocess.run(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=900,
    )
    assert done.returncode in ok, (
        f"{' '.join(command[:2])} in {cwd.name}: exit {done.returncode}\n{done.stdout[-4000:]}"
    )
    return done.returncode, done.stdout


@pytest.mark.long
@pytest.mark.timeout(3600)
def test_every_example_applies_plans_nothing_more_and_destroys(backend, tmp_path):
    # The module with its examples, as they sit in the repository (source = "../..").
    module = tmp_path / "idempotency_lab"
    ignored = ("tests", ".terraform", ".terraform.lock.hcl", "terraform.tfstate*", stack.OVERRIDE_FILE)
    shutil.copytree(MODULE_DIR, module, ignore=shutil.ignore_patterns(*ignored))
    zips = tmp_path / "zips"
    build.build_all(out_dir=zips)
    env = stack.terraform_env("embedded")
    tflocal = [sys.executable, str(Path(sys.executable).with_name("tflocal"))]
    terraform = shutil.which("terraform")
    assert terraform, "terraform is not on PATH"
    applied = []
    for name in EXAMPLES:
        directory = module / "examples" / name
        variables = [f"-var=artifacts_dir={zips}", f"-var=region={settings.region()}", f"-var=prefix={PREFIX}-{name}"]
        # tflocal writes its override file and runs nothing else (DRY_RUN); Terraform does the rest.
        _run([*tflocal, "plan"], directory, env | {"DRY_RUN": "1"})
        assert (directory / stack.OVERRIDE_FILE).exists(), f"tflocal wrote no override file for {name}"
        with stack.plugin_cache_lock():
            _run([terraform, "init", "-input=false", "-no-color"], directory, env)
        try:
            _run([terraform, "apply", "-auto-approve", "-no-color", stack.PARALLELISM, *variables], directory, env)
            code, plan = _run(
                [terraform, "plan", "-detailed-exitcode", "-no-color", stack.PARALLELISM, *variables],
                directory,
                env,
                ok=(0, 2),
            )
            assert code == 0, f"the second plan of examples/{name} is not empty:\n{plan[-4000:]}"
            applied.append(name)
        finally:
            _run([terraform, "destroy", "-auto-approve", "-no-color", stack.PARALLELISM, *variables], directory, env)
    assert applied == EXAMPLES
