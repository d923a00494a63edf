"""docs/DESIGN.md stays true: every path and dotted Python name it puts in backticks exists
in the tree, and every top-level module of the harness and every file of tests/support/
is named there. No server: the tree is read as text and Python syntax trees."""

from __future__ import annotations

import ast
import functools
import re
import subprocess
from pathlib import Path

from idemlab import settings

DESIGN = settings.ROOT / "docs" / "DESIGN.md"
TOKEN = re.compile(r"`([^`\n]+)`")
# A backticked word is a path when it has a slash or ends in one of these.
FILE_SUFFIXES = (".py", ".tf", ".json", ".md", ".ipynb", ".hcl", ".txt", ".c", ".java", ".toml", ".yml", ".yaml")
# Made by the lab as it runs, never committed: named in the design, absent from a clone.
GENERATED = ("build/", ".lab/", ".venv/")
PLACEHOLDER = re.compile(r"<[^>]+>")
DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")


@functools.cache
def tree_files() -> tuple[str, ...]:
    """The files of the project as a clone has them, tracked or new (not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=settings.ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return tuple(line for line in listed.stdout.splitlines() if (settings.ROOT / line).exists())


def _pattern(token: str) -> re.Pattern:
    """A path as written in the design, as a regex: `<slug>` and `*` stand for one name."""
    parts = [re.escape(part) for part in PLACEHOLDER.split(token)]
    return re.compile(r"[^/]+".join(parts).replace(r"\*", r"[^/]*"))


@functools.cache
def _tails() -> tuple[frozenset[str], frozenset[str]]:
    """Every file and every folder of the tree, as written from the root or any folder below it."""
    files, folders = set(), set()
    for path in tree_files():
        parts = path.split("/")
        files.update("/".join(parts[i:]) for i in range(len(parts)))
        folders.update("/".join(parts[i:j]) for i in range(len(parts)) for j in range(i + 1, len(parts)))
    return frozenset(files), frozenset(folders)


def path_exists(token: str) -> bool:
    """A file or folder the design names, written from the root or from a folder of its own
    (`bench/strategies.py` inside idemlab/, `aws.md` inside docs/)."""
    files, folders = _tails()
    known = folders if token.endswith("/") else files
    token = token.rstrip("/")
    if not PLACEHOLDER.search(token) and "*" not in token:
        return token in known
    pattern = _pattern(token)
    return any(pattern.fullmatch(candidate) for candidate in known)


@functools.cache
def _syntax(path: str) -> ast.Module:
    return ast.parse((settings.ROOT / path).read_text())


def _names(body: list[ast.stmt]) -> dict[str, ast.AST]:
    """What a module or class body defines: functions, classes, assignments, imports."""
    found: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        found[name.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                found[(alias.asname or alias.name).split(".")[0]] = node
        elif isinstance(node, (ast.If, ast.Try)):  # a name defined one way or another
            found.update(_names(node.body))
            found.update(_names(getattr(node, "orelse", [])))
    return found


def _defines(body: list[ast.stmt], attributes: list[str]) -> bool:
    for attribute in attributes:
        node = _names(body).get(attribute)
        if node is None:
            return False
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return True  # re-exported from elsewhere: what it names is that module's to define
        body = node.body if isinstance(node, ast.ClassDef) else []
    return True


def _modules(name: str) -> list[str]:
    """Python files a dotted name's first part may mean: a module or a package of that name."""
    return [
        path for path in tree_files() if path.endswith((f"/{name}.py", f"/{name}/__init__.py")) or path == f"{name}.py"
    ]


@functools.cache
def _class_index() -> dict[str, list[list[ast.stmt]]]:
    """Each top-level class of the project's Python files, by name."""
    index: dict[str, list[list[ast.stmt]]] = {}
    for path in tree_files():
        if path.endswith(".py"):
            for node in _syntax(path).body:
                if isinstance(node, ast.ClassDef):
                    index.setdefault(node.name, []).append(node.body)
    return index


