"""`make up` / `make down` / `make status`: the selected backend's life cycle.

    python -m idemlab.backend up|down|status

Every failure is one line that says what went wrong and where the log is.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from idemlab import settings

# Neither LocalStack community nor moto fires EventBridge Scheduler schedules: the lab
# runs its own firer beside either of them (idemlab/background/scheduler_firer.py).
FIRER_MODULE = "idemlab.background.scheduler_firer"


def _state_file(kind: str, suffix: str):
    """Per port, so a second lab (or the tests) on another port never shares them."""
    return settings.STATE_DIR / f"{kind}-{settings.port()}.{suffix}"


def embedded_log():
    return _state_file("embedded", "log")


def embedded_pid():
    return _state_file("embedded", "pid")


def firer_log():
    return _state_file("scheduler-firer", "log")


def firer_pid():
    return _state_file("scheduler-firer", "pid")
LOCALSTACK_HEALTH = "/_localstack/health"
LOCALSTACK_READY_SECONDS = 180  # first start pulls the image; later starts take seconds
COMPOSE_FILE = settings.ROOT / "docker-compose.yml"


class BackendError(Exception):
    """The backend could not be brought up or down; the message is for the user."""


def _read_pid(pid_file) -> int | None:
    try:
        pid = int(pid_file.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def _stop_pid(pid_file) -> int | None:
    pid = _read_pid(pid_file)
    pid_file.unlink(missing_ok=True)
    if not pid:
        return None
    os.kill(pid, signal.SIGTERM)
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except OSError:
            return pid
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    return pid


def firer_up() -> str:
    """Start the schedule firer against the selected endpoint, unless it runs already."""
    pid = _read_pid(firer_pid())
    if pid:
        return f"scheduler firer already running (pid {pid}); log {firer_log()}"
    settings.STATE_DIR.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "AWS_ENDPOINT_URL": settings.endpoint_url()}
    with open(firer_log(), "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", FIRER_MODULE],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    time.sleep(0.5)
    if process.poll() is not None:
        raise BackendError(f"scheduler firer exited with code {process.returncode}; log {firer_log()}")
    firer_pid().write_text(str(process.pid))
    return f"scheduler firer up (pid {process.pid}); log {firer_log()}"


def firer_down() -> str:
    pid = _stop_pid(firer_pid())
    return f"scheduler firer stopped (pid {pid})" if pid else "scheduler firer is not running"


def embedded_up() -> str:
    try:
        from idemlab.embedded.server import EmbeddedBackend, health, port_in_use
    except ImportError as exc:
        raise BackendError(f"missing dependency ({exc.name}): run `make install`; log {embedded_log()}") from exc
    url = f"http://127.0.0.1:{settings.port()}"
    pid = _read_pid(embedded_pid())
    if pid and health(url):
        return f"embedded backend already running on {url} (pid {pid}), reusing it; log {embedded_log()}"
    if port_in_use(settings.port()):
        raise BackendError(
            f"port {settings.port()} is busy with another program (LocalStack? set LAB_PORT or stop it); log {embedded_log()}"
        )
    settings.STATE_DIR.mkdir(parents=True, exist_ok=True)
    try:
        server = EmbeddedBackend(port=settings.port(), log_path=embedded_log()).start(detach=True)
    except RuntimeError as exc:
        raise BackendError(str(exc)) from exc
    embedded_pid().write_text(str(server.process.pid))
    return f"embedded backend up on {url} (pid {server.process.pid}); log {embedded_log()}"


def embedded_down() -> str:
    pid = _stop_pid(embedded_pid())
    return f"embedded backend stopped (pid {pid})" if pid else "embedded backend is not running"


def _localstack_health(url: str) -> dict | None:
    try:
        with urllib.request.urlopen(url + LOCALSTACK_HEALTH, timeout=2) as response:
            return json.loads(response.read())
    except (OSError, ValueError):
        return None


PYPROJECT = settings.ROOT / "pyproject.toml"
LOCALSTACK_CLI_EXTRA = "localstack"  # the optional extra of pyproject.toml that pins the CLI


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's ${NAME:-default} and ${NAME} substitution."""
    return re.sub(r"\$\{(\w+)(?::-([^}]*))?\}", lambda m: env.get(m.group(1)) or (m.group(2) or ""), str(value))


