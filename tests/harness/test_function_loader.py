"""The one loader of Lambda code (idemlab.lambda_code): a function folder's modules are
imported under the names its zip gives them, and nothing of them stays on sys.path."""

from __future__ import annotations

import subprocess
import sys

import pytest

from idemlab import lambda_code, module_spec, settings
from idemlab.module_spec import table_keys

FOLDERS = settings.ROOT / "functions"

# Run in a fresh interpreter: this test process has imported much already.
IMPORT_EXERCISES = """
import sys
before = list(sys.path)
from idemlab.exercises import checkout, deletion, keys, queues, vehicles
changed = [p for p in sys.path if p not in before]
print("\\n".join(changed))
"""


def test_importing_the_exercises_leaves_sys_path_as_it_was():
    child = subprocess.run([sys.executable, "-c", IMPORT_EXERCISES], capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr[-2000:]
    assert child.stdout.strip() == "", f"importing the exercises added to sys.path: {child.stdout.strip()}"


def test_a_loaded_module_leaves_sys_path_and_modules_as_they_were():
    path, names = list(sys.path), set(sys.modules)
    request = lambda_code.load(FOLDERS / "checkout", "charging.request")
    assert sys.path == path
    assert not {name for name in set(sys.modules) - names if name.split(".")[0] == "charging"}
    # Shared within the folder: the errors a module raises are the ones a caller loads.
    errors = lambda_code.load(FOLDERS / "checkout", "charging.errors")
    assert request.InvalidRequestError is errors.InvalidRequestError


def test_each_folder_loads_its_own_copy_of_the_shared_package_as_its_zip_holds_one():
    names = set(sys.modules)
    in_checkout = lambda_code.load(FOLDERS / "checkout", "shared.faults")
    in_deletion = lambda_code.load(FOLDERS / "deletion", "shared.faults")
    assert in_checkout is not in_deletion
    # The lesson's own modules import the copy of their folder.
    assert lambda_code.load(FOLDERS / "checkout", "charging.faults").faults is in_checkout
    assert not {name for name in set(sys.modules) - names if name.split(".")[0] == "shared"}


def test_an_unknown_module_is_refused_by_name():
    with pytest.raises(ModuleNotFoundError, match="no module 'nope' in the function folder checkout"):
        lambda_code.load(FOLDERS / "checkout", "nope")


def test_facts_from_the_terraform_module_refuse_what_they_cannot_answer():
    with pytest.raises(KeyError, match=r"no function 'nope' in variables.tf"):
        table_keys("nope")
    with pytest.raises(ValueError, match="user_records has a sort key"):
        table_keys("delete_records")
    with pytest.raises(KeyError, match="checkout_naive needs the names of card_processor"):
        module_spec.environment("checkout_naive", {})
    assert module_spec.environment("checkout_naive", {}, {"card_processor": "cp"}) == {"CARD_PROCESSOR_FUNCTION": "cp"}
