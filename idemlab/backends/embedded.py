"""The embedded backend's life cycle: `python -m idemlab.embedded` as a daemon of the lab."""

from __future__ import annotations

import sys

from idemlab import settings
from idemlab.backends import BackendError
from idemlab.backends.daemons import EMBEDDED, wait_for_own_backend
from idemlab.embedded.server import READY_TIMEOUT_SECONDS, discarded_work, health, port_in_use


def up() -> str:
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


def down() -> str:
    if EMBEDDED.pid():  # say what the stop discards: nothing else will
        print(discarded_work(f"http://127.0.0.1:{settings.port()}"))
    return EMBEDDED.stop()


def status(url: str) -> str:
    if health(url):
        return f"embedded on {url}: ready"
    if pid := EMBEDDED.listening_pid(settings.port()):
        return f"embedded on {url}: busy (pid {pid} holds the port but did not answer within 1 s)"
    return f"embedded on {url}: down"
