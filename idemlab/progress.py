"""Progress on a long wait: what is waited for, how far along it is, and the time so far.

On a terminal (and in a notebook) a tqdm bar. In CI (``CI`` set to anything but false or 0),
or where the output is no terminal, no bar: one line when a stage starts and one when it ends,
so a log reads as a list of stages.

    with progress.Stage("deploying lab", total=189, unit="resources") as stage:
        stage.advance()
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import time
from typing import TextIO

from tqdm import tqdm


def in_ci() -> bool:
    """Whether a CI system runs this (GitHub Actions, GitLab and most others set CI=true)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (a notebook's cell)."""
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return bool(shell) and hasattr(shell, "kernel")


def _bar_class():
    """tqdm's notebook bar in a notebook that has ipywidgets (JupyterLab's widgets), else its text bar
    (a notebook renders its carriage returns too)."""
    if in_notebook() and importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.notebook import tqdm as notebook_tqdm

        return notebook_tqdm
    return tqdm


def bars_wanted(stream: TextIO) -> bool:
    """Bars on a terminal or in a notebook outside CI; plain lines elsewhere."""
    if in_ci():
        return False
    if in_notebook():
        return True
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def _size(stream: TextIO) -> os.terminal_size:
    try:
        return os.get_terminal_size(stream.fileno())
    except (AttributeError, ValueError, OSError):
        return os.terminal_size((0, 0))


class Stage:
    """One named wait with a count of done items (``total`` may come later, or never).

    Parameters
    ----------
    what:
        What is waited for, as the learner reads it ("deploying lab: resources created").
    total:
        How many items the stage has, when known.
    unit:
        What an item is ("resources", "participants", "rounds").
    stream:
        Where it is shown; the standard error by default, so a command's own output stays clean.
    since:
        When the wait began (``time.monotonic()``), if before now.
    """

    def __init__(
        self,
        what: str,
        total: int | None = None,
        unit: str = "",
        stream: TextIO | None = None,
        since: float | None = None,
    ):
        self.what = what
        self.unit = unit
        self.stream = stream or sys.stderr
        self.done = 0
        self.total = total
        self.started = time.monotonic() if since is None else since  # a wait shown only once it lasted
        self.bar = None
        if bars_wanted(self.stream):
            self.bar = _bar_class()(
                total=total,
                desc=what,
                unit=f" {unit}" if unit else "it",
                file=self.stream,
                leave=False,  # the closing line says what the bar said
                # A terminal that reports no size (a pseudo-terminal nobody sized) gets 100 columns
                # and 24 lines: with 0 lines tqdm shows no bar at all.
                dynamic_ncols=_size(self.stream).columns > 0,
                ncols=None if _size(self.stream).columns > 0 else 100,
                nrows=None if _size(self.stream).lines > 0 else 24,
                bar_format=(
                    "{desc}: {n_fmt} of {total_fmt}{unit} [{elapsed} so far] {bar}"
                    if total
                    else "{desc}: {n_fmt}{unit} [{elapsed} so far]"
                ),
            )
            self.bar.start_t -= time.monotonic() - self.started  # tqdm's clock (time.time) from the real start
            # The time so far moves on between items too (a resource may take half a minute).
            self._closed = threading.Event()
            threading.Thread(target=self._tick, daemon=True).start()
        else:
            print(f"{what}: started{self._of()}", file=self.stream, flush=True)

    def _tick(self) -> None:
        while not self._closed.wait(1):
            bar = self.bar
            if bar is not None:
                bar.refresh()

    def _of(self) -> str:
        return f" ({self.total} {self.unit})" if self.total else ""

    def set_total(self, total: int) -> None:
        """The number of items, once it is known (a plan's count)."""
        self.total = total
        if self.bar is not None:
            self.bar.total = total
            self.bar.bar_format = "{desc}: {n_fmt} of {total_fmt}{unit} [{elapsed} so far] {bar}"
            self.bar.refresh()

    def advance(self, count: int = 1) -> None:
        self.done += count
        if self.bar is not None:
            self.bar.update(count)

    def note(self, text: str) -> None:
        """A line above the bar (or in the log) that the learner should see: a failure, a decision."""
        if self.bar is not None:
            self.bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def summary(self) -> str:
        counted = f"{self.done} of {self.total} {self.unit}" if self.total else f"{self.done} {self.unit}"
        return f"{self.what}: {counted.strip()} in {time.monotonic() - self.started:.0f} s"

    def close(self, outcome: str = "done") -> None:
        if self.bar is not None:
            self._closed.set()
            self.bar.close()
            self.bar = None
        print(f"{self.summary()}, {outcome}", file=self.stream, flush=True)

    def __enter__(self) -> Stage:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        from idemlab import interrupts

        self.close("stopped" if kind is not None or interrupts.requested() else "done")
