"""A lesson cell shows a few lines of a file, not the file: `lessons.excerpt`."""

import textwrap

import pytest

from idemlab import lessons

MODULE = textwrap.dedent(
    """\
    import functools

    SETTING = dict(
        a=1,
    )

    @functools.cache
    def short(x):
        return x + 1


    class Worker:
        def long(self, n):
            total = 0
            for i in range(n):
                total += i
            # the line that matters
            if total > 10:
                return "big"
            return "small"
    """
)


@pytest.fixture
def module(tmp_path):
    path = tmp_path / "example.py"
    path.write_text(MODULE)
    return str(path)


def test_a_whole_definition_with_its_decorator_and_where_it_is(module):
    shown = lessons.excerpt(module, "short")
    assert shown.splitlines() == [
        f"# {module}, lines 7-9 (short)",
        "@functools.cache",
        "def short(x):",
        "    return x + 1",
    ]


def test_an_assigned_name_is_a_definition_too(module):
    assert lessons.excerpt(module, "SETTING").splitlines()[1:] == ["SETTING = dict(", "    a=1,", ")"]


def test_a_method_cut_to_the_lines_between_two_markers(module):
    shown = lessons.excerpt(module, "long", start="# the line", end='return "big"')
    assert shown.splitlines() == [
        f"# {module}, lines 17-19 (long)",
        "        # the line that matters",
        "        if total > 10:",
        '            return "big"',
    ]


def test_more_lines_than_the_limit_is_refused_with_the_count(module):
    with pytest.raises(ValueError, match=r"lines 13-20 are 8 lines, more than 5"):
        lessons.excerpt(module, "long", limit=5)


def test_an_unknown_name_or_marker_is_named(module):
    with pytest.raises(LookupError, match="defines no missing"):
        lessons.excerpt(module, "missing")
    with pytest.raises(LookupError, match="contains 'nowhere'"):
        lessons.excerpt(module, "long", start="nowhere")


def test_the_default_limit_is_fifteen_lines():
    assert lessons.EXCERPT_LINES == 15
