"""A per-user cache of immutable installs, shared by every clone of the lab on the machine.

An entry is a folder named by a key (a hash of everything that decides its content), built
once and never changed afterwards, as uv keeps built wheels. Two clones installing at once
must not see half an entry, nor build it twice over each other:

- an entry counts once its marker file exists; the marker is written last, by a rename, so
  an entry whose build died part way is never used;
- the builder holds an exclusive ``fcntl.flock`` on ``<key>.lock`` beside the entry. Another
  installer of the same key waits on that lock, then finds the marker and uses the entry.
  The kernel drops the lock of a builder that dies, so the next one removes its leftovers
  and builds again: nothing is decided by a timeout.

Where: ``$IDEMLAB_CACHE_DIR`` (tests point it at a temporary folder), else
``$XDG_CACHE_HOME/idemlab``, else ``~/.cache/idemlab`` (the XDG Base Directory
specification's default).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

CACHE_DIR_VARIABLE = "IDEMLAB_CACHE_DIR"
MARKER = ".complete"


def root() -> Path:
    """The lab's cache folder for this user."""
    chosen = os.environ.get(CACHE_DIR_VARIABLE)
    if chosen:
        return Path(chosen)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"  # relative: ignored, per XDG
    return base / "idemlab"


def is_complete(entry: Path) -> bool:
    return (entry / MARKER).exists()


def entry(folder: Path, inputs: dict, build: Callable[[Path], None], what: str) -> Path:
    """``folder`` once it is complete: built by ``build(folder)`` under the lock unless another
    process built it already. ``inputs`` (what the key was made of) is stored in the marker.

    Parameters
    ----------
    folder:
        the entry, ``<cache>/<namespace>/<key>``.
    inputs:
        the values the key hashes, kept in the marker to tell what an entry holds.
    build:
        fills the empty folder; raises to leave it unmarked (and so unused).
    what:
        names the entry in the line printed while another process holds the lock.
    """
    if is_complete(folder):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.with_name(f"{folder.name}.lock"), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another install of {what} into {folder} to finish", file=sys.stderr)
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if is_complete(folder):  # built by the process we waited for
                return folder
            if folder.exists():  # left by a build that died: the lock says nobody is at it now
                shutil.rmtree(folder)
            folder.mkdir()
            build(folder)
            partial = folder / f"{MARKER}.partial"
            partial.write_text(json.dumps(inputs, indent=2, sort_keys=True) + "\n")
            partial.rename(folder / MARKER)  # last: from here on the entry is used, and never changed
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return folder
