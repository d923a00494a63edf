"""What `deliver` runs: a handler given by module path, or a zip plus its handler name.

Either way the plugin uploads a zip, as you would to Lambda. For a module path the zip
holds the folder the module is imported from (its "code root"): the handler's own
package and the modules beside it, never virtual environments, caches or hidden folders.
Libraries are not bundled: the embedded backend's workers run on this interpreter, so
what the tests can import (boto3, Powertools) the handler can import too.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import os
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from idemlab.build import zip_bytes

BOOTSTRAP_MODULE = "idemlab_testing_bootstrap"
BOOTSTRAP_HANDLER = f"{BOOTSTRAP_MODULE}.handler"
# Lambda refuses a directly uploaded zip above 50 MB (AWS docs:
# lambda/latest/dg/gettingstarted-limits.html); refuse it here first.
MAX_ZIP_BYTES = 50 * 1024 * 1024
_SKIPPED_FOLDERS = {"__pycache__", "node_modules", "site-packages", "dist-packages", "build", "dist"}


class HandlerError(ValueError):
    """The handler to deliver to cannot be found or packaged."""


@dataclass(frozen=True)
class Handler:
    """A handler to deploy: its code as a zip, and "module.function" inside it."""

    code: bytes
    name: str

    @classmethod
    def module(cls, dotted: str, code_root: str | Path | None = None) -> "Handler":
        """The callable at `dotted` ("shop.handlers.checkout"), from its code root.

        The code root defaults to the sys.path folder the top-level module is found in.
        """
        module_name, _, function = dotted.rpartition(".")
        if not module_name or not function:
            raise HandlerError(f"handler {dotted!r} must be 'module.function', e.g. 'shop.handlers.checkout'")
        top = module_name.split(".")[0]
        if code_root is None:
            spec = importlib.util.find_spec(top)
            if spec is None:
                raise HandlerError(f"cannot find module {top!r} for handler {dotted!r}: is its folder on sys.path (pytest's rootdir)?")
            if spec.submodule_search_locations:
                code_root = Path(list(spec.submodule_search_locations)[0]).parent
            elif spec.origin and spec.origin.endswith(".py"):
                code_root = Path(spec.origin).parent
            else:
                raise HandlerError(f"module {top!r} is not plain Python source ({spec.origin}); pass a zip with Handler.zip")
        code_root = Path(code_root).resolve()
        if code_root.name in ("site-packages", "dist-packages"):
            raise HandlerError(
                f"{top!r} is an installed package ({code_root}); deliver your own code by module path, or pass a zip with Handler.zip"
            )
        return cls(_zip_folder_once(str(code_root), top), dotted)

    @classmethod
    def zip(cls, archive: str | Path | bytes, handler: str) -> "Handler":
        """A Lambda zip (a path or its bytes) and its handler, as in create_function."""
        code = archive if isinstance(archive, bytes) else Path(archive).read_bytes()
        if "." not in handler:
            raise HandlerError(f"handler {handler!r} must be 'module.function'")
        try:
            zipfile.ZipFile(io.BytesIO(code)).testzip()
        except zipfile.BadZipFile as exc:
            raise HandlerError(f"{archive if not isinstance(archive, bytes) else 'the bytes given'} is not a zip file") from exc
        return cls(code, handler)

    @classmethod
    def of(cls, handler: "Handler | str") -> "Handler":
        return handler if isinstance(handler, Handler) else cls.module(handler)

    def slug(self) -> str:
        """A function-name-safe short form of the handler name."""
        return re.sub(r"[^A-Za-z0-9-]", "-", self.name)[-30:].strip("-")

    def with_bootstrap(self) -> bytes:
        """This handler's zip plus the plugin's bootstrap module at its root."""
        buffer = io.BytesIO()
        with zipfile.ZipFile(io.BytesIO(self.code)) as source, zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as target:
            for item in source.infolist():
                if item.filename != f"{BOOTSTRAP_MODULE}.py":
                    target.writestr(item, source.read(item))
            target.writestr(f"{BOOTSTRAP_MODULE}.py", (Path(__file__).parent / "_bootstrap.py").read_text())
        return buffer.getvalue()

@functools.lru_cache(maxsize=None)
def _zip_folder_once(root: str, must_hold: str) -> bytes:
    """A session packs each code root once: its files do not change while tests run."""
    return zip_folder(Path(root), must_hold)


def zip_folder(root: Path, must_hold: str) -> bytes:
    """Zip the files under `root` (sorted, fixed timestamps: the same code, the same bytes),
    leaving out hidden folders, caches, build output and virtual environments."""
    root = root.resolve()
    if not ((root / must_hold).is_dir() or (root / f"{must_hold}.py").is_file()):
        raise HandlerError(f"code root {root} holds no module or package {must_hold!r}")
    files = {}
    for folder, subfolders, names in os.walk(root, followlinks=True):
        subfolders[:] = [name for name in subfolders if not _skipped(Path(folder, name))]
        files.update({Path(folder, name).relative_to(root).as_posix(): Path(folder, name) for name in names})
    files = {name: path for name, path in files.items() if not name.endswith((".pyc", ".pyo")) and path.is_file()}
    if sum(path.stat().st_size for path in files.values()) > MAX_ZIP_BYTES:
        raise HandlerError(f"code root {root} holds more than 50 MB; pass a zip with Handler.zip instead")
    return zip_bytes(files)


def _skipped(folder: Path) -> bool:
    return (
        folder.name.startswith(".")
        or folder.name in _SKIPPED_FOLDERS
        or folder.name.endswith(".egg-info")
        or (folder / "pyvenv.cfg").exists()  # a virtual environment
    )
