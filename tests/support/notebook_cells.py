"""The starting point of an exercise, read from the notebook cell the learner edits.

The answer key is checked both ways: the solution must pass and the starting point must
fail. The starting point lives in one place, the notebook, so the check runs on exactly
the code a learner starts from.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from idemlab import settings

_FOLDER = Path(tempfile.mkdtemp(prefix="notebook-cells-"))


def starting_point(notebook: str, name: str) -> Callable[..., Any]:
    """The function ``name`` as the first code cell of ``notebooks/<notebook>`` defines it,
    with the imports of the cells up to it, in a module file of its own (so that
    ``inspect.getsource`` reads it, as it does a notebook's function)."""
    imports = []
    for cell in json.loads((settings.ROOT / "notebooks" / notebook).read_text())["cells"]:
        source = "".join(cell["source"]) if cell["cell_type"] == "code" else ""
        for node in ast.parse(source).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                imports.append(ast.get_source_segment(source, node))
            elif isinstance(node, ast.FunctionDef) and node.name == name:
                path = _FOLDER / f"{Path(notebook).stem}_{name}.py"
                path.write_text("\n".join([*imports, "", "", ast.get_source_segment(source, node), ""]))
                spec = importlib.util.spec_from_file_location(path.stem, path)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                return getattr(module, name)
    raise LookupError(f"no code cell of {notebook} defines {name}")


def code_cells(notebook: str) -> list[str]:
    """The sources of the code cells of ``notebooks/<notebook>``, in order."""
    cells = json.loads((settings.ROOT / "notebooks" / notebook).read_text())["cells"]
    return ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"]


def run_cells(sources: list[str], namespace: dict) -> None:
    """Run notebook cell sources in ``namespace``, one after the other, as a kernel would."""
    for source in sources:
        exec(compile(source, "<notebook cell>", "exec"), namespace)


def index_of(sources: list[str], fragment: str) -> int:
    """The one code cell that contains ``fragment``."""
    hits = [n for n, source in enumerate(sources) if fragment in source]
    if len(hits) != 1:
        raise LookupError(f"{len(hits)} code cells contain {fragment!r}")
    return hits[0]
