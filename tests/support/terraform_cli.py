"""Terraform as the static tests run it: offline (the CLI config `idemlab.stack` writes), on
the module's own defaults, and with a provider mocked for `terraform test` plans."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

from idemlab import stack

# For `terraform test` files that plan the module without AWS: the data sources it reads.
MOCKED_AWS = """
mock_provider "aws" {
  mock_data "aws_caller_identity" {
    defaults = { account_id = "123456789012" }
  }
  mock_data "aws_region" {
    defaults = { name = "us-east-1" }
  }
  mock_data "aws_partition" {
    defaults = { partition = "aws" }
  }
}
"""


def terraform(*args: str, cwd: Path, timeout: int = 300, merged: bool = False) -> subprocess.CompletedProcess:
    """Run Terraform; ``merged``: its output and errors in one stream, in order."""
    # The module's own defaults, not the suite stack's inputs (tests/conftest.py exports
    # TF_VAR_functions and TF_VAR_queues for its deploys, with longer timeouts).
    env = {name: value for name, value in stack.terraform_env("aws").items() if not name.startswith("TF_VAR_")}
    # An init fills the plugin cache the stacks' deploys fill too: it takes their lock.
    with stack.plugin_cache_lock() if args[0] == "init" else contextlib.nullcontext():
        return subprocess.run(
            ["terraform", *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merged else subprocess.PIPE,
            text=True,
            timeout=timeout,
        )
