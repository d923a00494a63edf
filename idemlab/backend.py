"""`make up` / `make down` / `make status`: the selected backend's life cycle.

    python -m idemlab.backend up|down|status

Every failure is one line that says what went wrong and where the log is.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

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


def _compose(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "compose", "-f", str(COMPOSE_FILE), *args], capture_output=True, text=True)


def localstack_up() -> str:
    url = f"http://127.0.0.1:{settings.port()}"
    if _localstack_health(url):
        return f"LocalStack already running on {url}, reusing it"
    started = _compose("up", "-d")
    if started.returncode != 0:
        tail = (started.stderr or started.stdout).strip().splitlines()[-1:] or ["no output"]
        raise BackendError(f"docker compose up failed: {tail[0]}; log: docker compose logs localstack")
    deadline = time.monotonic() + LOCALSTACK_READY_SECONDS
    while time.monotonic() < deadline:
        if _localstack_health(url):
            return f"LocalStack up on {url}"
        time.sleep(1)
    raise BackendError(f"LocalStack did not become healthy in {LOCALSTACK_READY_SECONDS} s; log: docker compose logs localstack")


def localstack_down() -> str:
    stopped = _compose("down")
    if stopped.returncode != 0:
        raise BackendError(f"docker compose down failed: {stopped.stderr.strip()[-200:]}")
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
