"""LocalStack as local processes, where no Docker engine answers: installed on first use
(``idemlab/localstack_native/``), on loopback, with docker-compose.yml's settings.
"""

from __future__ import annotations

import contextlib
import os
import signal

from idemlab import settings
from idemlab.backends import BackendError
from idemlab.backends.daemons import NATIVE
from idemlab.backends.localstack_common import LOCALSTACK_READY_SECONDS, compose_service, health
from idemlab.embedded.server import port_in_use
from idemlab.localstack_native import install as native


def up(url: str) -> str:
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
        native.command(installed), lambda: health(url), LOCALSTACK_READY_SECONDS, env, where=f" on {url}"
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


def down() -> str:
    pid = NATIVE.pid()
    said = NATIVE.stop()
    if pid:  # LocalStack ends its helpers (DynamoDB Local, kinesis-local) itself; whatever did not, goes now
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    return said
