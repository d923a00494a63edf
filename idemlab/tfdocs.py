"""Generate the inputs/outputs tables of the module README: ``python -m idemlab.tfdocs``.

Takes every ``variable`` and ``output`` block of the module (each ``*.tf`` file, though the
module keeps its inputs in ``variables.tf`` and its outputs in ``outputs.tf``) from
``idemlab.module_spec`` and rewrites the part of ``README.md`` between the two markers, so the tables never drift
from the code (tests/terraform/test_static.py fails when they would change, or when a
block is missing from them).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from idemlab.module_spec import Block, module_blocks
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
