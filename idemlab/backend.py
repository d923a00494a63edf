"""`make up` / `make down` / `make status` (``python -m idemlab up|down|status``): the
selected backend's life cycle. Every failure is one line that says what went wrong and
where the log is.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil  # pinned in the workshop extra
import yaml  # PyYAML comes with moto[server]

from idemlab import settings
from idemlab.embedded.server import READY_TIMEOUT_SECONDS, discarded_work, health, port_in_use
from idemlab.localstack_native import install as native

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 has no tomllib; tomli is the same parser (the workshop extra installs it there)
    import tomli as tomllib

LOCALSTACK_READY_SECONDS = 180  # first start pulls the image; later starts take seconds
COMPOSE_FILE = settings.ROOT / "docker-compose.yml"
LOCALSTACK_CLI = Path(sys.executable).with_name("localstack")  # from the pinned `localstack` extra, when installed


class BackendError(Exception):
    """The backend could not be brought up or down; the message is for the user."""


@dataclass(frozen=True)
class Daemon:
    """A background process of the lab, with pid and log files per port: a lab on another port never shares them."""

    kind: str
    title: str

    @property
    def log(self) -> Path:
        return settings.STATE_DIR / f"{self.kind}-{settings.port()}.log"

    @property
    def pid_file(self) -> Path:
        return self.log.with_suffix(".pid")

    def pid(self) -> int | None:
        """The recorded pid, if that process still runs."""
        try:
            pid = int(self.pid_file.read_text().strip())
            os.kill(pid, 0)  # signal 0: is it alive? (sends nothing)
        except (OSError, ValueError):  # no pid file, an unreadable one, or no such process
            return None
        return pid

    def listening_pid(self, port: int) -> int | None:
        """The recorded pid, if that process still runs and it, or a process it started,
        listens on ``port``: then the backend on that port is the lab's own, however slowly
        it answers. A pid file left behind by a crash, or a pid the system gave to another
        program since, says nothing about the port."""
        if not (pid := self.pid()):
            return None
        try:
            process = psutil.Process(pid)
            family = [process, *process.children(recursive=True)]
            for member in family:
                for connection in member.net_connections(kind="inet"):
                    if connection.status == psutil.CONN_LISTEN and connection.laddr.port == port:
                        return pid
        except psutil.Error:  # it ended while we looked, or is not ours to inspect
            return None
        return None

    def start(
        self, command: list[str], ready: Callable[[], object], seconds: float, env: dict | None = None, where: str = ""
    ) -> str:
        """Run ``command`` in a session of its own (it outlives `make up`), logging to ``log``;
        once ``ready()`` while it still runs, record its pid and say so."""
        settings.STATE_DIR.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True
            )
        started = time.monotonic()
        said = started
        while process.poll() is None and not ready():
            now = time.monotonic()
            if now - started > seconds:
                process.kill()
                raise BackendError(f"{self.title} did not answer within {seconds} s; log {self.log}")
            if now - said >= PROGRESS_EVERY_SECONDS:
                print(f"starting the {self.title}: waiting for it to answer ({now - started:.0f} s so far)", flush=True)
                said = now
            time.sleep(0.05)
        if process.poll() is not None:
            raise BackendError(f"{self.title} exited with code {process.returncode}; log {self.log}")
        self.pid_file.write_text(str(process.pid))
        return f"{self.title} up{where} (pid {process.pid}); log {self.log}"

    def stop(self) -> str:
        if not (pid := self.pid()):
            self.pid_file.unlink(missing_ok=True)
            return f"{self.title} is not running"
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10  # ten seconds to end on its own
        while self.pid() and time.monotonic() < deadline:
            time.sleep(0.1)
        if self.pid():
            os.kill(pid, signal.SIGKILL)
        self.pid_file.unlink(missing_ok=True)
        return f"{self.title} stopped (pid {pid})"


PROGRESS_EVERY_SECONDS = 5  # how often a wait for a starting or busy backend says it is still waiting

EMBEDDED = Daemon("embedded", "embedded backend")
NATIVE = Daemon("localstack-native", "native LocalStack")
# Beside either emulator, which only store schedules (idemlab/background/scheduler_firer.py says why).
FIRER = Daemon("scheduler-firer", "scheduler firer")


def firer_up() -> str:
    if pid := FIRER.pid():
        return f"scheduler firer already running (pid {pid}); log {FIRER.log}"
    # Up once its log says so (its SIGTERM handler is installed by then, so `make down` right
    # after `make up` ends it cleanly); the log is shared by its earlier runs: read what is new.
    start = FIRER.log.stat().st_size if FIRER.log.exists() else 0

    def says_up() -> bool:
        with open(FIRER.log, "rb") as log:
            log.seek(start)
            return b"scheduler-firer: up" in log.read()

    command = [sys.executable, "-m", "idemlab.background.scheduler_firer"]
    env = {**os.environ, "AWS_ENDPOINT_URL": settings.endpoint_url()}
    return FIRER.start(command, says_up, READY_TIMEOUT_SECONDS, env)


def wait_for_own_backend(title: str, pid: int, answers: Callable[[], object], what: str) -> object:
    """Wait for the lab's own backend (``pid``, which listens on the port) until ``answers()``
    gives its health answer: a busy machine makes it slow, never a stranger. Ends when it
    answers or when the process ends; a line of progress every few seconds says what it waits for."""
    started = time.monotonic()
    said = started
    while (found := answers()) is None:
        if not psutil.pid_exists(pid):
            raise BackendError(f"{title} (pid {pid}) ended while `make up` waited for {what}")
        now = time.monotonic()
        if now - started > OWN_BACKEND_PATIENCE_SECONDS:
            raise BackendError(
                f"{title} (pid {pid}) holds the port but gave no answer in {now - started:.0f} s "
                f"while `make up` waited for {what}: it may be stuck; `make down`, then `make up`"
            )
        if now - said >= PROGRESS_EVERY_SECONDS:
            print(
                f"{title} (pid {pid}) holds the port but is busy: waiting for {what} ({now - started:.0f} s so far)",
                flush=True,
            )
            said = now
        time.sleep(0.1)
    return found


# Only a backend that is stuck, not one that is busy, takes this long to answer a health
# probe: the busiest suite runs seen answer within seconds. Ten minutes, then say so.
OWN_BACKEND_PATIENCE_SECONDS = 600


def embedded_up() -> str:
    port = settings.port()
    log = EMBEDDED.log
    url = f"http://127.0.0.1:{port}"
    if pid := EMBEDDED.listening_pid(port):
        # Ours by its pid file and its listening socket. Each probe gives up after 1 s so the
        # loop can notice the process ending; a loaded machine only makes us wait longer.
        wait_for_own_backend(EMBEDDED.title, pid, lambda: health(url), f"its health answer on {url}")
        return f"embedded backend already running on {url} (pid {pid}), reusing it; log {log}"
    if port_in_use(port):
        raise BackendError(f"port {port} is busy with another program (LocalStack? set LAB_PORT or stop it); log {log}")
    command = [sys.executable, "-m", "idemlab.embedded", "--port", str(port)]
    return EMBEDDED.start(command, lambda: health(url, timeout=2), READY_TIMEOUT_SECONDS, where=f" on {url}")


def _localstack_health(url: str) -> dict | None:
    with contextlib.suppress(OSError, ValueError), urllib.request.urlopen(url + "/_localstack/health", timeout=2) as r:
        return json.loads(r.read())
    return None


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's ${NAME:-default} and ${NAME} substitution."""
    return re.sub(r"\$\{(\w+)(?::-([^}]*))?\}", lambda m: env.get(m.group(1)) or (m.group(2) or ""), str(value))


