"""Test your own Lambda handler for duplicate safety, on the lab's embedded backend.

    def test_checkout_charges_once(idemlab):
        idemlab.make_table("charges")
        idemlab.assert_exactly_once("shop.checkout.handler", make_event, count_charges, rounds=100)

Installed with `pip install "idemlab[testing]"`; pytest finds the fixtures through the
`pytest11` entry point (idemlab.testing.plugin). See examples/take-home/.
"""

# A pytest plugin: without pytest, say which install brings it, before anything else fails.
try:
    import pytest  # noqa: F401
except ImportError as exc:
    raise ImportError('idemlab.testing needs pytest, which is not installed: pip install "idemlab[testing]"') from exc

from idemlab.testing.explore import ExplorationReport, LostEffectError, ScheduleError
from idemlab.testing.handlers import Crash, CrashError, Handler, HandlerError, Queue
from idemlab.testing.lab import Backend, CopiesFailedWarning, DeliveryError, EffectCountError, Lab
from idemlab.testing.report import CopyResult, CrashNotReached, Delivery, DuplicateEffectError, EffectReport

__all__ = [
    "Backend",
    "CopiesFailedWarning",
    "CopyResult",
    "Crash",
    "CrashError",
    "CrashNotReached",
    "Delivery",
    "DeliveryError",
    "DuplicateEffectError",
    "EffectCountError",
    "EffectReport",
    "ExplorationReport",
    "Handler",
    "HandlerError",
    "Lab",
    "LostEffectError",
    "Queue",
    "ScheduleError",
]
