"""How the embedded backend changes moto: each replacement once per process.

The server installs its changes at start, and the tests start more than one server in
a process, so a second install must leave the first one's replacements as they are
(wrapping a wrapper would run each check twice).
"""

from __future__ import annotations

MARK = "_idemlab"


def replace_once(owner: type, name: str, replacement) -> bool:
    """Set ``owner.name`` to `replacement` unless an earlier install did; True if done now."""
    if getattr(getattr(owner, name, None), MARK, False):
        return False
    setattr(replacement, MARK, True)
    setattr(owner, name, replacement)
    return True
