"""`make test` runs on several xdist workers and gives each test file to one of them whole
(the scheduler in tests/conftest.py): a file's module fixtures, such as a race's rounds
or a deployed bench, must run once, not once per worker that got some of its tests."""

import pytest

from support.scheduling import SPLIT_BY_TEST, scope_key, scope_of

RAN: list[int] = []


@pytest.mark.parametrize("n", range(8))
def test_every_test_of_a_file_runs_in_one_worker_in_order(n):
    RAN.append(n)
    assert list(range(n + 1)) == RAN, f"this worker ran {RAN}: the file's other tests went elsewhere"


def run_copy_of_the_suite(tmp_path, durations: dict | None) -> tuple[list[str], dict]:
    """Run two test files in a copy of this suite's conftest and support package, on one
    xdist worker: a one-test file and a file of eight. What ran, in order, and the
    durations file the run left."""
    import json
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    here = Path(__file__).parents[1]  # tests/, where the root conftest.py and support/ are
    shutil.copy(here / "conftest.py", tmp_path / "conftest.py")
    shutil.copytree(here / "support", tmp_path / "support", ignore=shutil.ignore_patterns("__pycache__"))
    durations_file = tmp_path / ".lab" / "test-durations.json"
    if durations is not None:
        durations_file.parent.mkdir()
        durations_file.write_text(json.dumps(durations))
    ran = tmp_path / "ran.txt"
    record = f"def record(name):\n    with open({str(ran)!r}, 'a') as out:\n        out.write(name + '\\n')\n"
    many = "".join(f"def test_{n}():\n    record('many')\n" for n in range(8))
    (tmp_path / "test_aaa_many.py").write_text(record + many)
    (tmp_path / "test_zzz_one.py").write_text(record + "def test_one():\n    record('one')\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "1", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return ran.read_text().split(), json.loads(durations_file.read_text())


def test_without_measured_durations_the_scopes_run_in_collection_order(tmp_path):
    ran, _ = run_copy_of_the_suite(tmp_path, durations=None)
    assert ran == ["many"] * 8 + ["one"]


def test_workers_take_the_longest_measured_scopes_first_whatever_their_test_counts(tmp_path):
    """xdist's --loadscope-reorder hands out the files with the most tests first; the
    scheduler orders by what earlier runs measured instead: here a one-test file measured
    as long runs before the file of eight tests, collected first."""
    ran, _ = run_copy_of_the_suite(tmp_path, durations={"test_zzz_one.py": 90.0, "test_aaa_many.py": 1.5})
    assert ran == ["one"] + ["many"] * 8


def test_a_run_records_each_scopes_duration_and_keeps_what_it_did_not_run(tmp_path):
    _, durations = run_copy_of_the_suite(tmp_path, durations={"test_gone.py": 12.0})
    assert set(durations) == {"test_aaa_many.py", "test_zzz_one.py", "test_gone.py"}
    assert durations["test_gone.py"] == 12.0
    assert all(isinstance(seconds, float) and seconds >= 0 for seconds in durations.values()), durations


@pytest.mark.parametrize("name", SPLIT_BY_TEST)
def test_a_split_file_is_named_by_its_path_so_a_namesake_in_another_folder_stays_whole(name):
    """Folders repeat file names (tests/lessons/<slug>/test_stack.py): only the listed file's
    tests are scopes of their own, not those of every file with its name."""
    nodeid = f"tests/{name}::test_one[a]"
    namesake = f"tests/elsewhere/{name}::test_one[a]"
    assert scope_of(nodeid) == nodeid
    assert scope_of(namesake) == f"tests/elsewhere/{name}"
    assert scope_key(scope_of(namesake)) == f"elsewhere/{name}"