def compose_service(env: dict[str, str] | None = None) -> dict:
    """The localstack service of docker-compose.yml, with variables substituted from env."""
    service = yaml.safe_load(COMPOSE_FILE.read_text())["services"]["localstack"]
    sub = functools.partial(interpolate, env=dict(os.environ) if env is None else env)
    return {
        "container_name": sub(service["container_name"]),
        "image": sub(service["image"]),
        "environment": {name: sub(value) for name, value in service["environment"].items()},
        "ports": [sub(port) for port in service["ports"]],
    }


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


def expected_localstack_version(env: dict[str, str] | None = None) -> str:
    """The version of the image docker-compose.yml names (4.14.0 unless LOCALSTACK_IMAGE says otherwise)."""
    return compose_service(env)["image"].rpartition(":")[2]


def reuse_running_localstack(url: str, found: dict) -> str:
    """What `make up` says of a LocalStack that already answers, or BackendError when it is not the
    version the lab is pinned to (another release behaves differently; its settings are unknown)."""
    version = found.get("version", "unknown")
    expected = expected_localstack_version()
    if version != expected and expected != "latest":
        raise BackendError(
            f"LocalStack {version} already answers on {url}, but the lab needs {expected}: "
            "stop it, or set LAB_PORT to start the lab's own on another port"
        )
    if pid := NATIVE.pid():
        return f"native LocalStack {version} already running on {url} (pid {pid}), reusing it; log {NATIVE.log}"
    return (
        f"LocalStack {version} already running on {url}, reusing it: the lab did not start it, so its "
        "settings may differ from docker-compose.yml's, and `make down` will not stop it"
    )


