"""Lesson 1 plumbing: run the vehicle-registration workflows, count rows, draw the result.

The notebook ``01_duplicate_inserts.ipynb`` imports this module; tests use it too, so
what the notebook shows is what CI checks.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import uuid
from types import ModuleType

from idemlab import settings

FUNCTION_DIR = settings.ROOT / "functions" / "vehicle_registration"


def import_function_module(name: str) -> ModuleType:
    """A module of the Lambda code (``"notify"``, ``"registration.vin"``), imported in-process.

    The zip's root is the function folder, so its modules import each other as top-level
    names; the folder goes on ``sys.path`` the same way. Handler modules are registered
    under a prefixed name so that another scenario's ``notify`` cannot shadow this one.
    """
    folder = str(FUNCTION_DIR)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    if name.startswith("registration"):
        return importlib.import_module(name)
    qualified = f"vehicle_registration_functions.{name}"
    if qualified in sys.modules:
        return sys.modules[qualified]
    spec = importlib.util.spec_from_file_location(qualified, FUNCTION_DIR / f"{name}.py")
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"no function module {name!r} in {FUNCTION_DIR.name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = module
    spec.loader.exec_module(module)
    return module


# A published VIN with a valid check digit (its ninth character, X, stands for 10).
VALID_VIN = "1M8GDM9AXKP042788"
STOLEN_VIN = "1FTFW1E53MFA00001"  # on the RMV check's stolen list, check digit valid

# Each malformed request, and the error the workflow fails with. Nothing may be written.
MALFORMED_REQUESTS: dict[str, tuple[object, str]] = {
    "missing VIN": ({"request_id": "bad-1", "owner": "Ada"}, "MalformedRequestError"),
    "VIN is a number": (
        {"request_id": "bad-2", "vin": 11111111111111111, "owner": "Ada"},
        "MalformedRequestError",
    ),
    "owner is a list": (
        {"request_id": "bad-3", "vin": VALID_VIN, "owner": ["Ada"]},
        "MalformedRequestError",
    ),
    "request_id is null": ({"request_id": None, "vin": VALID_VIN, "owner": "Ada"}, "MalformedRequestError"),
    "blank owner": ({"request_id": "bad-5", "vin": VALID_VIN, "owner": "  "}, "MalformedRequestError"),
    "misspelt field": (
        {"request_id": "bad-6", "vin": VALID_VIN, "owner": "Ada", "fault_injektion": {}},
        "MalformedRequestError",
    ),
    "fault count is a string": (
        {"request_id": "bad-7", "vin": VALID_VIN, "owner": "Ada", "fault_injection": {"notify_failures": "1"}},
        "MalformedRequestError",
    ),
    "request is an array": ([VALID_VIN], "MalformedRequestError"),
    "VIN check digit wrong": (
        {"request_id": "bad-9", "vin": "1M8GDM9A1KP042788", "owner": "Ada"},
        "InvalidVinError",
    ),
    "VIN too short": ({"request_id": "bad-10", "vin": "1M8GDM9AXKP04278", "owner": "Ada"}, "InvalidVinError"),
    "VIN with O": ({"request_id": "bad-11", "vin": "1M8GDM9AXKP04278O", "owner": "Ada"}, "InvalidVinError"),
    "stolen vehicle": ({"request_id": "bad-12", "vin": STOLEN_VIN, "owner": "Ada"}, "StolenVehicleError"),
}


def new_request(owner: str = "Ada Lovelace", vin: str = VALID_VIN, notify_failures: int = 0) -> dict:
    """A registration request with a fresh request id (the idempotency key)."""
    request: dict = {"request_id": f"req-{uuid.uuid4().hex[:12]}", "vin": vin, "owner": owner}
    if notify_failures:
        request["fault_injection"] = {"notify_failures": notify_failures}
    return request
