"""The function zips: deterministic (a second plan stays empty), complete, and refused
cleanly when the input is wrong."""

from __future__ import annotations

import zipfile

import pytest

from idemlab import build


def test_building_twice_gives_identical_bytes_and_hashes(tmp_path):
    first = build.build_all(out_dir=tmp_path / "a")
    second = build.build_all(out_dir=tmp_path / "b")
    assert [a.scenario for a in first] == [b.scenario for b in second] == build.scenarios()
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
        sources = build.source_files(build.FUNCTIONS_DIR / artifact.scenario)
        assert set(sources) <= set(names)
        assert {"aws_lambda_powertools/__init__.py", "jmespath/__init__.py", "typing_extensions.py"} <= set(names)
        assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
        assert names == sorted(names)
        assert {info.date_time for info in infos} == {build.FIXED_TIMESTAMP}


def test_a_scenario_without_python_files_is_refused_and_nothing_is_written(tmp_path):
    """Not even the zip of a good scenario that sorts before it."""
    functions = tmp_path / "functions"
    (functions / "a_good_scenario").mkdir(parents=True)
    (functions / "a_good_scenario" / "handler.py").write_text("def handler(event, context):\n    return event\n")
    (functions / "empty_scenario").mkdir(parents=True)
    (functions / "empty_scenario" / "notes.txt").write_text("no code here")
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

    reference = {a.scenario: a.path.read_bytes() for a in build.build_all(out_dir=tmp_path / "reference")}
    shared = tmp_path / "shared"
    for _ in range(5):
        for stale in shared.glob("*.zip"):
            stale.unlink()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda _: build.build_all(out_dir=shared), range(8)))
        assert {p.stem: p.read_bytes() for p in shared.glob("*.zip")} == reference
        # write_if_changed's partial files are named .<zip>.<random>: none may remain
        assert sorted(p.name for p in shared.iterdir()) == sorted(f"{name}.zip" for name in reference)
