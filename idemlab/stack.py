"""Deploy the Terraform root to the selected backend, and read what it created.

``deploy()`` builds the zips and runs ``terraform`` in a working copy of ``terraform/`` under
``.lab/terraform/<name>/``, one per (endpoint, prefix): state stays there, so deploys never
collide. The prefix is the participant's name (``settings.participant()`` when not given:
$PARTICIPANT, else what `make deploy PARTICIPANT=...` remembered, else ``lab``).
On the embedded backend and LocalStack the endpoints come from ``tflocal``'s override
file, generated once and kept while its inputs stay the same (tflocal is Python that parses
every file of the root; run for each command it cost seconds of every deploy and plan).
``terraform init`` runs again only when the configuration it installed for changed. The
``lab`` output is saved to ``.lab/outputs/<name>.json``, which ``outputs()`` reads without Terraform.
"""

from __future__ import annotations

import fcntl
import hashlib
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

from idemlab import build, interrupts, module_spec, progress, settings

TERRAFORM_SOURCE = settings.ROOT / "terraform"
WORKING_COPIES = settings.STATE_DIR / "terraform"
OUTPUTS_DIR = settings.STATE_DIR / "outputs"
CLI_CONFIG = settings.STATE_DIR / "terraformrc"
PLUGIN_CACHE = settings.STATE_DIR / "plugin-cache"
AWS_PROVIDER = "registry.terraform.io/hashicorp/aws"
# Where a provider mirror is looked for, after $TF_PROVIDER_MIRROR: Terraform's own
# implied mirror folders, then any folder directly under /opt (images often unpack one there).
MIRROR_CANDIDATES = (
    "~/.terraform.d/plugins",
    "~/.local/share/terraform/plugins",
    "/usr/local/share/terraform/plugins",
    "/usr/share/terraform/plugins",
    "/opt/*",
)
# Not copied into a working copy: Terraform's own files and what only the module's tests use.
# The root's lock file is copied: every working copy installs the provider it records
# (terraform/.terraform.lock.hcl, committed as HashiCorp recommends for a root configuration).
COPY_IGNORED = (
    ".terraform",
    "terraform.tfstate*",
    "*.tfplan",
    "localstack_providers_override.tf",
    "tests",
    "examples",
)
OUTPUT_TAIL_LINES = 40
# Most resources wait on the provider's fixed polls (5 s and more), not on the server: all at once, not ten.
PARALLELISM = "-parallelism=40"
# tflocal's override file (its default name), and what the working copy keeps to reuse it and
# to skip an init that would change nothing: neither ends in .tf, so Terraform never reads them.
OVERRIDE_FILE = "localstack_providers_override.tf"
OVERRIDE_KEPT = ".idemlab-override.json"
INIT_STAMP = ".idemlab-init-stamp"
SAVED_PLAN = "deploy.tfplan"
# The lessons a stack was deployed with (`make deploy LESSONS=...`), kept in its working copy so
# that its plan and destroy use them too; absent: every lesson (the module's default).
LESSONS_FILE = "lessons.json"
ALL_LESSONS = "all"
# Beside the state: the instance of the backend process its resources were created on
# (backend_instance()). Written before each apply, so it names the instance even of an apply
# that was interrupted. Not a .tf file: Terraform never reads it.
BACKEND_INSTANCE = ".idemlab-backend-instance"
# Where a state applied to another backend instance is moved, kept for a look, never read again.
OTHER_INSTANCE_STATE = "terraform.tfstate.other-instance"
# Beside the state: the resources an interrupted apply was creating when Terraform stopped
# (apply_start without apply_complete). Terraform cancels the calls in flight; a create call
# the backend had already served leaves a resource the state does not record, and the next
# apply's create fails on it ("Function already exist"). The next deploy adopts each one that
# exists (``terraform import``) before it applies.
IN_FLIGHT = ".idemlab-in-flight.json"
ADOPT_FILE = "adopt_interrupted.tf"
# What names a resource of the module for `terraform import`, by type: an attribute known at
# plan time. Types missing here are created by calls that succeed again on an existing
# resource (SQS CreateQueue with the same attributes, PutRolePolicy, PutMetricAlarm, ...).
IMPORT_ID = {
    "aws_lambda_function": "function_name",
    "aws_dynamodb_table": "name",
    "aws_iam_role": "name",
    "aws_cloudwatch_log_group": "name",
    "aws_s3_bucket": "bucket",
    "aws_scheduler_schedule_group": "name",
    "aws_cloudwatch_event_rule": "name",
}
# How long the backend's health answer, which names its instance, is waited for. The backend
# answered `make up` a moment ago; only a stuck one takes this long, and then the state is
# kept and refreshed, as before: slower, never wrong.
INSTANCE_ANSWER_SECONDS = 60
COUNTED_PLAN = "count.tfplan"
# The environment tflocal reads (its endpoint, host names, keys, region, options): a change
# in any of these makes a new override file. TF_LOG and friends only change what is logged.
OVERRIDE_ENVIRONMENT = (
    "AWS_",
    "TF_",
    "S3_HOSTNAME",
    "LOCALSTACK_",
    "EDGE_PORT",
    "CUSTOMIZE_ACCESS_KEY",
    "SKIP_ALIASES",
    "LS_PROVIDERS_FILE",
    "ADDITIONAL_TF_OVERRIDE_LOCATIONS",
    "USE_EXEC",
)
LOGGING_ONLY = ("TF_LOG", "TF_LOG_PATH", "TF_LOG_CORE", "TF_LOG_PROVIDER")
# The module's prefix rule (its `prefix` validation, the rule's one owner), checked before Terraform runs.
PREFIX_PATTERN = module_spec.prefix_pattern()
GOGC = "400"


