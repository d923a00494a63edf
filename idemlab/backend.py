"""`make up` / `make down` / `make status` (``python -m idemlab up|down|status``): the
selected backend's life cycle. Every failure is one line that says what went wrong and
where the log is.

The entry point only chooses: each backend's own start and stop is a module of
``idemlab/backends/`` (``embedded``, ``localstack_docker``, ``native_localstack``, ``aws``),
and the lab's background processes are ``idemlab/backends/daemons.py``.
"""

from __future__ import annotations

import os
import sys

from idemlab import settings
from idemlab.backends import BackendError, embedded, localstack_common, localstack_docker, native_localstack
from idemlab.backends import aws as aws_backend
from idemlab.backends.daemons import FIRER, NATIVE, wait_for_own_backend
from idemlab.embedded.server import READY_TIMEOUT_SECONDS

__all__ = ["BackendError", "down", "status", "up"]


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


def localstack_up() -> str:
    """The lab's own native LocalStack (perhaps busy) or any LocalStack that answers is reused;
    else LocalStack starts natively where no Docker engine answers, in Docker where one does."""
    url = f"http://127.0.0.1:{settings.port()}"
    if pid := NATIVE.listening_pid(settings.port()):  # the lab's own native LocalStack, perhaps busy
        found = wait_for_own_backend(
            NATIVE.title, pid, lambda: localstack_common.health(url), f"its health answer on {url}"
        )
        return localstack_common.reuse_running_localstack(url, found)
    if found := localstack_common.health(url):
        return localstack_common.reuse_running_localstack(url, found)
    if not settings.docker_engine_answers():
        return native_localstack.up(url)
    return localstack_docker.up(url)


def localstack_down() -> str:
    if NATIVE.pid():
        return native_localstack.down()
    if not settings.docker_engine_answers():
        url = f"http://127.0.0.1:{settings.port()}"
        if localstack_common.health(url):
            return f"LocalStack on {url} was not started by the lab: not stopping it"
        return "LocalStack is not running"
    return localstack_docker.down()


def joined_up() -> str:
    """A clone that joined a stack on an emulator starts nothing: it checks the handout's endpoint."""
    handout = settings.joined()
    if not handout or handout["backend"] == "aws":
        return ""
    url = settings.endpoint_url()
    answer = embedded.status(url) if handout["backend"] == "embedded" else localstack_common.health(url)
    return f"joined {handout['participant']}'s stack on {url}: nothing to start here ({answer or 'no answer yet'})"


def up() -> None:
    chosen = settings.backend()
    joined = joined_up()
    if joined:
        print(joined)
        return
    print({"embedded": embedded.up, "localstack": localstack_up, "aws": aws_backend.up}[chosen]())
    if chosen != "aws":  # on AWS, Scheduler fires schedules itself
        print(firer_up())


def down() -> None:
    chosen = settings.backend()
    if settings.joined() and chosen != "aws":
        print("this clone joined a stack on someone else's backend: nothing of it runs here to stop")
    elif chosen == "aws":
        print("AWS: nothing to stop (use `make destroy` to remove the stack)")
    else:
        print(FIRER.stop())
        print(embedded.down() if chosen == "embedded" else localstack_down())


def status() -> None:
    chosen = settings.backend()
    url = settings.endpoint_url()
    if chosen == "aws":
        print(f"aws in {settings.region()}")
    elif chosen == "embedded":
        print(embedded.status(url))
    else:
        found = localstack_common.health(url)
        how = f" (native, pid {NATIVE.pid()})" if NATIVE.pid() else ""
        print(f"localstack {found.get('version', '')} on {url}{how}: ready" if found else f"localstack on {url}: down")
