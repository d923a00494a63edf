"""Copies of the lab standing for separate machines: each with its own `.lab/` (state,
handouts, Terraform working copies), its own idemlab first on the path, and a shell with
none of the lab's or AWS's variables."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from idemlab import settings

# What a machine's lab is made of: the harness, the Lambda code, the Terraform and the notebooks.
CLONED = ("idemlab", "functions", "terraform", "notebooks", "pyproject.toml")
# A fresh machine's shell: none of the lab's or AWS's variables.
DROPPED = ("BACKEND", "LAB_PORT", "PARTICIPANT", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION", "PYTHONPATH")


def clone(where: Path) -> Path:
    """A copy of this lab at ``where``, without generated files."""
    where.mkdir()
    ignored = shutil.ignore_patterns("__pycache__", ".terraform*", "*.tfstate*")
    for name in CLONED:
        source = settings.ROOT / name
        if source.is_dir():
            shutil.copytree(source, where / name, ignore=ignored)
        else:
            shutil.copy2(source, where / name)
    return where


def machine_env(root: Path, **extra: str) -> dict[str, str]:
    """The environment of a process of the lab copy at ``root``: its own idemlab first."""
    env = {name: value for name, value in os.environ.items() if name not in DROPPED}
    return env | {"PYTHONPATH": str(root), **extra}


def run(root: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    """``python <args>`` in the copy at ``root``, stdin closed (no one to answer a prompt)."""
    ran = subprocess.run(
        [sys.executable, *args],
        cwd=root,
        env=env,
        text=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    print(f"$ {' '.join(args)}  (in {root.name}, exit {ran.returncode})\n{ran.stdout}")
    return ran
