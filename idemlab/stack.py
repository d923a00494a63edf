"""Deploy the Terraform root to the selected backend, and read what it created.

``deploy()`` builds the zips (into the working copy), then runs ``tflocal`` (embedded, LocalStack) or plain
``terraform`` (AWS) in a working copy of ``terraform/`` of its own under
``.lab/terraform/<name>/``, one per (endpoint, prefix): state and tflocal's override file
stay there, so deploys to different endpoints or prefixes never collide. After an apply
the ``lab`` output is saved to ``.lab/outputs/<name>.json``, which ``outputs()`` reads
without Terraform (notebooks call it).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

from idemlab import build, settings

TERRAFORM_SOURCE = settings.ROOT / "terraform"
WORKING_COPIES = settings.STATE_DIR / "terraform"
OUTPUTS_DIR = settings.STATE_DIR / "outputs"
CLI_CONFIG = settings.STATE_DIR / "terraformrc"
PLUGIN_CACHE = settings.STATE_DIR / "plugin-cache"
AWS_PROVIDER = "registry.terraform.io/hashicorp/aws"
# Where a provider mirror is looked for, after $TF_PROVIDER_MIRROR: Terraform's own
# implied mirror folders, then any folder directly under /opt (images often unpack one there).
MIRROR_CANDIDATES = ("~/.terraform.d/plugins", "~/.local/share/terraform/plugins", "/usr/local/share/terraform/plugins", "/usr/share/terraform/plugins", "/opt/*")
# Not copied into a working copy: Terraform's own files and what only the module's tests use.
COPY_IGNORED = (".terraform", ".terraform.lock.hcl", "terraform.tfstate*", "*.tfplan", "localstack_providers_override.tf", "tests", "examples")
OUTPUT_TAIL_LINES = 40
# Most resources wait on the provider's fixed polls (5 s and more), not on the server: run
# them all at once rather than Terraform's default ten.
PARALLELISM = "-parallelism=40"
PREFIX_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,19}$")


class StackError(Exception):
    """Terraform failed, or the stack asked for does not exist."""


def _check_prefix(prefix: str) -> str:
    if not isinstance(prefix, str) or not PREFIX_PATTERN.match(prefix) or prefix.endswith("-"):
        raise ValueError(f"prefix {prefix!r} must be 1-20 characters of a-z, 0-9 and '-', starting with a letter")
    return prefix


def _backend(backend: str | None) -> str:
    chosen = backend or settings.backend()
    if chosen not in settings.BACKENDS:
        raise ValueError(f"backend {chosen!r} is not one of {', '.join(settings.BACKENDS)}")
    return chosen


def stack_name(prefix: str = "lab", backend: str | None = None) -> str:
    """The name of a stack's working copy and outputs file: prefix, backend and where it lives.

    The region is part of it on every backend: a stack applied to one region and then
    planned for another from the same state would orphan the first and rebuild everything.
    """
    chosen = _backend(backend)
    where = settings.region()
    if chosen != "aws":
        url = urlparse(settings.endpoint_url() or "")
        where = f"{url.hostname}-{url.port or 80}-{where}"
    return re.sub(r"[^a-z0-9-]", "-", f"{_check_prefix(prefix)}-{chosen}-{where}".lower())


def provider_mirror() -> Path | None:
    """A local directory holding the AWS provider, if there is one."""
    explicit = os.environ.get("TF_PROVIDER_MIRROR")
    candidates = [explicit] if explicit else list(MIRROR_CANDIDATES)
    for candidate in candidates:
        for path in sorted(Path("/").glob(str(Path(candidate).expanduser()).lstrip("/"))):
            if (path / AWS_PROVIDER).is_dir():
                return path
    if explicit:
        raise StackError(f"TF_PROVIDER_MIRROR={explicit} holds no {AWS_PROVIDER}")
    return None


def cli_config_text(mirror: Path | None, plugin_cache: Path = PLUGIN_CACHE) -> str:
    """Terraform's CLI config: a shared plugin cache, and the mirror when there is one."""
    lines = [f"plugin_cache_dir = {json.dumps(str(plugin_cache))}"]
    if mirror:
        lines += [
            "provider_installation {",
            "  filesystem_mirror {",
            f"    path    = {json.dumps(str(mirror))}",
            f'    include = ["{AWS_PROVIDER}"]',
            "  }",
            "  direct {",
            f'    exclude = ["{AWS_PROVIDER}"]',
            "  }",
            "}",
        ]
    return "\n".join(lines) + "\n"


