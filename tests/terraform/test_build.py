"""The function zips: deterministic (a second plan stays empty), complete, and refused
cleanly when the input is wrong."""

from __future__ import annotations

import json
import shutil
import zipfile

import pytest

from idemlab import build


def test_building_twice_gives_identical_bytes_and_hashes(tmp_path):
    first = build.build_all(out_dir=tmp_path / "a")
    second = build.build_all(out_dir=tmp_path / "b")
    assert [a.lesson for a in first] == [b.lesson for b in second] == build.lessons()
    for a, b in zip(first, second, strict=False):
        assert a.path.read_bytes() == b.path.read_bytes()
        assert a.sha256_base64 == b.sha256_base64


def test_rebuilding_unchanged_sources_leaves_the_zip_untouched(tmp_path):
    [artifact, *_] = build.build_all(out_dir=tmp_path)
    before = artifact.path.stat().st_mtime_ns
    [again, *_] = build.build_all(out_dir=tmp_path)
    assert not again.changed and again.path.stat().st_mtime_ns == before


def test_a_zip_holds_the_handlers_at_its_root_and_powertools_beside_them(tmp_path):
    for artifact in build.build_all(out_dir=tmp_path):
        with zipfile.ZipFile(artifact.path) as archive:
            names = archive.namelist()
            infos = archive.infolist()
        sources = build.source_files(build.FUNCTIONS_DIR / artifact.lesson)
        assert set(sources) <= set(names)
        assert {"aws_lambda_powertools/__init__.py", "jmespath/__init__.py", "typing_extensions.py"} <= set(names)
        assert {"shared/__init__.py", "shared/faults.py", "shared/settings.py", "shared/clients.py"} <= set(names)
        assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
        assert names == sorted(names)
        assert {info.date_time for info in infos} == {build.FIXED_TIMESTAMP}


def test_a_lesson_without_python_files_is_refused_and_nothing_is_written(tmp_path):
    """Not even the zip of a good lesson that sorts before it."""
    functions = tmp_path / "functions"
    (functions / "a_good_lesson").mkdir(parents=True)
    (functions / "a_good_lesson" / "handler.py").write_text("def handler(event, context):\n    return event\n")
    (functions / "empty_lesson").mkdir(parents=True)
    (functions / "empty_lesson" / "notes.txt").write_text("no code here")
    out = tmp_path / "out"
    with pytest.raises(build.BuildError, match=r"no .py files"):
        build.build_all(functions_dir=functions, out_dir=out)
    assert not out.exists()


def test_a_missing_functions_folder_is_a_clear_error(tmp_path):
    with pytest.raises(build.BuildError, match="no functions folder"):
        build.build_all(functions_dir=tmp_path / "absent", out_dir=tmp_path / "out")
    assert build.main(["--functions", str(tmp_path / "absent"), "--out", str(tmp_path / "out")]) == 1


def test_a_file_shadowing_a_bundled_package_is_refused(tmp_path):
    functions = tmp_path / "functions"
    (functions / "clash").mkdir(parents=True)
    (functions / "clash" / "typing_extensions.py").write_text("x = 1\n")
    with pytest.raises(build.BuildError, match="shadow"):
        build.build_all(functions_dir=functions, out_dir=tmp_path / "out")


def test_concurrent_builds_into_one_folder_always_leave_whole_zips(tmp_path):
    """Eight builders at once (as parallel deploys and tests do), five rounds: every zip
    ends up byte-identical to a lone build, and no temporary file is left behind."""
    from concurrent.futures import ThreadPoolExecutor

    reference = {a.lesson: a.path.read_bytes() for a in build.build_all(out_dir=tmp_path / "reference")}
    shared = tmp_path / "shared"
    for _ in range(5):
        for stale in shared.glob("*.zip"):
            stale.unlink()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda _: build.build_all(out_dir=shared), range(8)))
        assert {p.stem: p.read_bytes() for p in shared.glob("*.zip")} == reference
        # write_if_changed's partial files are named .<zip>.<random>: none may remain
        expected = [build.FINGERPRINT_FILE, *(f"{name}.zip" for name in reference)]
        assert sorted(p.name for p in shared.iterdir()) == sorted(expected)


def _one_lesson(tmp_path):
    functions = tmp_path / "functions"
    (functions / "demo").mkdir(parents=True)
    handler = functions / "demo" / "handler.py"
    handler.write_text("def handler(event, context):\n    return 1\n")
    return functions, handler


def _refuse_to_pack(files):
    raise AssertionError(f"packed again: {len(files)} files")


def test_unchanged_inputs_are_not_packed_again(tmp_path, monkeypatch):
    """A second deploy with the same sources reuses the zips: nothing is read into a new zip."""
    functions, _ = _one_lesson(tmp_path)
    [first] = build.build_all(functions_dir=functions, out_dir=tmp_path / "out")
    monkeypatch.setattr(build, "zip_bytes", _refuse_to_pack)
    [again] = build.build_all(functions_dir=functions, out_dir=tmp_path / "out")
    assert (again.changed, again.sha256_base64, again.path) == (False, first.sha256_base64, first.path)


