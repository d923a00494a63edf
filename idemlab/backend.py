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

EMBEDDED_LOG = settings.STATE_DIR / "embedded.log"
EMBEDDED_PID = settings.STATE_DIR / "embedded.pid"
LOCALSTACK_HEALTH = "/_localstack/health"
LOCALSTACK_READY_SECONDS = 180  # first start pulls the image; later starts take seconds
COMPOSE_FILE = settings.ROOT / "docker-compose.yml"


class BackendError(Exception):
    """The backend could not be brought up or down; the message is for the user."""


def _read_pid() -> int | None:
    try:
        pid = int(EMBEDDED_PID.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def embedded_up() -> str:
    try:
        from idemlab.embedded.server import EmbeddedBackend, health, port_in_use
    except ImportError as exc:
        raise BackendError(f"missing dependency ({exc.name}): run `make install`; log {EMBEDDED_LOG}") from exc
    url = f"http://127.0.0.1:{settings.port()}"
    pid = _read_pid()
    if pid and health(url):
        return f"embedded backend already running on {url} (pid {pid}), reusing it; log {EMBEDDED_LOG}"
    if port_in_use(settings.port()):
        raise BackendError(
            f"port {settings.port()} is busy with another program (LocalStack? set LAB_PORT or stop it); log {EMBEDDED_LOG}"
        )
    settings.STATE_DIR.mkdir(parents=True, exist_ok=True)
    try:
        server = EmbeddedBackend(port=settings.port(), log_path=EMBEDDED_LOG).start(detach=True)
    except RuntimeError as exc:
        raise BackendError(str(exc)) from exc
    EMBEDDED_PID.write_text(str(server.process.pid))
    return f"embedded backend up on {url} (pid {server.process.pid}); log {EMBEDDED_LOG}"


def embedded_down() -> str:
    pid = _read_pid()
    if not pid:
        EMBEDDED_PID.unlink(missing_ok=True)
        return "embedded backend is not running"
    os.kill(pid, signal.SIGTERM)
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except OSError:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, signal.SIGKILL)
    EMBEDDED_PID.unlink(missing_ok=True)
    return f"embedded backend stopped (pid {pid})"


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
        if args.action == "status":
            print(status())
        else:
            print(ACTIONS[(settings.backend(), args.action)]())
    except (BackendError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
