"""LocalStack in Docker: started by Docker Compose when its plugin answers, else by the
LocalStack CLI (the `localstack` extra, installed on first use) with the image, environment,
container name and gateway address of docker-compose.yml.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from idemlab import settings
from idemlab.backends import BackendError
from idemlab.backends.localstack_common import COMPOSE_FILE, LOCALSTACK_READY_SECONDS, compose_service, health

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 has no tomllib; tomli is the same parser (the workshop extra installs it there)
    import tomli as tomllib

LOCALSTACK_CLI = Path(sys.executable).with_name("localstack")  # from the pinned `localstack` extra, when installed


@dataclass(frozen=True)
class Launcher:
    """How LocalStack is started, waited for and stopped."""

    tool: str  # what starts it, for messages ("docker compose", "LocalStack CLI")
    up: list[str]  # the command that starts it
    wait: list[str] | None  # the command that returns once it is healthy; None: poll its health endpoint
    down: list[str]  # the command that stops it
    env: dict[str, str]  # the environment of those commands
    logs: str  # the command that shows its log, named in errors


def localstack_cli_requirement() -> list[str]:
    """The `localstack` extra of pyproject.toml, which pins the CLI."""
    extras = tomllib.loads((settings.ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return extras["localstack"]


def localstack_launcher(env: dict[str, str] | None = None) -> Launcher:
    """Compose when the plugin is there (the default); otherwise the LocalStack CLI, started
    with the image, environment, container name and gateway address of docker-compose.yml."""
    env = dict(os.environ) if env is None else env
    if not shutil.which("docker", path=env.get("PATH")):
        raise BackendError("Docker is not installed (no `docker` on PATH); install Docker, or use BACKEND=embedded")
    if _run(["docker", "compose", "version"], env, timeout=20)[0] == 0:
        compose = ["docker", "compose", "-f", str(COMPOSE_FILE)]
        return Launcher(
            tool="docker compose",
            up=[*compose, "up", "-d"],
            wait=None,
            down=[*compose, "down"],
            env=env,
            logs="docker compose logs localstack",
        )
    service = compose_service(env)
    given = {name: value for name, value in service["environment"].items() if value}
    # "127.0.0.1:4566:4566": the CLI binds the host side of every port to GATEWAY_LISTEN's
    # address, as compose does; inside the container LocalStack must listen on all
    # interfaces, so the container gets the port alone (-e overrides what the CLI derived).
    host, host_port, container_port = service["ports"][0].split(":")
    cli_env = {
        **env,
        **given,
        "IMAGE_NAME": service["image"],
        "GATEWAY_LISTEN": f"{host}:{host_port}",
        "MAIN_CONTAINER_NAME": service["container_name"],
    }  # also what `wait` and `stop` look for
    cli = str(LOCALSTACK_CLI)
    up = [cli, "start", "--detached", "--no-banner", "-e", f"GATEWAY_LISTEN=:{container_port}"]
    # LOCALSTACK_* reach the CLI in its environment, which it forwards (the token stays off argv); the rest by -e.
    for name, value in given.items():
        if not name.startswith("LOCALSTACK_"):
            up += ["-e", f"{name}={value}"]
    return Launcher(
        tool="LocalStack CLI",
        up=up,
        wait=[cli, "wait", "-t", str(LOCALSTACK_READY_SECONDS)],
        down=[cli, "stop"],
        env=cli_env,
        logs="localstack logs",
    )


def _run(command: list[str], env: dict[str, str] | None = None, timeout: float | None = None) -> tuple[int, str]:
    """Exit code, and the last non-blank line of stderr (or stdout) for a one-line error."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:  # not there, or no answer
        return -1, str(exc)
    lines = [line.strip() for line in (done.stderr or done.stdout or "").splitlines() if line.strip()]
    return done.returncode, lines[-1] if lines else "no output"


def _install_cli() -> None:
    """The pinned LocalStack CLI, into the lab's own environment, when Compose is missing."""
    requirement = localstack_cli_requirement()
    print(
        f"Docker Compose plugin not found: installing the LocalStack CLI ({', '.join(requirement)})",
        file=sys.stderr,
    )
    code, last = _run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *requirement])
    if code != 0 or not LOCALSTACK_CLI.exists():
        raise BackendError(
            f"installing the LocalStack CLI failed: {last}; install the Compose plugin, "
            "or pip install -e '.[localstack]'"
        )


def up(url: str) -> str:
    launcher = localstack_launcher()
    if launcher.wait and not LOCALSTACK_CLI.exists():
        _install_cli()
    code, last = _run(launcher.up, launcher.env)
    if code != 0:
        raise BackendError(f"{launcher.tool} failed to start LocalStack: {last}; log: {launcher.logs}")
    if launcher.wait:
        _run(launcher.wait, launcher.env)  # returns once healthy, or after its own timeout
    # Compose returns at once: poll the health endpoint; after the CLI's wait, one look is enough.
    how = " (started with the LocalStack CLI: no Docker Compose plugin)" if launcher.wait else ""
    for _ in range(1 if launcher.wait else LOCALSTACK_READY_SECONDS):
        if health(url):
            return f"LocalStack up on {url}{how}"
        time.sleep(1)
    raise BackendError(f"LocalStack did not become healthy in {LOCALSTACK_READY_SECONDS} s; log: {launcher.logs}")


def down() -> str:
    launcher = localstack_launcher()
    if launcher.wait and not LOCALSTACK_CLI.exists():
        return "LocalStack is not running (the LocalStack CLI that would have started it is not installed)"
    code, last = _run(launcher.down, launcher.env)
    if code != 0 and "found none" in last:  # the CLI's "no such container"
        return "LocalStack is not running"
    if code != 0:
        raise BackendError(f"{launcher.tool} failed to stop LocalStack: {last}")
    return "LocalStack stopped"
