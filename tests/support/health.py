"""The embedded backend's health answer, for a test that needs it.

The server's own probe (`idemlab.embedded.server.health`) gives up after 1 s: right for
"is anything there?", too short for a test on a loaded 2-core runner, where a busy server
took longer than that to answer (CI, 2026-12-05: `lab up` had just reported the backend
up, and the test's probe said nothing answered). This waits for the answer itself.
"""

from __future__ import annotations

from idemlab.embedded.server import health

ANSWER_SECONDS = 30


def answer(url: str) -> dict:
    """The backend's health document; fails the test if it gave none within ANSWER_SECONDS."""
    found = health(url, timeout=ANSWER_SECONDS)
    assert found is not None, f"{url} gave no health answer within {ANSWER_SECONDS} s"
    return found
