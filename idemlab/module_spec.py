"""The Terraform module as the harness reads it: the one place that opens the module's files.

Whatever the harness and its tests take from the Terraform is read here, through python-hcl2's
parser, never by matching the text: the defaults of the module's typed inputs (``default``),
a function's entry, tables and environment (``function``, ``environment``, ``table_keys``),
a local's plain value (``local_value``),
the prefix rule of the ``prefix`` validation (``prefix_pattern``), the workflows the
Scheduler's role may start (``scheduler_starts``, from ``iam.tf``), the module's resources of
a kind (``resources``), the ASL definitions (``workflows``), and what the module README is generated from: its
``variable`` and ``output`` blocks (``module_blocks``), its ``terraform`` block
(``requirements``) and its resources and data sources (``declared``). Everything else
asks this module; ``tests/terraform/test_module_spec.py`` fails on any other file under ``idemlab/`` or
``tests/`` that opens a ``.tf`` file or imports the parser.

Two readings, for two needs: ``blocks`` turns a file into plain values (strings, lists, maps)
for what the module declares; ``_document`` keeps the syntax tree, for what sits inside an
expression (a function call's argument, an index into a local), which no plain value holds.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

import hcl2
from hcl2.query import DocumentView, view_for
from hcl2.rules.functions import FunctionCallRule
from hcl2.rules.indexing import IndexExprTermRule

from idemlab.settings import MODULE_DIR

# Plain values as a module's user writes them: no quotes around strings, a block as a map.
_HCL = hcl2.SerializationOptions(strip_string_quotes=True, explicit_blocks=False, with_comments=False)


def blocks(path: Path, kind: str) -> dict[str, dict]:
    """The blocks of one kind (``variable``, ``output``, ``run``) of an HCL file, by name."""
    parsed = hcl2.loads(path.read_text(), serialization_options=_HCL)
    found = {}
    # python-hcl2 gives a list of one-entry maps, one per block: {"<name>": {...body...}}
    for block in parsed.get(kind, []):
        for name, body in block.items():
            found[name.strip('"')] = body
    return found


def document(path: Path) -> dict:
    """A whole HCL file as plain values (``terraform``, ``provider`` and other unnamed blocks)."""
    return hcl2.loads(path.read_text(), serialization_options=_HCL)


def labels(path: Path, kind: str) -> list[str]:
    """The name of every block of one kind in an HCL file, from the syntax tree: a second route
    to the names ``blocks`` finds, for a test that holds what is generated from ``blocks`` to
    what the file declares."""
    return [block.name_labels[0] for block in DocumentView.parse(path.read_text()).blocks(kind)]


def block_labels(path: Path, kind: str) -> list[tuple[str, ...]]:
    """Every label of every block of one kind in an HCL file (``("aws_s3_bucket", "this")``
    for a resource), from the syntax tree."""
    return [tuple(block.name_labels) for block in DocumentView.parse(path.read_text()).blocks(kind)]


@dataclass(frozen=True)
class Requirements:
    """What the module's ``terraform`` block asks for."""

    terraform: str  # its required_version constraint
    providers: dict[str, dict]  # local name -> {"source": ..., "version": ...}, from required_providers


def requirements(module_dir: Path = MODULE_DIR) -> Requirements:
    """The ``terraform`` block of the module's ``versions.tf``."""
    (block,) = document(module_dir / "versions.tf")["terraform"]
    providers = {name: spec for entry in block.get("required_providers", []) for name, spec in entry.items()}
    return Requirements(terraform=block.get("required_version", ""), providers=providers)


@dataclass(frozen=True)
class Declared:
    """One ``resource`` or ``data`` block of the module."""

    mode: str  # "resource" or "data"
    type: str  # aws_dynamodb_table
    name: str  # this
    file: str  # the .tf file that declares it


def declared(module_dir: Path = MODULE_DIR) -> list[Declared]:
    """Every resource and data source the module declares, in file order."""
    found = []
    for path in files(module_dir):
        parsed = document(path)
        for mode in ("resource", "data"):
            for block in parsed.get(mode, []):
                for kind, named in block.items():
                    found += [Declared(mode=mode, type=kind, name=name, file=path.name) for name in named]
    return found


@dataclass(frozen=True)
class Block:
    """One ``variable`` or ``output`` block of the module."""

    file: str  # the .tf file that declares it
    body: dict  # its attributes, as python-hcl2 reads them


def files(module_dir: Path = MODULE_DIR) -> list[Path]:
    """The module's own ``*.tf`` files (not its examples' or tests')."""
    return sorted(module_dir.glob("*.tf"))


def module_blocks(module_dir: Path, kind: str) -> dict[str, Block]:
    """Every block of one kind (``variable``, ``output``) in the module's ``*.tf`` files, by name.
    A name declared twice is refused, as Terraform refuses it."""
    found: dict[str, Block] = {}
    for path in files(module_dir):
        for name, body in blocks(path, kind).items():
            if name in found:
                raise ValueError(f"{kind} {name!r} is declared twice in {module_dir} (again in {path.name})")
            found[name] = Block(file=path.name, body=body)
    return found


@functools.cache
def _variables() -> dict[str, Block]:
    return module_blocks(MODULE_DIR, "variable")


