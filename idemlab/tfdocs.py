"""Generate the inputs/outputs tables of the module README: ``python -m idemlab.tfdocs``.

Reads ``variables.tf`` and ``outputs.tf`` with python-hcl2 and rewrites the part of
``README.md`` between the two markers, so the tables never drift from the code
(tests/test_terraform_static.py fails when they would change).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from idemlab.functions import hcl_blocks
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


def render_readme(text: str, module_dir: Path = MODULE_DIR) -> str:
    """``text`` with the generated section (the inputs and outputs tables) replaced."""
    start = text.find(BEGIN)
    stop = text.find(END)
    if start < 0 or stop < start:
        raise ValueError(f"the README needs the markers {BEGIN} and {END}, in that order")
    rows = [text[:start] + BEGIN, "## Inputs", "", "| Name | Description | Type | Default | Required |"]
    rows.append("|------|-------------|------|---------|:--------:|")
    for name, body in sorted(hcl_blocks(module_dir / "variables.tf", "variable").items()):
        default = f"`{_cell(json.dumps(body['default']))}` | no" if "default" in body else "n/a | yes"
        described = _cell(body.get("description", ""))
        typed = _cell(body.get("type", "any"))
        rows.append(f"| `{name}` | {described} | `{typed}` | {default} |")
    rows += ["", "## Outputs", "", "| Name | Description |", "|------|-------------|"]
    for name, body in sorted(hcl_blocks(module_dir / "outputs.tf", "output").items()):
        rows.append(f"| `{name}` | {_cell(body.get('description', ''))} |")
    return "\n".join([*rows, text[stop:]])


if __name__ == "__main__":
    readme = MODULE_DIR / "README.md"
    try:
        readme.write_text(render_readme(readme.read_text()))
    except (OSError, ValueError) as exc:
        sys.exit(f"tfdocs: {exc}")
    print(f"tfdocs: wrote {readme}")