def write_cli_config() -> Path:
    PLUGIN_CACHE.mkdir(parents=True, exist_ok=True)
    text = cli_config_text(provider_mirror())
    if not CLI_CONFIG.exists() or CLI_CONFIG.read_text() != text:
        CLI_CONFIG.parent.mkdir(parents=True, exist_ok=True)
        partial = CLI_CONFIG.with_suffix(".tmp")
        partial.write_text(text)
        partial.replace(CLI_CONFIG)  # atomic: a Terraform starting meanwhile reads old or new
    return CLI_CONFIG


def terraform_env(backend: str) -> dict[str, str]:
    """Environment of every Terraform subprocess: offline, quiet, and for tflocal local-only."""
    env = dict(os.environ)
    env.update(
        TF_CLI_CONFIG_FILE=str(write_cli_config()),
        TF_IN_AUTOMATION="1",
        TF_INPUT="0",
        CHECKPOINT_DISABLE="1",  # no version check against checkpoint-api.hashicorp.com
    )
    env.setdefault("AWS_DEFAULT_REGION", settings.region())
    if backend == "aws":
        # The AWS provider honours AWS_ENDPOINT_URL too; a value left over from a local
        # backend would send a real deploy to an emulator.
        for name in ("AWS_ENDPOINT_URL", "S3_HOSTNAME"):
            env.pop(name, None)
    else:
        url = settings.endpoint_url()
        env.update(
            AWS_ENDPOINT_URL=url,
            # tflocal's default S3 host (s3.localhost.localstack.cloud) needs public DNS;
            # the endpoint's own host name does not, and makes tflocal use path-style S3.
            S3_HOSTNAME=urlparse(url).hostname or "localhost",
            AWS_ACCESS_KEY_ID="test",
            AWS_SECRET_ACCESS_KEY="test",
            DISABLE_DEPRECATION_NOTICE="1",
        )
        env.pop("AWS_PROFILE", None)
        env.pop("CUSTOMIZE_ACCESS_KEY", None)
    return env


def _tflocal() -> str:
    beside_python = Path(sys.executable).with_name("tflocal")
    found = str(beside_python) if beside_python.exists() else shutil.which("tflocal")
    if not found:
        raise StackError("tflocal is not installed (pip install terraform-local)")
    return found


def _terraform() -> str:
    found = shutil.which("terraform")
    if not found:
        raise StackError("terraform is not on PATH")
    return found