def variable(name: str) -> dict:
    """The body of the module's ``variable "<name>"`` block, whichever file declares it."""
    block = _variables().get(name)
    if block is None:
        raise KeyError(f"no variable {name!r} in {MODULE_DIR.name}")
    return block.body


def default(name: str) -> dict:
    """The default of a module variable (the lab's tables, functions, queues, event sources and
    workflows are typed inputs whose defaults are the lab)."""
    body = variable(name)
    if "default" not in body:
        raise KeyError(f"no default for variable {name!r} in {_variables()[name].file}")
    return body["default"]


def local_value(name: str) -> object:
    """A local of the module, as a plain value (the lessons' maps: ``lesson_dlq``)."""
    for path in files():
        for block in document(path).get("locals", []):
            if name in block:
                return block[name]
    raise KeyError(f"no local {name!r} in {MODULE_DIR.name}")


def function(key: str) -> dict:
    """The function's entry in the default of ``variable "functions"`` (lesson, timeout,
    tables, invokes, env)."""
    entry = default("functions").get(key)
    if entry is None:
        raise KeyError(f"no function {key!r} in variables.tf")
    return entry


def environment(function_key: str, tables: dict[str, str], functions: dict[str, str] | None = None) -> dict[str, str]:
    """The variables ``functions.tf`` gives the function, for the given table and function names.

    Only the names it derives (``<KEY>_TABLE``, ``<KEY>_FUNCTION``) and its ``env`` (literal,
    as a variable's default is): what the module adds from its locals is left out.
    """
    entry = function(function_key)
    wanted = [(name, "TABLE", tables) for name in entry.get("tables", {})]
    wanted += [(name, "FUNCTION", functions or {}) for name in entry.get("invokes", [])]
    if missing := [name for name, _, given in wanted if name not in given]:
        raise KeyError(f"{function_key} needs the names of {', '.join(missing)}")
    return {f"{name.upper()}_{kind}": given[name] for name, kind, given in wanted} | (entry.get("env") or {})


def table_keys(*function_keys: str) -> dict[str, str]:
    """The hash key (``variable "tables"``) of each table these functions name in ``variable "functions"``:
    string-keyed tables without a sort key only (the tests' private copies of a lesson's tables)."""
    tables = default("tables")
    names = sorted({table for key in function_keys for table in function(key).get("tables", {})})
    if unknown := [name for name in names if name not in tables]:
        raise KeyError(f"no table {', '.join(unknown)} in variables.tf")
    if composite := [name for name in names if "range_key" in tables[name] or "types" in tables[name]]:
        raise ValueError(f"{', '.join(composite)} has a sort key or typed attributes: read its whole entry")
    return {name: tables[name]["hash_key"] for name in names}


def resources(kind: str) -> dict[str, dict]:
    """The module's ``resource "<kind>" "<name>"`` blocks, by name, as plain values (an
    expression is its HCL inside ``${...}``: ``"${local.stuck_metric_name}"``)."""
    found = {}
    for path in files():
        for block in document(path).get("resource", []):
            found.update(block.get(kind, {}))
    return found


def _document(file: str) -> DocumentView:
    """The syntax tree of one of the module's files."""
    return DocumentView.parse((MODULE_DIR / file).read_text())


@functools.cache
def prefix_pattern() -> re.Pattern:
    """The module's rule for a prefix (a participant's name): the pattern its ``prefix``
    validation passes to ``regex(<pattern>, var.prefix)``, taken from the call's first argument.
    The module is the rule's one owner; the harness checks names with it before Terraform runs."""
    (declared,) = _document("variables.tf").blocks("variable", "prefix")
    for rule in declared.blocks("validation"):
        for call in rule.attribute("condition").value_node.find_all(FunctionCallRule):
            arguments = call.args
            if call.name == "regex" and len(arguments) == 2 and arguments[1].to_hcl().strip() == "var.prefix":
                return re.compile(arguments[0].to_dict(_HCL))
    raise RuntimeError(f"no regex(..., var.prefix) validation in {MODULE_DIR / 'variables.tf'}")


def scheduler_starts() -> set[str]:
    """The workflows the Scheduler's role may start: the keys of ``local.workflow_arn`` its
    policy (``aws_iam_role_policy.scheduler`` in ``iam.tf``) names as resources."""
    (policy,) = _document("iam.tf").blocks("resource", "aws_iam_role_policy", "scheduler")
    started = set()
    for index in policy.attribute("policy").value_node.find_all(IndexExprTermRule):
        base, subscript = index.raw.children[0], index.raw.children[1]
        if view_for(base).to_hcl().strip() == "local.workflow_arn":
            started.add(subscript.index_expression.serialize(_HCL))
    return started


def examples(module_dir: Path = MODULE_DIR) -> list[str]:
    """The module's examples: each folder of ``examples/`` that holds a root (a ``main.tf``)."""
    return sorted(path.parent.name for path in (module_dir / "examples").glob("*/main.tf"))


def workflows() -> dict[str, dict]:
    """Every ASL definition of the module, by its file name without ``.asl.json``. The files
    parse as they are: Terraform's ${...} placeholders sit inside JSON strings."""
    paths = sorted(MODULE_DIR.glob("workflows/*.asl.json"))
    return {path.name.removesuffix(".asl.json"): json.loads(path.read_text()) for path in paths}
