"""Ctrl-C as a terminal sends it: SIGINT to the whole process group of a running command of
the lab (make, Python and every Terraform it started share the group), at a moment a test
chooses by what has happened (a line of output, resources on the backend), never by a clock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from idemlab import clients

# How often the moment is looked for while the command runs: it decides how soon after the
# event the signal goes, not whether it goes.
LOOK_EVERY_SECONDS = 0.2


@dataclass(frozen=True)
class Ended:
    """A command that ran to its end."""

    code: int  # its exit code
    output: str  # what it printed, standard output and error together
    interrupted: bool  # whether the signal was sent before it ended


def run_interrupting(root: Path, env: dict, args: list[str], moment: Callable[[str], bool] | None = None) -> Ended:
    """``python <args>`` in the lab at ``root``; SIGINT to its process group as soon as
    ``moment(output so far)`` holds (never, without one). Waits for the command to end."""
    process = subprocess.Popen(
        [sys.executable, *args],
        cwd=root,
        env=env,
        text=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # a group of its own, as a terminal's foreground job has
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
    reader.start()
    sent = False
    while process.poll() is None:
        if moment is not None and not sent and moment("".join(lines)):
            try:
                os.killpg(process.pid, signal.SIGINT)
                sent = True
            except ProcessLookupError:  # it ended in the meantime
                break
        time.sleep(LOOK_EVERY_SECONDS)
    reader.join()
    output = "".join(lines)
    print(f"$ python {' '.join(args)}  (exit {process.returncode}{', interrupted' if sent else ''})\n{output}")
    return Ended(process.returncode, output, sent)


def created(url: str, kind: str = "") -> int:
    """Tables, queues and functions on the backend (or those of one ``kind``): what a deploy has made so far."""
    counts = {
        "tables": lambda: len(clients.client("dynamodb", endpoint_url=url).list_tables()["TableNames"]),
        "queues": lambda: len(clients.client("sqs", endpoint_url=url).list_queues().get("QueueUrls", [])),
        "functions": lambda: len(clients.client("lambda", endpoint_url=url).list_functions()["Functions"]),
    }
    return sum(count() for name, count in counts.items() if kind in ("", name))