class StackError(Exception):
    """Terraform failed, or the stack asked for does not exist."""


def stack_name(prefix: str | None = None, backend: str | None = None) -> str:
    """The name of a stack's working copy and outputs file: prefix, backend and where it lives.

    The prefix is the participant's name (settings.participant() when not given): each
    participant's stack has its own working copy, so its own Terraform state.

    The region is part of it on every backend: a stack applied to one region and then
    planned for another from the same state would orphan the first and rebuild everything.
    """
    prefix = settings.check_prefix(settings.participant() if prefix is None else prefix)
    chosen, url = settings.backend(backend), urlparse(settings.endpoint_url() or "")
    where = settings.region() if chosen == "aws" else f"{url.hostname}-{url.port or 80}-{settings.region()}"
    return re.sub(r"[^a-z0-9-]", "-", f"{prefix}-{chosen}-{where}".lower())


def provider_mirror() -> Path | None:
    """A local directory holding the AWS provider, if there is one."""
    explicit = os.environ.get("TF_PROVIDER_MIRROR")
    for candidate in [explicit] if explicit else MIRROR_CANDIDATES:
        for path in sorted(Path("/").glob(str(Path(candidate).expanduser()).lstrip("/"))):
            if (path / AWS_PROVIDER).is_dir():
                return path
    if explicit:
        raise StackError(f"TF_PROVIDER_MIRROR={explicit} holds no {AWS_PROVIDER}")
    return None


def cli_config_text(mirror: Path | None, plugin_cache: Path = PLUGIN_CACHE) -> str:
    """Terraform's CLI config: a shared plugin cache, filled once and then only linked to,
    and the mirror when there is one.

    Every working directory's provider folder is a link into the cache. Without
    ``plugin_cache_may_break_dependency_lock_file``, an init in a directory with no lock
    file (every fresh working copy and test copy) does not trust the cache: it installs the
    provider into it again, removing the cache's folder first. A Terraform running in
    another directory at that moment finds no provider ("fork/exec
    .terraform/providers/...: no such file or directory"). With it, an init uses what the
    cache holds and writes nothing there; the lock file it writes then records only this
    platform's checksum (Terraform's CLI configuration docs, "Provider Plugin Cache").
    """
    text = f"plugin_cache_dir = {json.dumps(str(plugin_cache))}\n"
    text += "plugin_cache_may_break_dependency_lock_file = true\n"
    if mirror:
        text += f"""provider_installation {{
  filesystem_mirror {{
    path    = {json.dumps(str(mirror))}
    include = ["{AWS_PROVIDER}"]
  }}
  direct {{ exclude = ["{AWS_PROVIDER}"] }}
}}
"""
    return text


def terraform_env(backend: str) -> dict[str, str]:
    """Environment of every Terraform subprocess: offline, quiet, and for tflocal local-only."""
    PLUGIN_CACHE.mkdir(parents=True, exist_ok=True)
    build.write_if_changed(CLI_CONFIG, cli_config_text(provider_mirror()).encode())
    # TF_INPUT=0: -input=false to every command; CHECKPOINT_DISABLE: no version check with checkpoint-api.hashicorp.com.
    env = {
        "AWS_DEFAULT_REGION": settings.region(),
        **os.environ,
        "TF_CLI_CONFIG_FILE": str(CLI_CONFIG),
        "TF_IN_AUTOMATION": "1",
        "TF_INPUT": "0",
        "CHECKPOINT_DISABLE": "1",
    }
    # Terraform and the AWS provider are Go programs that build the provider's whole schema
    # at every start (three starts per plan): with Go's garbage collector at 400 instead of
    # its default 100 a plan costs about 30% less CPU, for ~150 MB more peak memory. A GOGC
    # of the caller's own wins.
    env.setdefault("GOGC", GOGC)
    # On AWS: the AWS provider honours AWS_ENDPOINT_URL too; a value left over from a local
    # backend would send a real deploy to an emulator. Locally: no profile, dummy keys.
    dropped = ("AWS_ENDPOINT_URL", "S3_HOSTNAME") if backend == "aws" else ("AWS_PROFILE", "CUSTOMIZE_ACCESS_KEY")
    env = {name: value for name, value in env.items() if name not in dropped}
    if backend == "aws":
        return env
    url = settings.endpoint_url()
    # tflocal's default S3 host (s3.localhost.localstack.cloud) needs public DNS; the endpoint's
    # own host name does not, and makes tflocal use path-style S3.
    return env | {
        "AWS_ENDPOINT_URL": url,
        "S3_HOSTNAME": urlparse(url).hostname or "localhost",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "DISABLE_DEPRECATION_NOTICE": "1",
    }


