"""`make test` runs on several xdist workers and gives each test file to one of them whole
(the scheduler in tests/conftest.py): a file's module fixtures, such as a race's rounds
or a deployed bench, must run once, not once per worker that got some of its tests."""

import pytest

RAN: list[int] = []


@pytest.mark.parametrize("n", range(8))
def test_every_test_of_a_file_runs_in_one_worker_in_order(n):
    RAN.append(n)
    assert RAN == list(range(n + 1)), f"this worker ran {RAN}: the file's other tests went elsewhere"


def test_workers_take_the_longest_scopes_first_whatever_their_test_counts(tmp_path):
    """xdist's --loadscope-reorder hands out the files with the most tests first; the
    scheduler keeps conftest's order instead: here a one-test file listed as long runs
    before an unlisted file of eight tests, and one worker runs them in that order."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    for name in ("conftest.py", "suite_timeouts.py"):
        shutil.copy(Path(__file__).with_name(name), tmp_path / name)
    ran = tmp_path / "ran.txt"
    record = f"def record(name):\n    with open({str(ran)!r}, 'a') as out:\n        out.write(name + '\\n')\n"
    (tmp_path / "test_aaa_many.py").write_text(record + "".join(f"def test_{n}():\n    record('many')\n" for n in range(8)))
    (tmp_path / "test_bench_strategy_counts.py").write_text(record + "def test_long():\n    record('long')\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "1", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert ran.read_text().split() == ["long"] + ["many"] * 8
