"""Lambda code imported outside Lambda: a function folder's modules, loaded in this process.
What the Terraform module gives a function (its tables and environment) is read by
``idemlab.module_spec``.

``load`` is the one way the harness imports Lambda code. A function's zip has its folder at
the root, so its modules import each other by top-level names (``charging.processor``,
``erasure.state``), and the ``shared`` package ``build.py`` packs beside them
(``shared.faults``): ``load`` gives a folder's modules those names while they import, as
Lambda does, then leaves ``sys.path`` and ``sys.modules`` as they were, so two folders never
see each other's modules (each folder has its own copy of ``shared``, as each zip has). A
folder's modules are imported once and shared by every later ``load`` from it, so an
exception class one of them raises is the class the caller catches. A module reads its
configuration when first loaded, like a Lambda cold start: set the environment first.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from pathlib import Path
from types import ModuleType

from idemlab import build

_loaded: dict[Path, dict[str, ModuleType]] = {}
_lock = threading.RLock()


def load(folder: str | Path, module: str) -> ModuleType:
    """``module`` (``"checkout_naive"``, ``"charging.outcomes"``, ``"shared.faults"``) of the
    function ``folder``, as its zip holds it."""
    root = Path(folder).resolve()
    if not root.is_dir():
        raise FileNotFoundError(f"no function folder {root}")
    if root == build.SHARED_DIR.resolve():
        own = {build.SHARED}  # the shared package alone, imported as a lesson's zip holds it
    else:
        own = {path.stem for path in root.glob("*.py")} | {path.parent.name for path in root.glob("*/__init__.py")}
        own.add(build.SHARED)
    if module.split(".")[0] not in own:
        has = ", ".join(sorted(own))
        raise ModuleNotFoundError(f"no module {module!r} in the function folder {root.name}; it has {has}")
    with _lock:
        modules = _loaded.setdefault(root, {})
        if module not in modules:
            elsewhere = _take(own)  # the same names from another folder, or from the caller
            sys.modules.update(modules)
            sys.modules.setdefault(build.SHARED, _shared_package())
            sys.path.insert(0, str(root))
            try:
                importlib.import_module(module)
            finally:
                sys.path.remove(str(root))
                modules.update(_take(own))
                sys.modules.update(elsewhere)
        return modules[module]


def _shared_package() -> ModuleType:
    """A fresh ``shared`` package from ``functions/shared/``, as ``build.py`` packs it into a
    zip; its submodules import from there too (the package's ``__path__``)."""
    init = build.SHARED_DIR / "__init__.py"
    spec = importlib.util.spec_from_file_location(build.SHARED, init, submodule_search_locations=[str(init.parent)])
    package = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(package)
    return package


def _take(names: set[str]) -> dict[str, ModuleType]:
    """Take the modules named ``names`` (and their submodules) out of ``sys.modules``."""
    return {name: sys.modules.pop(name) for name in list(sys.modules) if name.split(".")[0] in names}