def _executable(name: str) -> str:
    """``tflocal`` (beside this Python first, as pip installs it) or ``terraform``."""
    found = shutil.which(name, path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if not found:
        hint = "pip install terraform-local" if name == "tflocal" else "not on PATH"
        raise StackError(f"{name} is not installed ({hint})")
    return found


@contextmanager
def _locked(name: str):
    """One Terraform run per working copy at a time."""
    WORKING_COPIES.mkdir(parents=True, exist_ok=True)
    with open(WORKING_COPIES / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def plugin_cache_lock():
    """Held around every `terraform init` that may fill the provider plugin cache: the
    cache is shared by every working copy and every test copy, and Terraform does not lock
    it (two first installs at once fail with "mkdir ...: file exists"). Only the first
    init writes there (``cli_config_text``), so Terraform runs that use the cache need not
    hold it."""
    return _locked(".init")


def parse_lessons(text: str | None) -> list[str] | None:
    """``LESSONS=vehicles,checkout`` as a list; None for unset, and ``[]`` for ``all`` (forget a choice)."""
    if text is None or not text.strip():
        return None
    names = sorted({name for name in text.replace(",", " ").split() if name})
    return [] if names == [ALL_LESSONS] else names


class _Stack:
    """A working copy bound to one backend and prefix."""

    def __init__(self, prefix: str | None, backend: str | None, lessons: list[str] | None = None):
        prefix = settings.participant() if prefix is None else prefix
        self.name = stack_name(prefix, backend)  # checks both
        self.prefix = prefix
        self.backend = settings.backend(backend)
        self.dir = WORKING_COPIES / self.name
        self.env = terraform_env(self.backend)
        # Plain terraform for every command: on a local backend the override file (prepare())
        # holds the endpoints tflocal would have given it.
        self.runner = [_executable("terraform")]
        # The stack's own zips, built under its lock: a build elsewhere (another deploy, a
        # test, `make build`) never changes them between Terraform's plan and its apply.
        self.artifacts = self.dir / "artifacts"
        # The region every client of the lab uses (settings.region(): AWS_REGION first), so
        # the stack lands where the notebooks look for it; the root's default is only a default.
        self.variables = [f"-var=prefix={prefix}", f"-var=artifacts_dir={self.artifacts}"]
        self.variables.append(f"-var=region={settings.region()}")
        # The lessons asked for now, else the ones this stack was deployed with (the module's
        # `lessons` input refuses a slug it does not know, naming the slugs it does).
        self.lessons = self.remembered_lessons() if lessons is None else lessons
        if self.lessons:
            self.variables.append(f"-var=lessons={json.dumps(self.lessons)}")

    def remembered_lessons(self) -> list[str]:
        """The lessons of this stack's last deploy; [] for every lesson."""
        try:
            return json.loads((self.dir / LESSONS_FILE).read_text())
        except (OSError, ValueError):
            return []

    def remember_lessons(self) -> None:
        """Kept after an apply, so later plans and the destroy use the same lessons."""
        if self.lessons:
            build.write_if_changed(self.dir / LESSONS_FILE, json.dumps(self.lessons).encode())
        else:
            (self.dir / LESSONS_FILE).unlink(missing_ok=True)

    def terraform(self, *args: str, ok: tuple[int, ...] = (0,)) -> tuple[int, str]:
        ran = subprocess.run(
            [*self.runner, args[0], "-no-color", *args[1:]],
            cwd=self.dir,
            env=self.env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )  # one stream, in order
        (self.dir / f"last-{args[0]}.log").write_text(ran.stdout)  # the whole story, when the tail is not enough
        if ran.returncode not in ok:
            tail = "\n".join(ran.stdout.strip().splitlines()[-OUTPUT_TAIL_LINES:])
            raise StackError(f"terraform {args[0]} failed (exit {ran.returncode}) in {self.dir}:\n{tail}")
        return ran.returncode, ran.stdout

    def follow(self, stage: progress.Stage, counted: str, *args: str) -> tuple[int, list[dict]]:
        """Run ``terraform <args> -json``, showing its machine-readable messages on ``stage``
        as they come: each message of type ``counted`` (``apply_complete``: a resource
        created, changed or destroyed; ``refresh_complete``: a resource checked) advances it,
        and a plan's ``change_summary`` gives it its total. Returns the exit code and the
        messages; ``last-<command>.log`` gets their text, ``last-<command>.jsonl`` the messages.

        Read to the end even after a Ctrl-C: Terraform received it too (same process group)
        and is stopping, writing its state; a KeyboardInterrupt (a caller that did not use
        ``interrupts.stopping_safely()``) is raised again once it has ended."""
        process = subprocess.Popen(
            [*self.runner, args[0], "-json", "-no-color", *args[1:]],
            cwd=self.dir,
            env=self.env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        messages: list[dict] = []
        keyboard_interrupt = False
        while True:
            try:
                for line in process.stdout:
                    messages.append(message := _message(line))
                    _show(stage, counted, message)
                process.wait()
                break
            except KeyboardInterrupt:
                keyboard_interrupt = True
        if args[0] == "apply" and (keyboard_interrupt or interrupts.requested()):
            self.record_in_flight(messages)
        (self.dir / f"last-{args[0]}.log").write_text("".join(_text(message) + "\n" for message in messages))
        (self.dir / f"last-{args[0]}.jsonl").write_text("".join(json.dumps(message) + "\n" for message in messages))
        if keyboard_interrupt:
            raise KeyboardInterrupt
        return process.returncode, messages

    def record_in_flight(self, messages: list[dict]) -> None:
        """Add the creations an interrupted apply left in flight to those still to adopt."""
        started = {_address(m) for m in messages if m.get("type") == "apply_start" and _action(m) == "create"}
        ended = {_address(m) for m in messages if m.get("type") == "apply_complete"}
        kept = set(json.loads(_read(self.dir / IN_FLIGHT) or "[]"))
        build.write_if_changed(self.dir / IN_FLIGHT, json.dumps(sorted(kept | (started - ended))).encode())

    def adopt_in_flight(self, stage: progress.Stage) -> bool:
        """Adopt what an interrupted apply created but did not record: for each recorded creation
        that the saved plan still wants to create and the backend holds, an ``import`` block
        (ADOPT_FILE, which the next ``prepare()`` removes with the other .tf files). Whether any
        was written (the plan must then be made again). The record stays until an apply ends
        well: a deploy interrupted again before that adopts them next time."""
        recorded = json.loads(_read(self.dir / IN_FLIGHT) or "[]")
        if not recorded:
            return False
        shown = json.loads(self.terraform("show", "-json", SAVED_PLAN)[1])
        planned = {change["address"]: change for change in shown.get("resource_changes", [])}
        blocks = []
        for address in recorded:
            change = planned.get(address)
            attribute = change and IMPORT_ID.get(change["type"])
            if not attribute or change["change"]["actions"] != ["create"]:
                continue  # recorded in the state after all, or made by calls that may repeat
            name = str((change["change"].get("after") or {}).get(attribute))
            if _exists(change["type"], name):
                stage.note(f"adopting {address} ({name}): the interrupted deploy created it without recording it")
                blocks.append(f"import {{\n  to = {address}\n  id = {json.dumps(name)}\n}}\n")
        if blocks:
            (self.dir / ADOPT_FILE).write_text("".join(blocks))
        return bool(blocks)

    def failed(self, command: str, code: int, messages: list[dict]) -> StackError:
        """The error of a ``follow``ed command: its last lines, errors in full."""
        tail = "\n".join("\n".join(_text(message) for message in messages).splitlines()[-OUTPUT_TAIL_LINES:])
        return StackError(f"terraform {command} failed (exit {code}) in {self.dir}:\n{tail}")

    def change(self, action: str, *flags: str, ok: tuple[int, ...] = (0,)) -> tuple[int, str]:
        """plan, apply or destroy, with the stack's variables."""
        return self.terraform(action, *flags, PARALLELISM, *self.variables, ok=ok)

    def prepare(self, rebuild: bool = True) -> None:
        """Refresh the configuration files, keeping state and .terraform; zips built from the
        sources now, or (rebuild=False) the ones the last apply used."""
        for old in self.dir.glob("*.tf"):  # with an override file a killed tflocal left: tflocal refuses one
            old.unlink()
        shutil.rmtree(self.dir / "modules", ignore_errors=True)
        shutil.copytree(TERRAFORM_SOURCE, self.dir, ignore=shutil.ignore_patterns(*COPY_IGNORED), dirs_exist_ok=True)
        if rebuild or not any(self.artifacts.glob("*.zip")):
            try:
                build.build_all(out_dir=self.artifacts)
            except build.BuildError as exc:
                raise StackError(f"building the function zips failed: {exc}") from exc
        with plugin_cache_lock():
            if _read(self.dir / INIT_STAMP) != self.init_inputs():
                (self.dir / INIT_STAMP).unlink(missing_ok=True)  # a failed init leaves no stamp behind
                self.terraform("init")
                # Taken after the init: it records what init installed (the lock file, the modules).
                build.write_if_changed(self.dir / INIT_STAMP, self.init_inputs().encode())
        if self.backend != "aws":
            self.write_override()

    def init_inputs(self) -> str:
        """What `terraform init` installs from: every configuration file (its module calls and
        provider requirements), the CLI config (the mirror), and whether what it installed is
        still there. The same digest as at the last init: that init's result stands."""
        digest = hashlib.sha256(CLI_CONFIG.read_bytes())
        for path in sorted(self.dir.rglob("*.tf")):
            if path.name != OVERRIDE_FILE and ".terraform" not in path.relative_to(self.dir).parts:
                digest.update(f"{path.relative_to(self.dir)}\0".encode() + path.read_bytes() + b"\0")
        installed = [self.dir / ".terraform.lock.hcl", self.dir / ".terraform" / "modules" / "modules.json"]
        digest.update(repr([(path.name, path.exists() and path.read_bytes()) for path in installed]).encode())
        return digest.hexdigest()

    def override_inputs(self) -> str:
        """What tflocal's override file is made from: the root's own files, the lock file (the
        provider version decides some endpoints), tflocal's version and the environment it reads."""
        from importlib.metadata import version

        digest = hashlib.sha256(version("terraform-local").encode())
        for path in sorted([*self.dir.glob("*.tf"), self.dir / ".terraform.lock.hcl"]):
            if path.name != OVERRIDE_FILE and path.exists():
                digest.update(f"{path.name}\0".encode() + path.read_bytes() + b"\0")
        read = {
            name: value
            for name, value in self.env.items()
            if name.startswith(OVERRIDE_ENVIRONMENT) and name not in LOGGING_ONLY
        }
        digest.update(json.dumps(read, sort_keys=True).encode())
        return digest.hexdigest()

    def write_override(self) -> None:
        """tflocal's override file, from the one kept when its inputs have not changed, else
        made by tflocal itself (DRY_RUN=1: it writes the file and runs no Terraform)."""
        key, kept_path, override = self.override_inputs(), self.dir / OVERRIDE_KEPT, self.dir / OVERRIDE_FILE
        kept = json.loads(kept_path.read_text()) if kept_path.exists() else {}
        if kept.get("inputs") == key:
            override.write_text(kept["text"])
            return
        override.unlink(missing_ok=True)  # tflocal asks before overwriting one
        made = subprocess.run(
            [sys.executable, _executable("tflocal"), "plan"],
            cwd=self.dir,
            env=self.env | {"DRY_RUN": "1"},
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        if made.returncode != 0 or not override.exists():
            raise StackError(
                f"tflocal could not write its override file in {self.dir} (exit {made.returncode}):\n"
                + made.stdout[-3000:]
            )
        build.write_if_changed(kept_path, json.dumps({"inputs": key, "text": override.read_text()}).encode())

    def own_state(self) -> str:
        """Make the state describe this backend instance; say so ("" when nothing changed).

        A state whose resources were created on another instance of a backend that keeps
        them in memory (the embedded server before a `make down` or a reboot) names
        resources that are all gone: refreshing each of them only finds that out, slowly.
        That state is moved aside and the deploy starts from an empty one. Decided by the
        instance recorded beside the state, never by how the backend answers: a state with
        no record (made before records were kept) is kept and refreshed."""
        instance = backend_instance(self.backend)
        if instance is None:
            return ""
        record, state = self.dir / BACKEND_INSTANCE, self.dir / "terraform.tfstate"
        recorded = _read(record)
        said = ""
        if recorded is not None and recorded != instance and _holds_resources(state):
            count = _resource_count(state)
            state.replace(self.dir / OTHER_INSTANCE_STATE)
            (self.dir / IN_FLIGHT).unlink(missing_ok=True)  # what was in flight went with the old instance
            (self.dir / "terraform.tfstate.backup").unlink(missing_ok=True)
            said = (
                f"the {self.backend} backend at {settings.endpoint_url()} is not the one this stack's state was "
                f"applied to (it restarted since, and its {count} resources went with it): starting from an empty state"
            )
        build.write_if_changed(record, instance.encode())
        return said

    def again(self) -> str:
        """The command that deploys this stack again, as a learner types it."""
        return "`make deploy`" if self.prefix == settings.participant() else f"`make deploy PARTICIPANT={self.prefix}`"

    def lab_output(self) -> dict:
        """The ``lab`` output, from the state the apply just wrote (its ``outputs`` member, as
        `terraform output -json lab` prints it, without starting Terraform once more); from
        `terraform output` when the state does not hold it in that shape."""
        try:
            value = json.loads((self.dir / "terraform.tfstate").read_text())["outputs"]["lab"]["value"]
        except (OSError, ValueError, KeyError, TypeError):
            value = None
        if isinstance(value, dict):
            return value
        return json.loads(self.terraform("output", "-json", "lab")[1])


def backend_instance(backend: str) -> str | None:
    """Which backend process the stack is applied to, where the stack's resources live in
    that process's memory only: the embedded backend's health answer names its instance
    (``idemlab.embedded.server.INSTANCE``). None where resources outlive the process
    (AWS; LocalStack, which may persist its state) or where no answer came."""
    if backend != "embedded":
        return None
    from idemlab.embedded.server import health

    found = health(settings.endpoint_url(), timeout=INSTANCE_ANSWER_SECONDS)
    return (found or {}).get("instance")


def _read(path: Path) -> str | None:
    return path.read_text() if path.exists() else None


class JoinedClone(StackError):
    """This clone joined a stack from a handout: its Terraform state is on the instructor's machine."""


def refuse_if_joined(action: str) -> None:
    """Plan, apply and destroy belong to whoever holds the stack's state, not to a joined clone."""
    handout = settings.joined()
    if handout:
        raise JoinedClone(
            f"this clone joined {handout['participant']}'s stack from a handout (.lab/{settings.JOINED_FILE.name}): "
            f"its Terraform state is on the instructor's machine, so {action} runs there, not here"
        )


@contextmanager
def _prepared(
    prefix: str | None,
    backend: str | None,
    rebuild: bool = True,
    action: str = "terraform",
    lessons: list[str] | None = None,
):
    refuse_if_joined(action)
    stack = _Stack(prefix, backend, lessons)
    with _locked(stack.name):
        stack.prepare(rebuild)
        yield stack


def deploy(
    prefix: str | None = None,
    backend: str | None = None,
    lessons: list[str] | None = None,
    stage: progress.Stage | None = None,
) -> dict:
    """Build the zips and apply the root to the backend; return the ``lab`` output.

    ``lessons``: the slugs to provision (the module's `lessons` input), remembered for the
    stack's later plans and destroy; None: the ones it was deployed with, else all; []: all.

    Progress: a stage of its own for the check of a deployed stack and one for the apply
    (resources done of the plan's count), or, given ``stage`` (a workshop's), the resources
    counted there. After a Ctrl-C (``interrupts.stopping_safely()``), Terraform stops on its
    own and this raises ``interrupts.Interrupted``, saying what it left."""
    try:
        return _deploy(prefix, backend, lessons, stage)
    except StackError as exc:
        if interrupts.requested():  # an init or a build stopped by the same Ctrl-C
            raise interrupts.Interrupted(
                f"the deploy stopped before Terraform applied anything: run `make deploy` again ({exc})"
            ) from exc
        raise


def _deploy(prefix: str | None, backend: str | None, lessons: list[str] | None, shared: progress.Stage | None) -> dict:
    with _prepared(prefix, backend, action="deploy", lessons=lessons) as stack:
        started = time.monotonic()
        # A redeploy is planned first, applied only when the plan changes something: Terraform
        # walks the graph again to apply even an empty plan, starting the provider once more
        # (seconds on a loaded 2-core machine), and an unchanged deploy is the one a learner repeats most.
        planned = stack.dir / SAVED_PLAN
        planned.unlink(missing_ok=True)
        if said := stack.own_state():
            print(said, file=sys.stderr, flush=True)
        interrupts.check(
            f"the deploy of {stack.name} stopped before Terraform started: run {stack.again()} to deploy it"
        )
        state = stack.dir / "terraform.tfstate"
        total = None
        if _holds_resources(state) or (stack.dir / IN_FLIGHT).exists():
            checked = _resource_count(state)
            with _stage(shared, f"checking {stack.name}'s {checked} resources on {stack.backend}", checked) as stage:
                plan = ("plan", "-detailed-exitcode", f"-out={SAVED_PLAN}", PARALLELISM, *stack.variables)
                # A workshop's stage counts what is applied, not what is checked.
                counted = "refresh_complete" if shared is None else ""
                code, messages = stack.follow(stage, counted, *plan)
                if code == 2 and not interrupts.requested() and stack.adopt_in_flight(stage):
                    code, messages = stack.follow(stage, "", *plan)  # planned again, with what was adopted
                elif code == 0:
                    (stack.dir / IN_FLIGHT).unlink(missing_ok=True)  # nothing to create: nothing to adopt
            interrupts.check(
                f"the deploy of {stack.name} stopped while planning; nothing was changed: run {stack.again()}"
            )
            if code not in (0, 2):  # 0: no changes, 2: changes
                raise stack.failed("plan", code, messages)
            total = _planned_count(messages) if code == 2 else 0
        if total != 0:
            # Nothing deployed yet: planned and applied in one run (a plan saved first would
            # start Terraform and the provider once more for nothing). Else the saved plan,
            # which carries its variables (Terraform refuses -var beside one).
            arguments = [SAVED_PLAN] if total else stack.variables
            with _stage(shared, f"deploying {stack.name} to {stack.backend}: resources done", total) as stage:
                code, messages = stack.follow(
                    stage, "apply_complete", "apply", "-auto-approve", PARALLELISM, *arguments
                )
                total = stage.total if shared is None else total
            if interrupts.requested():
                raise interrupts.Interrupted(
                    f"the deploy of {stack.name} was interrupted: Terraform finished "
                    f"{_done_of(messages, total)} and recorded them in its state; run {stack.again()} to finish it"
                )
            if code != 0:
                raise stack.failed("apply", code, messages)
            (stack.dir / IN_FLIGHT).unlink(missing_ok=True)  # all adopted or made by now
        planned.unlink(missing_ok=True)
        stack.remember_lessons()
        elapsed = time.monotonic() - started
        lab = stack.lab_output()
        save_outputs(stack.name, lab)
    print(f"deployed {stack.name} in {elapsed:.1f} s", file=sys.stderr)
    return lab


@contextmanager
def _stage(shared: progress.Stage | None, what: str, total: int | None):
    """A deploy's own stage, or (a workshop's deploys) the shared one they all count on."""
    if shared is not None:
        yield shared
        return
    with progress.Stage(what, total=total, unit="resources") as stage:
        yield stage


def _message(line: str) -> dict:
    """One line of Terraform's -json output; a line that is not JSON (a crash) as a message of its own."""
    try:
        message = json.loads(line)
    except ValueError:
        return {"@message": line.rstrip("\n"), "type": "text"}
    return message if isinstance(message, dict) else {"@message": line.rstrip("\n"), "type": "text"}


def _text(message: dict) -> str:
    """A message as Terraform would have printed it: a diagnostic with its detail."""
    text = message.get("@message", "")
    diagnostic = message.get("diagnostic") or {}
    if diagnostic.get("detail"):
        where = f" ({diagnostic['address']})" if diagnostic.get("address") else ""
        text += f"{where}\n{diagnostic['detail']}"
    return text


def _show(stage: progress.Stage, counted: str, message: dict) -> None:
    kind = message.get("type")
    # A data source read during an apply has its apply_complete too, and no place in the plan's count.
    if kind == counted and (message.get("hook") or {}).get("action") != "read":
        stage.advance()
    elif kind == "change_summary" and (message.get("changes") or {}).get("operation") == "plan":
        if stage.total is None:
            stage.set_total(_planned_count([message]))
    elif (
        kind == "diagnostic"
        and (message.get("diagnostic") or {}).get("severity") == "error"
        and not interrupts.requested()
    ):
        # (After a Ctrl-C every call in flight ends with "context canceled": the summary says what was left.)
        stage.note(f"terraform: {message.get('@message', '')}")


def _exists(kind: str, name: str) -> bool:
    """Whether the backend holds the resource of Terraform type ``kind`` named ``name``."""
    from botocore.exceptions import ClientError

    from idemlab import clients

    calls = {
        "aws_lambda_function": lambda: clients.client("lambda").get_function(FunctionName=name),
        "aws_dynamodb_table": lambda: clients.client("dynamodb").describe_table(TableName=name),
        "aws_iam_role": lambda: clients.client("iam").get_role(RoleName=name),
        "aws_s3_bucket": lambda: clients.client("s3").head_bucket(Bucket=name),
        "aws_scheduler_schedule_group": lambda: clients.client("scheduler").get_schedule_group(Name=name),
        "aws_cloudwatch_event_rule": lambda: clients.client("events").describe_rule(Name=name),
    }
    try:
        if kind == "aws_cloudwatch_log_group":
            found = clients.client("logs").describe_log_groups(logGroupNamePrefix=name)["logGroups"]
            return any(group["logGroupName"] == name for group in found)
        calls[kind]()
    except ClientError:  # not found (each service names it its own way); any other answer: not adopted
        return False
    return True


def _address(message: dict) -> str:
    return ((message.get("hook") or {}).get("resource") or {}).get("addr", "")


def _action(message: dict) -> str:
    return (message.get("hook") or {}).get("action", "")


def _planned_count(messages: list[dict]) -> int:
    """What a plan's summary says will change: resources added, changed, removed or imported."""
    for message in messages:
        changes = message.get("changes") or {}
        if message.get("type") == "change_summary" and changes.get("operation") == "plan":
            return sum(int(changes.get(kind) or 0) for kind in ("add", "change", "remove", "import"))
    return 0


def _done_of(messages: list[dict], total: int | None) -> str:
    done = sum(
        1
        for message in messages
        if message.get("type") == "apply_complete" and (message.get("hook") or {}).get("action") != "read"
    )
    return f"{done} of {total} resources" if total else f"{done} resources"


def save_outputs(name: str, lab: dict) -> None:
    """The ``lab`` output where ``outputs()`` reads it: after a deploy, or from a handout (`make join`)."""
    saved = json.dumps(lab, indent=2, sort_keys=True) + "\n"
    build.write_if_changed(OUTPUTS_DIR / f"{name}.json", saved.encode())  # never half a file to outputs()


def planned_resources(
    prefix: str | None = None, backend: str | None = None, lessons: list[str] | None = None
) -> dict[str, int]:
    """The managed resources the stack has after a deploy, by Terraform type: from a saved
    plan, so on an account where it is not deployed yet (what a workshop's pre-check needs);
    ``lessons`` as for ``deploy`` (not remembered: nothing is applied)."""
    with _prepared(prefix, backend, action="the workshop's plan", lessons=lessons) as stack:
        planned = stack.dir / COUNTED_PLAN
        try:
            stack.change("plan", f"-out={COUNTED_PLAN}")
            shown = json.loads(stack.terraform("show", "-json", COUNTED_PLAN)[1])
        finally:
            planned.unlink(missing_ok=True)
    counts: dict[str, int] = {}
    for change in shown.get("resource_changes", []):
        if change["mode"] == "managed" and change["change"]["actions"] != ["delete"]:
            counts[change["type"]] = counts.get(change["type"], 0) + 1
    return dict(sorted(counts.items()))


def _holds_resources(state: Path) -> bool:
    """Whether a Terraform state file records any resource; one that cannot be read is taken
    to hold some (the deploy then plans first, as it always did)."""
    try:
        return bool(json.loads(state.read_text()).get("resources"))
    except FileNotFoundError:
        return False
    except (OSError, ValueError, AttributeError):
        return True


def _resource_count(state: Path) -> int:
    """The managed resource instances a state file records."""
    try:
        resources = json.loads(state.read_text()).get("resources") or []
    except (OSError, ValueError, AttributeError):
        return 0
    return sum(len(resource.get("instances") or []) for resource in resources if resource.get("mode") == "managed")


def outputs(prefix: str | None = None, backend: str | None = None) -> dict:
    """The ``lab`` output saved by the last deploy of this prefix to this backend."""
    name = stack_name(prefix, backend)
    if not (path := OUTPUTS_DIR / f"{name}.json").exists():
        raise StackError(f"stack {name} is not deployed here (no {path.relative_to(settings.ROOT)}); run `make deploy`")
    return json.loads(path.read_text())


def plan(
    prefix: str | None = None, backend: str | None = None, rebuild: bool = True, lessons: list[str] | None = None
) -> tuple[bool, str]:
    """Whether Terraform would change nothing (the deployed stack matches the code), and its plan.

    rebuild=False plans with the zips of the last apply, so the answer is about Terraform,
    the provider and the backend only, not about sources edited since.
    """
    with _prepared(prefix, backend, rebuild, action="plan", lessons=lessons) as stack:
        # -detailed-exitcode: 0 = no changes, 2 = changes, 1 = error.
        code, text = stack.change("plan", "-detailed-exitcode", ok=(0, 2))
        return code == 0, text


def destroy(prefix: str | None = None, backend: str | None = None) -> None:
    """Remove everything the stack created, and forget its outputs."""
    with _prepared(prefix, backend, rebuild=False, action="destroy") as stack:  # the configuration hashes the zips
        stack.change("destroy", "-auto-approve")
        _remove_working_copy(stack.name)


def forget(prefix: str | None = None, backend: str | None = None) -> None:
    """Drop a stack's working copy and outputs without Terraform: for a backend that is gone
    (an embedded server that stopped took its resources with it)."""
    with _locked(name := stack_name(prefix, backend)):
        _remove_working_copy(name)


def _remove_working_copy(name: str) -> None:
    (OUTPUTS_DIR / f"{name}.json").unlink(missing_ok=True)
    shutil.rmtree(WORKING_COPIES / name, ignore_errors=True)