def test_an_edited_source_is_packed_again(tmp_path):
    functions, handler = _one_lesson(tmp_path)
    [first] = build.build_all(functions_dir=functions, out_dir=tmp_path / "out")
    handler.write_text("def handler(event, context):\n    return 2\n")  # same size, new content and time
    [again] = build.build_all(functions_dir=functions, out_dir=tmp_path / "out")
    assert again.changed and again.sha256_base64 != first.sha256_base64
    with zipfile.ZipFile(again.path) as archive:
        assert archive.read("handler.py") == handler.read_bytes()


def test_a_new_source_file_is_packed_again(tmp_path):
    functions, handler = _one_lesson(tmp_path)
    build.build_all(functions_dir=functions, out_dir=tmp_path / "out")
    (handler.parent / "helper.py").write_text("VALUE = 1\n")
    [again] = build.build_all(functions_dir=functions, out_dir=tmp_path / "out")
    with zipfile.ZipFile(again.path) as archive:
        assert "helper.py" in archive.namelist()


def test_a_zip_changed_since_its_build_is_packed_again(tmp_path):
    """The fingerprint vouches for the zips it recorded, not for whatever is in the folder now."""
    functions, _ = _one_lesson(tmp_path)
    [first] = build.build_all(functions_dir=functions, out_dir=tmp_path / "out")
    packed = first.path.read_bytes()
    first.path.write_bytes(b"not a zip")
    [again] = build.build_all(functions_dir=functions, out_dir=tmp_path / "out")
    assert again.changed and again.path.read_bytes() == packed


def _spied_stack(prefix, monkeypatch):
    """A working copy on the suite's backend, and the Terraform commands it runs."""
    from idemlab import stack

    ran = []
    original = stack._Stack.terraform

    def recorded(self, *args, **kwargs):
        ran.append(args[0])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(stack._Stack, "terraform", recorded)
    return stack._Stack(prefix, "embedded"), ran


def test_a_second_prepare_runs_neither_init_nor_tflocal_and_keeps_the_override(backend, monkeypatch):
    """Unchanged configuration: init's result and tflocal's override file are reused; the
    override still points every service at this backend."""
    from idemlab import stack

    prefix = "tfpr"
    prepared, ran = _spied_stack(prefix, monkeypatch)
    try:
        with stack._locked(prepared.name):
            prepared.prepare(rebuild=False)
            assert ran == ["init"]
            override = (prepared.dir / stack.OVERRIDE_FILE).read_text()
            assert backend in override  # the endpoint tflocal wrote: this backend's URL

            def no_tflocal(name):
                assert name != "tflocal", "tflocal ran again for an unchanged configuration"
                return shutil.which(name)

            monkeypatch.setattr(stack, "_executable", no_tflocal)
            prepared.prepare(rebuild=False)
            assert ran == ["init"]
            assert (prepared.dir / stack.OVERRIDE_FILE).read_text() == override
    finally:
        stack.forget(prefix)


def test_a_changed_configuration_runs_init_again(backend, monkeypatch):
    """A new or edited .tf file (a module call, a provider requirement) may need what init installs."""
    from idemlab import stack

    prefix = "tfpc"
    prepared, ran = _spied_stack(prefix, monkeypatch)
    try:
        with stack._locked(prepared.name):
            prepared.prepare(rebuild=False)
            monkeypatch.setattr(stack, "TERRAFORM_SOURCE", _copy_with_extra_file(prepared.dir))
            prepared.prepare(rebuild=False)
        assert ran == ["init", "init"]
        assert (prepared.dir / "extra.tf").exists()
    finally:
        stack.forget(prefix)


def _copy_with_extra_file(working_copy):
    from idemlab import stack

    source = working_copy.parent / f"{working_copy.name}-source"
    shutil.rmtree(source, ignore_errors=True)
    shutil.copytree(stack.TERRAFORM_SOURCE, source, ignore=shutil.ignore_patterns(*stack.COPY_IGNORED))
    (source / "extra.tf").write_text('locals {\n  extra = "a change init must see"\n}\n')
    return source


def test_a_deploy_plans_first_only_where_state_records_resources(tmp_path):
    """A first deploy applies in one Terraform run; any state with resources (or one that
    cannot be read) gets the plan first, so an unchanged redeploy stays a plan."""
    from idemlab.stack import _holds_resources

    state = tmp_path / "terraform.tfstate"
    assert not _holds_resources(state)  # no state yet
    state.write_text(json.dumps({"version": 4, "resources": []}))
    assert not _holds_resources(state)  # a destroyed stack's state
    state.write_text(json.dumps({"version": 4, "resources": [{"type": "aws_sqs_queue", "name": "work"}]}))
    assert _holds_resources(state)
    state.write_text("{half a file")
    assert _holds_resources(state)
