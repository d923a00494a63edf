"""How the embedded backend changes moto, and runs its background loops.

A method replaced outright is simply set again by a second install. One wrapped is wrapped
once per process: the server installs its changes at start, and tests install some in
their own process too, so a second install must leave the first one's wrapper as it is
(wrapping a wrapper would run each check twice).
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading

MARK = "_idemlab"


def wrap(owner: type, name: str):
    """Decorator: ``owner.name`` becomes ``replacement(original, *args)``, once per process.

    A method, a static method or a property's getter is wrapped, and stays what it was.
    """

    def install(replacement):
        kind = type(inspect.getattr_static(owner, name))
        original = getattr(owner, name).fget if kind is property else getattr(owner, name)
        if not getattr(original, MARK, False):

            @functools.wraps(original)
            def wrapper(*args, **kwargs):
                return replacement(original, *args, **kwargs)

            setattr(wrapper, MARK, True)
            setattr(owner, name, kind(wrapper) if kind in (property, staticmethod) else wrapper)
        return replacement

    return install


def every(seconds: float, action, name: str) -> threading.Event:
    """Call `action` every `seconds` on a daemon thread until the returned event is set;
    a call that fails is reported, and the next one comes as planned."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(seconds):
            try:
                action()
            except Exception as exc:
                print(f"embedded: {name}: {exc!r}", file=sys.stderr, flush=True)

    threading.Thread(target=loop, name=name, daemon=True).start()
    return stop
