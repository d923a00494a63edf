"""Generate the inputs/outputs tables of the module README: ``python -m idemlab.tfdocs``.

Reads every ``variable`` and ``output`` block of the module (each ``*.tf`` file: some inputs
live beside the resources they shape, e.g. ``tables`` in ``tables.tf``) with python-hcl2
and rewrites the part of ``README.md`` between the two markers, so the tables never drift
from the code (tests/test_terraform_static.py fails when they would change, or when a
block is missing from them).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from idemlab.lambda_code import hcl_blocks
from idemlab.settings import MODULE_DIR

BEGIN = "<!-- BEGIN_TF_DOCS -->"
END = "<!-- END_TF_DOCS -->"


def _cell(value: object) -> str:
    """An HCL value as the module's user would write it, fit for a table cell."""
    if not isinstance(value, str):
        value = json.dumps(value)
    elif value.startswith("${") and value.endswith("}"):
        value = value[2:-1]
    return value.replace("|", "\\|").replace("\n", " ")


# A default longer than this is named, not printed: the lab's tables and functions are
# maps of dozens of entries, read best in the file that declares them.
MAX_DEFAULT_CHARACTERS = 120


@dataclass(frozen=True)
class Block:
    """One ``variable`` or ``output`` block of the module."""

    file: str  # the .tf file that declares it
    body: dict  # its attributes, as python-hcl2 reads them


def module_blocks(module_dir: Path, kind: str) -> dict[str, Block]:
    """Every block of one kind (``variable``, ``output``) in the module's ``*.tf`` files, by name.
    A name declared twice is refused, as Terraform refuses it."""
    blocks: dict[str, Block] = {}
    for path in sorted(module_dir.glob("*.tf")):
        for name, body in hcl_blocks(path, kind).items():
            if name in blocks:
                raise ValueError(f"{kind} {name!r} is declared twice in {module_dir} (again in {path.name})")
            blocks[name] = Block(file=path.name, body=body)
    return blocks


def _default(block: Block) -> str:
    """The Default and Required cells of an input."""
    if "default" not in block.body:
        return "n/a | yes"
    default = json.dumps(block.body["default"])
    if len(default) > MAX_DEFAULT_CHARACTERS:
        entries = len(block.body["default"]) if isinstance(block.body["default"], dict | list) else None
        what = f"{entries} entries" if entries is not None else "long"
        return f"{what}, in `{block.file}` | no"
    return f"`{_cell(default)}` | no"


def render_readme(text: str, module_dir: Path = MODULE_DIR) -> str:
    """``text`` with the generated section (the inputs and outputs tables) replaced."""
    start = text.find(BEGIN)
    stop = text.find(END)
    if start < 0 or stop < start:
        raise ValueError(f"the README needs the markers {BEGIN} and {END}, in that order")
    rows = [text[:start] + BEGIN, "## Inputs", "", "| Name | Description | Type | Default | Required |"]
    rows.append("|------|-------------|------|---------|:--------:|")
    for name, block in sorted(module_blocks(module_dir, "variable").items()):
        described = _cell(block.body.get("description", ""))
        typed = _cell(block.body.get("type", "any"))
        rows.append(f"| `{name}` | {described} | `{typed}` | {_default(block)} |")
    rows += ["", "## Outputs", "", "| Name | Description |", "|------|-------------|"]
    for name, block in sorted(module_blocks(module_dir, "output").items()):
        rows.append(f"| `{name}` | {_cell(block.body.get('description', ''))} |")
    return "\n".join([*rows, text[stop:]])


if __name__ == "__main__":
    readme = MODULE_DIR / "README.md"
    try:
        readme.write_text(render_readme(readme.read_text()))
    except (OSError, ValueError) as exc:
        sys.exit(f"tfdocs: {exc}")
    print(f"tfdocs: wrote {readme}")
