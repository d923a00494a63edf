"""Notebook 02 shows the checkouts' code by the names it defines, never by a comment's text."""

import ast

import pytest

from idemlab.lessons import checkout


def test_a_function_is_shown_whole_with_its_decorator(capsys):
    checkout.show_code("checkout_powertools.py", "charge_once")
    shown = capsys.readouterr().out
    source = (checkout.FUNCTION_DIR / "checkout_powertools.py").read_text()
    node = next(n for n in ast.parse(source).body if getattr(n, "name", None) == "charge_once")
    assert shown.startswith("@idempotent_function(")
    assert shown.rstrip().endswith(source.splitlines()[node.end_lineno - 1].strip())


def test_names_are_shown_in_the_order_asked(capsys):
    checkout.show_code("checkout_powertools.py", "config", "persistence")
    shown = capsys.readouterr().out
    assert shown.index("config = IdempotencyConfig(") < shown.index("persistence = DynamoDBPersistenceLayer(")


def test_a_name_the_file_does_not_define_is_refused_by_name():
    with pytest.raises(KeyError, match=r"checkout_handrolled.py defines no charge_twice"):
        checkout.show_code("checkout_handrolled.py", "handler", "charge_twice")