def compose_service(env: dict[str, str] | None = None) -> dict:
    """The localstack service of docker-compose.yml, with variables substituted from env."""
    import yaml  # PyYAML comes with moto[server]

    env = dict(os.environ) if env is None else env
    service = yaml.safe_load(COMPOSE_FILE.read_text())["services"]["localstack"]
    return {
        "container_name": interpolate(service["container_name"], env),
        "image": interpolate(service["image"], env),
        "environment": {name: interpolate(value, env) for name, value in service["environment"].items()},
        "ports": [interpolate(port, env) for port in service["ports"]],
    }


@dataclass(frozen=True)
class Launcher:
    """How LocalStack is started, waited for and stopped: Compose, or the CLI without it."""

    tool: str
    up: list[str]
    wait: list[str] | None  # None: poll the health endpoint
    down: list[str]
    env: dict[str, str]
    logs: str  # the command that shows LocalStack's log, for the one-line errors


def _compose_plugin_present(env: dict[str, str]) -> bool:
    try:
        done = subprocess.run(["docker", "compose", "version"], capture_output=True, env=env, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def localstack_cli() -> Path:
    """The LocalStack CLI of this environment (the pinned `localstack` extra)."""
    return Path(sys.executable).with_name("localstack")


def localstack_cli_requirement() -> list[str]:
    with open(PYPROJECT, "rb") as handle:
        return tomllib.load(handle)["project"]["optional-dependencies"][LOCALSTACK_CLI_EXTRA]


def localstack_launcher(env: dict[str, str] | None = None) -> Launcher:
    """Compose when the plugin is there (the default); otherwise the LocalStack CLI, started
    with the image, environment, container name and gateway address of docker-compose.yml."""
    env = dict(os.environ) if env is None else env
    if not shutil.which("docker", path=env.get("PATH")):
        raise BackendError("Docker is not installed (no `docker` on PATH); install Docker, or use BACKEND=embedded")
    if _compose_plugin_present(env):
        compose = ["docker", "compose", "-f", str(COMPOSE_FILE)]
        return Launcher("docker compose", compose + ["up", "-d"], None, compose + ["down"], env, "docker compose logs localstack")
    service = compose_service(env)
    # "127.0.0.1:4566:4566": the CLI binds the host side of every port to GATEWAY_LISTEN's
    # address, as compose does; inside the container LocalStack must listen on all
    # interfaces, so the container gets the port alone (-e overrides what the CLI derived).
    host, host_port, container_port = service["ports"][0].split(":")
    cli_env = {
        **env,
        "IMAGE_NAME": service["image"],
        "MAIN_CONTAINER_NAME": service["container_name"],  # also what `wait` and `stop` look for
        "GATEWAY_LISTEN": f"{host}:{host_port}",
    }
    up = [str(localstack_cli()), "start", "--detached", "--no-banner", "-e", f"GATEWAY_LISTEN=:{container_port}"]
    for name, value in service["environment"].items():
        if not value:
            continue
        cli_env[name] = value
        # The CLI forwards LOCALSTACK_* variables from its own environment (the auth token
        # then never appears in a command line); the others go by -e.
        if not name.startswith("LOCALSTACK_"):
            up += ["-e", f"{name}={value}"]
    cli = str(localstack_cli())
    return Launcher(
        "LocalStack CLI", up, [cli, "wait", "-t", str(LOCALSTACK_READY_SECONDS)], [cli, "stop"], cli_env, "localstack logs"
    )


def _first_line(done: subprocess.CompletedProcess) -> str:
    lines = [line for line in (done.stderr or done.stdout or "").strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no output"


def _ensure_localstack_cli() -> None:
    """Install the pinned CLI (the `localstack` extra) into this environment when it is missing."""
    if localstack_cli().exists():
        return
    requirement = localstack_cli_requirement()
    print(f"Docker Compose plugin not found: installing the LocalStack CLI ({', '.join(requirement)})", file=sys.stderr)
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *requirement], capture_output=True, text=True)
    if done.returncode != 0 or not localstack_cli().exists():
        raise BackendError(f"installing the LocalStack CLI failed: {_first_line(done)}; install the Compose plugin, or pip install -e '.[localstack]'")


