"""`make test` runs on several xdist workers and gives each test file to one of them whole
(the scheduler in tests/conftest.py): a file's module fixtures, such as a race's rounds
or a deployed bench, must run once, not once per worker that got some of its tests."""

import pytest

RAN: list[int] = []


@pytest.mark.parametrize("n", range(8))
def test_every_test_of_a_file_runs_in_one_worker_in_order(n):
    RAN.append(n)
    assert RAN == list(range(n + 1)), f"this worker ran {RAN}: the file's other tests went elsewhere"