def dotted_name_exists(token: str) -> bool | None:
    """Whether `a.b.c` names something defined in the tree; None when its first part is
    neither a module nor a class of the project (an AWS name, a Terraform address)."""
    parts = token.split(".")
    if parts[0] == "idemlab":  # walk the packages as Python imports them
        path = "idemlab"
        for depth, part in enumerate(parts[1:], start=1):
            if (settings.ROOT / path / part).is_dir():
                path = f"{path}/{part}"
            elif (settings.ROOT / path / f"{part}.py").exists():
                return _defines(_syntax(f"{path}/{part}.py").body, parts[depth + 1 :])
            else:
                init = f"{path}/__init__.py"
                return (settings.ROOT / init).exists() and _defines(_syntax(init).body, parts[depth:])
        return True
    if modules := _modules(parts[0]):
        submodules = [m.replace("/__init__.py", f"/{parts[1]}.py") for m in modules if m.endswith("/__init__.py")]
        if any(path_exists(submodule) for submodule in submodules):  # `lessons.checkout`: a module of a package
            return True
        return any(_defines(_syntax(module).body, parts[1:]) for module in modules)
    if (classes := _class_index().get(parts[0])) and len(parts) == 2:
        # `Deletions.run_until_failed`; an AWS error type that happens to share a class's
        # name (`Sandbox.Timedout`) is told apart by what the class defines
        return any(_defines(body, parts[1:]) for body in classes) or None
    return None


def _looks_like_a_path(token: str) -> bool:
    """A file's name, or a path whose first folder is one of the tree's: not a file type
    (`.tf`), a metric namespace (`AWS/SQS`) or an image name. An upstream project's file is
    named from its repository's root (`localstack-core/...`), whose first folder is not ours."""
    if token.startswith(".") and "/" not in token:
        return False
    if "/" not in token:
        return token.endswith(FILE_SUFFIXES)
    _files, folders = _tails()
    return token.split("/")[0] in folders or token.endswith("/")


def false_references(text: str) -> list[str]:
    """The backticked paths and dotted names of ``text`` that the tree does not have."""
    wrong = []
    for token in sorted(set(TOKEN.findall(text))):
        bare = re.sub(r"\(.*\)$", "", token)  # `settings.region()` names settings.region
        if " " in bare or "://" in bare or ":" in bare or bare.startswith(("/", "-", "$")) or not bare:
            continue
        if bare.startswith(GENERATED) or bare.endswith(".so"):
            continue
        stem, dot, attribute = bare.rpartition(".")
        if "/" in bare and dot and f".{attribute}" not in FILE_SUFFIXES and path_exists(f"{stem}.py"):
            # tests/support/deletion_scenario.copy_tables: a module's file, then a name in it
            if not _defines(_syntax(next(p for p in tree_files() if p.endswith(f"{stem}.py"))).body, [attribute]):
                wrong.append(token)
        elif "/" in bare or bare.endswith(FILE_SUFFIXES):
            if _looks_like_a_path(bare) and not path_exists(bare):
                wrong.append(token)
        elif DOTTED.fullmatch(bare) and dotted_name_exists(bare) is False:
            wrong.append(token)
    return wrong


def test_every_path_and_dotted_name_in_the_design_exists():
    assert false_references(DESIGN.read_text()) == []


def test_a_planted_false_path_or_name_is_found():
    planted = (
        "The harness lives in `idemlab/`; `idemlab/nowhere.py` holds the rest, "
        "`idemlab.functions.spec` reads the module, `tests/support/health.py` is true, "
        "`settings.no_such_setting()` is not, and `lessons.Deployment` is."
    )
    assert false_references(planted) == ["idemlab.functions.spec", "idemlab/nowhere.py", "settings.no_such_setting()"]


def test_every_harness_module_and_test_support_file_is_named_in_the_design():
    text = DESIGN.read_text()
    named = set(TOKEN.findall(text))
    words = {Path(token.rstrip("/")).name for token in named} | {token.split(".")[-1] for token in named}
    files = [
        path
        for path in tree_files()
        if re.fullmatch(r"idemlab/[^/]+(\.py|/__init__\.py)", path) or re.fullmatch(r"tests/support/[^/]+\.py", path)
    ]
    missing = []
    for path in files:
        name = Path(path).parent.name if path.endswith("/__init__.py") else Path(path).name
        if name in ("__init__.py", "__main__.py") or path == "idemlab/__init__.py":
            continue
        if name not in words and Path(name).stem not in words:
            missing.append(path)
    assert missing == [], f"docs/DESIGN.md does not name these: {missing}"