def localstack_up() -> str:
    url = f"http://127.0.0.1:{settings.port()}"
    if pid := NATIVE.listening_pid(settings.port()):  # the lab's own native LocalStack, perhaps busy
        found = wait_for_own_backend(NATIVE.title, pid, lambda: _localstack_health(url), f"its health answer on {url}")
        return reuse_running_localstack(url, found)
    if found := _localstack_health(url):
        return reuse_running_localstack(url, found)
    if not settings.docker_engine_answers():
        return native_localstack_up(url)
    launcher = localstack_launcher()
    if launcher.wait and not LOCALSTACK_CLI.exists():
        requirement = localstack_cli_requirement()
        print(
            f"Docker Compose plugin not found: installing the LocalStack CLI ({', '.join(requirement)})",
            file=sys.stderr,
        )
        code, last = _run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *requirement]
        )
        if code != 0 or not LOCALSTACK_CLI.exists():
            raise BackendError(
                f"installing the LocalStack CLI failed: {last}; install the Compose plugin, "
                "or pip install -e '.[localstack]'"
            )
    code, last = _run(launcher.up, launcher.env)
    if code != 0:
        raise BackendError(f"{launcher.tool} failed to start LocalStack: {last}; log: {launcher.logs}")
    if launcher.wait:
        _run(launcher.wait, launcher.env)  # returns once healthy, or after its own timeout
    # Compose returns at once: poll the health endpoint; after the CLI's wait, one look is enough.
    how = " (started with the LocalStack CLI: no Docker Compose plugin)" if launcher.wait else ""
    for _ in range(1 if launcher.wait else LOCALSTACK_READY_SECONDS):
        if _localstack_health(url):
            return f"LocalStack up on {url}{how}"
        time.sleep(1)
    raise BackendError(f"LocalStack did not become healthy in {LOCALSTACK_READY_SECONDS} s; log: {launcher.logs}")


