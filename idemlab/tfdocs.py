"""Generate the inputs/outputs tables of the module README: ``python -m idemlab.tfdocs``.

Reads ``variables.tf`` and ``outputs.tf`` with python-hcl2 and rewrites the part of
``README.md`` between the two markers, so the tables never drift from the code
(``--check`` exits 1 instead of writing when they would change).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import hcl2
from hcl2 import SerializationOptions

from idemlab import settings

MODULE_DIR = settings.ROOT / "terraform" / "modules" / "idempotency_lab"
BEGIN = "<!-- BEGIN_TF_DOCS -->"
END = "<!-- END_TF_DOCS -->"
PARSE_OPTIONS = SerializationOptions(strip_string_quotes=True, explicit_blocks=False, with_comments=False)


class DocsError(Exception):
    """The README or the Terraform files cannot be turned into tables."""


def _blocks(path: Path, kind: str) -> dict[str, dict]:
    with open(path) as handle:
        parsed = hcl2.load(handle, serialization_options=PARSE_OPTIONS)
    return {name: body for block in parsed.get(kind, []) for name, body in block.items()}


def _expression(value: object) -> str:
    """An HCL value as the module's user would write it."""
    if isinstance(value, str):
        return value[2:-1] if value.startswith("${") and value.endswith("}") else value
    return json.dumps(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def inputs_table(module_dir: Path) -> str:
    rows = ["| Name | Description | Type | Default | Required |", "|------|-------------|------|---------|:--------:|"]
    for name, body in sorted(_blocks(module_dir / "variables.tf", "variable").items()):
        has_default = "default" in body
        default = f"`{_cell(json.dumps(body['default']))}`" if has_default else "n/a"
        rows.append(
            f"| `{name}` | {_cell(body.get('description', ''))} | `{_cell(_expression(body.get('type', 'any')))}` | {default} | {'no' if has_default else 'yes'} |"
        )
    return "\n".join(rows)


def outputs_table(module_dir: Path) -> str:
    rows = ["| Name | Description |", "|------|-------------|"]
    for name, body in sorted(_blocks(module_dir / "outputs.tf", "output").items()):
        rows.append(f"| `{name}` | {_cell(body.get('description', ''))} |")
    return "\n".join(rows)


def render_tables(module_dir: Path = MODULE_DIR) -> str:
    return f"## Inputs\n\n{inputs_table(module_dir)}\n\n## Outputs\n\n{outputs_table(module_dir)}\n"


def render_readme(text: str, module_dir: Path = MODULE_DIR) -> str:
    """``text`` with the generated section replaced."""
    start, stop = text.find(BEGIN), text.find(END)
    if start < 0 or stop < start:
        raise DocsError(f"the README needs the markers {BEGIN} and {END}, in that order")
    return f"{text[:start]}{BEGIN}\n{render_tables(module_dir)}{text[stop:]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", type=Path, default=MODULE_DIR)
    parser.add_argument("--check", action="store_true", help="exit 1 if the README is out of date")
    args = parser.parse_args(argv)
    readme = args.module / "README.md"
    try:
        current = readme.read_text()
        rendered = render_readme(current, args.module)
    except (OSError, DocsError) as exc:
        print(f"tfdocs: {exc}", file=sys.stderr)
        return 1
    if rendered == current:
        return 0
    if args.check:
        print(f"tfdocs: {readme} is out of date; run python -m idemlab.tfdocs", file=sys.stderr)
        return 1
    readme.write_text(rendered)
    print(f"tfdocs: updated {readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