def localstack_up() -> str:
    url = f"http://127.0.0.1:{settings.port()}"
    if _localstack_health(url):
        return f"LocalStack already running on {url}, reusing it"
    launcher = localstack_launcher()
    if launcher.wait is not None:
        _ensure_localstack_cli()
    started = subprocess.run(launcher.up, capture_output=True, text=True, env=launcher.env)
    if started.returncode != 0:
        raise BackendError(f"{launcher.tool} failed to start LocalStack: {_first_line(started)}; log: {launcher.logs}")
    if launcher.wait is not None:
        waited = subprocess.run(launcher.wait, capture_output=True, text=True, env=launcher.env)
        if waited.returncode == 0 and _localstack_health(url):
            return f"LocalStack up on {url} (started with the LocalStack CLI: no Docker Compose plugin)"
        raise BackendError(f"LocalStack did not become healthy in {LOCALSTACK_READY_SECONDS} s; log: {launcher.logs}")
    deadline = time.monotonic() + LOCALSTACK_READY_SECONDS
    while time.monotonic() < deadline:
        if _localstack_health(url):
            return f"LocalStack up on {url}"
        time.sleep(1)
    raise BackendError(f"LocalStack did not become healthy in {LOCALSTACK_READY_SECONDS} s; log: {launcher.logs}")


def localstack_down() -> str:
    launcher = localstack_launcher()
    if launcher.wait is not None and not localstack_cli().exists():
        return "LocalStack is not running (the LocalStack CLI that would have started it is not installed)"
    stopped = subprocess.run(launcher.down, capture_output=True, text=True, env=launcher.env)
    if stopped.returncode != 0 and "found none" in _first_line(stopped):  # the CLI's "no such container"
        return "LocalStack is not running"
    if stopped.returncode != 0:
        raise BackendError(f"{launcher.tool} failed to stop LocalStack: {_first_line(stopped)}")
    return "LocalStack stopped"


def aws_up() -> str:
    from idemlab import clients

    try:
        identity = clients.client("sts").get_caller_identity()
    except Exception as exc:  # no or expired credentials: say so in one line
        raise BackendError(f"AWS credentials do not work ({exc}); configure them (aws configure / AWS_PROFILE)") from exc
    return f"AWS account {identity['Account']} in {settings.region()} (nothing to start)"


ACTIONS = {
    ("embedded", "up"): embedded_up,
    ("embedded", "down"): embedded_down,
    ("localstack", "up"): localstack_up,
    ("localstack", "down"): localstack_down,
    ("aws", "up"): aws_up,
    ("aws", "down"): lambda: "AWS: nothing to stop (use `make destroy` to remove the stack)",
}


def status() -> str:
    chosen = settings.backend()
    url = settings.endpoint_url()
    if chosen == "embedded":
        from idemlab.embedded.server import health

        state = health(url)
        return f"embedded on {url}: {'ready' if state else 'down'}"
    if chosen == "localstack":
        return f"localstack on {url}: {'ready' if _localstack_health(url) else 'down'}"
    return f"aws in {settings.region()}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m idemlab.backend", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["up", "down", "status"])
    args = parser.parse_args(argv)
    try:
        chosen = settings.backend()
        if args.action == "status":
            print(status())
        elif args.action == "up":
            print(ACTIONS[(chosen, "up")]())
            if chosen != "aws":  # on AWS, Scheduler fires schedules itself
                print(firer_up())
        else:
            if chosen != "aws":
                print(firer_down())
            print(ACTIONS[(chosen, "down")]())
    except (BackendError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