def native_localstack_up(url: str) -> str:
    """LocalStack as a local process (no Docker engine): installed on first use, on loopback,
    with docker-compose.yml's settings; up once it answers a DynamoDB call (DynamoDB Local's
    JVM starts on the first one, in tens of seconds)."""
    if port_in_use(settings.port()):
        raise BackendError(f"port {settings.port()} is busy with another program (set LAB_PORT or stop it)")
    try:
        installed = native.install()
    except native.InstallError as exc:
        raise BackendError(str(exc)) from exc
    env = {**os.environ, **native.settings_for(settings.port(), compose_service()["environment"], installed)}
    started = NATIVE.start(
        native.command(installed), lambda: _localstack_health(url), LOCALSTACK_READY_SECONDS, env, where=f" on {url}"
    )
    try:
        _warm_dynamodb(url)
    except Exception as exc:  # its log says why
        NATIVE.stop()
        raise BackendError(
            f"native LocalStack started but its DynamoDB did not answer ({exc}); log {NATIVE.log}"
        ) from exc
    return f"{started} (no Docker engine: LocalStack {native.LOCALSTACK_VERSION} as local processes)"


def _warm_dynamodb(url: str) -> None:
    from idemlab import clients

    dynamodb = clients.client(
        "dynamodb", endpoint_url=url, read_timeout=LOCALSTACK_READY_SECONDS, retries={"max_attempts": 1}
    )
    dynamodb.list_tables(Limit=1)


def native_localstack_down() -> str:
    pid = NATIVE.pid()
    said = NATIVE.stop()
    if pid:  # LocalStack ends its helpers (DynamoDB Local, kinesis-local) itself; whatever did not, goes now
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    return said


def localstack_down() -> str:
    if NATIVE.pid():
        return native_localstack_down()
    if not settings.docker_engine_answers():
        url = f"http://127.0.0.1:{settings.port()}"
        if _localstack_health(url):
            return f"LocalStack on {url} was not started by the lab: not stopping it"
        return "LocalStack is not running"
    launcher = localstack_launcher()
    if launcher.wait and not LOCALSTACK_CLI.exists():
        return "LocalStack is not running (the LocalStack CLI that would have started it is not installed)"
    code, last = _run(launcher.down, launcher.env)
    if code != 0 and "found none" in last:  # the CLI's "no such container"
        return "LocalStack is not running"
    if code != 0:
        raise BackendError(f"{launcher.tool} failed to stop LocalStack: {last}")
    return "LocalStack stopped"


def aws_up() -> str:
    from idemlab import clients

    try:
        identity = clients.client("sts").get_caller_identity()
    except Exception as exc:  # no or expired credentials: say so in one line
        raise BackendError(f"AWS credentials do not work ({exc}); configure them (aws configure, AWS_PROFILE)") from exc
    return f"AWS account {identity['Account']} in {settings.region()} (nothing to start)"


def up() -> None:
    chosen = settings.backend()
    print({"embedded": embedded_up, "localstack": localstack_up, "aws": aws_up}[chosen]())
    if chosen != "aws":  # on AWS, Scheduler fires schedules itself
        print(firer_up())


def down() -> None:
    chosen = settings.backend()
    if chosen == "aws":
        print("AWS: nothing to stop (use `make destroy` to remove the stack)")
    else:
        print(FIRER.stop())
        if chosen == "embedded" and EMBEDDED.pid():  # say what the stop discards: nothing else will
            print(discarded_work(f"http://127.0.0.1:{settings.port()}"))
        print(EMBEDDED.stop() if chosen == "embedded" else localstack_down())


def status() -> None:
    chosen = settings.backend()
    url = settings.endpoint_url()
    if chosen == "aws":
        print(f"aws in {settings.region()}")
    elif chosen == "embedded":
        if health(url):
            print(f"embedded on {url}: ready")
        elif pid := EMBEDDED.listening_pid(settings.port()):
            print(f"embedded on {url}: busy (pid {pid} holds the port but did not answer within 1 s)")
        else:
            print(f"embedded on {url}: down")
    else:
        found = _localstack_health(url)
        how = f" (native, pid {NATIVE.pid()})" if NATIVE.pid() else ""
        print(f"localstack {found.get('version', '')} on {url}{how}: ready" if found else f"localstack on {url}: down")