@contextmanager
def _locked(name: str):
    """One Terraform run per working copy at a time."""
    WORKING_COPIES.mkdir(parents=True, exist_ok=True)
    with open(WORKING_COPIES / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _sync_working_copy(name: str) -> Path:
    """Refresh the configuration files of a working copy, keeping its state and .terraform."""
    copy = WORKING_COPIES / name
    copy.mkdir(parents=True, exist_ok=True)
    # *.tf includes an override file a killed tflocal left behind; tflocal refuses to start
    # while one exists.
    for old in copy.glob("*.tf"):
        old.unlink()
    shutil.rmtree(copy / "modules", ignore_errors=True)
    shutil.copytree(TERRAFORM_SOURCE, copy, ignore=shutil.ignore_patterns(*COPY_IGNORED), dirs_exist_ok=True)
    return copy


def _tail(output: str) -> str:
    return "\n".join(output.strip().splitlines()[-OUTPUT_TAIL_LINES:])


def _run(command: list[str], cwd: Path, env: dict[str, str], what: str, ok: tuple[int, ...] = (0,)) -> tuple[int, str]:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    output = done.stdout + done.stderr
    (cwd / f"last-{what}.log").write_text(output)  # the whole story, when the tail is not enough
    if done.returncode not in ok:
        raise StackError(f"terraform {what} failed (exit {done.returncode}) in {cwd}:\n{_tail(output)}")
    return done.returncode, output


def _build(out_dir: Path) -> None:
    try:
        build.build_all(out_dir=out_dir)
    except build.BuildError as exc:
        raise StackError(f"building the function zips failed: {exc}") from exc


class _Stack:
    """A working copy bound to one backend and prefix."""

    def __init__(self, prefix: str, backend: str | None):
        self.prefix = _check_prefix(prefix)
        self.backend = _backend(backend)
        self.name = stack_name(prefix, self.backend)
        self.dir = WORKING_COPIES / self.name
        self.env = terraform_env(self.backend)
        self.runner = [_terraform()] if self.backend == "aws" else [sys.executable, _tflocal()]
        # The stack's own zips, built under its lock: a build elsewhere (another deploy, a
        # test, `make build`) never changes them between Terraform's plan and its apply.
        self.artifacts = self.dir / "artifacts"
        # The region every client of the lab uses (settings.region(): AWS_REGION first), so
        # the stack lands where the notebooks look for it; the root's default is only a default.
        self.variables = ["-var", f"prefix={self.prefix}", "-var", f"artifacts_dir={self.artifacts}", "-var", f"region={settings.region()}"]

    def terraform(self, *args: str, ok: tuple[int, ...] = (0,)) -> tuple[int, str]:
        # init and output need no endpoints: plain terraform is enough.
        plain = args[0] in ("init", "output")
        command = ([_terraform()] if plain else self.runner) + list(args)
        return _run(command, self.dir, self.env, args[0], ok)

    def prepare(self, rebuild: bool = True) -> None:
        """Refresh the configuration; zips built from the sources now, or (rebuild=False)
        the ones the last apply used."""
        _sync_working_copy(self.name)
        if rebuild or not any(self.artifacts.glob("*.zip")):
            _build(self.artifacts)
        # The plugin cache is shared by every working copy, and Terraform does not lock it.
        with _locked(".init"):
            self.terraform("init", "-input=false", "-no-color")


def deploy(prefix: str = "lab", backend: str | None = None) -> dict:
    """Build the zips and apply the root to the backend; return the ``lab`` output."""
    stack = _Stack(prefix, backend)
    with _locked(stack.name):
        stack.prepare()
        started = time.monotonic()
        stack.terraform("apply", "-auto-approve", "-input=false", "-no-color", PARALLELISM, *stack.variables)
        elapsed = time.monotonic() - started
        lab = json.loads(stack.terraform("output", "-json", "-no-color", "lab")[1])
        OUTPUTS_DIR.mkdir(parents=True, exist_ok=True)
        (OUTPUTS_DIR / f"{stack.name}.json").write_text(json.dumps(lab, indent=2, sort_keys=True) + "\n")
    print(f"deployed {stack.name} in {elapsed:.1f} s", file=sys.stderr)
    return lab


def outputs(prefix: str = "lab", backend: str | None = None) -> dict:
    """The ``lab`` output saved by the last deploy of this prefix to this backend."""
    name = stack_name(prefix, backend)
    path = OUTPUTS_DIR / f"{name}.json"
    if not path.exists():
        raise StackError(f"stack {name} is not deployed here (no {path.relative_to(settings.ROOT)}); run `make deploy`")
    return json.loads(path.read_text())


def plan_is_empty(prefix: str = "lab", backend: str | None = None, rebuild: bool = True) -> bool:
    """True when Terraform would change nothing: the deployed stack matches the code.

    rebuild=False plans with the zips of the last apply, so the answer is about Terraform,
    the provider and the backend only, not about sources edited since.
    """
    stack = _Stack(prefix, backend)
    with _locked(stack.name):
        stack.prepare(rebuild)
        # -detailed-exitcode: 0 = no changes, 2 = changes, 1 = error.
        code, _ = stack.terraform("plan", "-detailed-exitcode", "-input=false", "-no-color", PARALLELISM, *stack.variables, ok=(0, 2))
    return code == 0


def plan_text(prefix: str = "lab", backend: str | None = None, rebuild: bool = True) -> str:
    """The full plan output, for reading what a non-empty plan wants to change."""
    stack = _Stack(prefix, backend)
    with _locked(stack.name):
        stack.prepare(rebuild)
        return stack.terraform("plan", "-input=false", "-no-color", *stack.variables)[1]


def destroy(prefix: str = "lab", backend: str | None = None) -> None:
    """Remove everything the stack created, and forget its outputs."""
    stack = _Stack(prefix, backend)
    with _locked(stack.name):
        stack.prepare(rebuild=False)  # the configuration hashes the zips even to destroy
        stack.terraform("destroy", "-auto-approve", "-input=false", "-no-color", PARALLELISM, *stack.variables)
        _remove_working_copy(stack.name)


def forget(prefix: str = "lab", backend: str | None = None) -> None:
    """Drop a stack's working copy and outputs without Terraform: for a backend that is gone
    (an embedded server that stopped took its resources with it)."""
    name = stack_name(prefix, backend)
    with _locked(name):
        _remove_working_copy(name)


def _remove_working_copy(name: str) -> None:
    (OUTPUTS_DIR / f"{name}.json").unlink(missing_ok=True)
    shutil.rmtree(WORKING_COPIES / name, ignore_errors=True)
