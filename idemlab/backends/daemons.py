"""The lab's background processes: each runs in a session of its own (it outlives `make up`),
with a pid file and a log per port, so a lab on another port never shares them; and waiting for
the lab's own backend while a busy machine makes it slow to answer.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil  # pinned in the workshop extra

from idemlab import settings
from idemlab.backends import BackendError

PROGRESS_EVERY_SECONDS = 5  # how often a wait for a starting or busy backend says it is still waiting
# Only a backend that is stuck, not one that is busy, takes this long to answer a health
# probe: the busiest suite runs seen answer within seconds. Ten minutes, then say so.
OWN_BACKEND_PATIENCE_SECONDS = 600


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


EMBEDDED = Daemon("embedded", "embedded backend")
NATIVE = Daemon("localstack-native", "native LocalStack")
# Beside either emulator, which only store schedules (idemlab/background/scheduler_firer.py says why).
FIRER = Daemon("scheduler-firer", "scheduler firer")


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
