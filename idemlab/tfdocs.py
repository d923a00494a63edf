"""Generate the module README's reference: ``python -m idemlab.tfdocs``.

The sections terraform-docs writes, in its order: Requirements and Providers (the module's
``terraform`` block), Resources (every ``resource`` and ``data`` block), Inputs and Outputs
(every ``variable`` and ``output`` block), all read through ``idemlab.module_spec``.
terraform-docs itself is a Go binary this lab does not install; this writes the same tables
from python-hcl2's reading of the module. It rewrites the part of ``README.md`` between the
two markers, so the reference never drifts from the code (tests/terraform/test_static.py
fails when it would change, or when a block is missing from it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from idemlab import module_spec
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


def _requirements(module_dir: Path) -> list[str]:
    """Requirements and Providers: Terraform's and each provider's version constraint."""
    required = module_spec.requirements(module_dir)
    rows = ["## Requirements", "", "| Name | Version |", "|------|---------|"]
    rows.append(f"| terraform | `{_cell(required.terraform)}` |")
    rows += [f"| {name} | `{_cell(spec.get('version', 'any'))}` |" for name, spec in sorted(required.providers.items())]
    rows += ["", "## Providers", "", "| Name | Source | Version |", "|------|--------|---------|"]
    for name, spec in sorted(required.providers.items()):
        rows.append(f"| {name} | `{spec.get('source', name)}` | `{_cell(spec.get('version', 'any'))}` |")
    return rows


def _resources(module_dir: Path) -> list[str]:
    """Resources: every resource and data source, with the file that declares it."""
    rows = ["## Resources", "", "| Name | Type | File |", "|------|------|------|"]
    kinds = {"resource": "resource", "data": "data source"}
    for block in sorted(module_spec.declared(module_dir), key=lambda block: (block.mode, block.type, block.name)):
        address = f"{'data.' if block.mode == 'data' else ''}{block.type}.{block.name}"
        rows.append(f"| `{address}` | {kinds[block.mode]} | `{block.file}` |")
    return rows


def render_readme(text: str, module_dir: Path = MODULE_DIR) -> str:
    """``text`` with the generated sections (Requirements to Outputs) replaced."""
    start = text.find(BEGIN)
    stop = text.find(END)
    if start < 0 or stop < start:
        raise ValueError(f"the README needs the markers {BEGIN} and {END}, in that order")
    rows = [text[:start] + BEGIN, *_requirements(module_dir), "", *_resources(module_dir), ""]
    rows += ["## Inputs", "", "| Name | Description | Type | Default | Required |"]
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
