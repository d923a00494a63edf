"""`make deploy LESSONS=...`: the choice reaches Terraform as the root's `lessons`, and a stack
keeps it for its later plans and its destroy. Needs no server: the arguments and the files."""

from __future__ import annotations

import subprocess

import pytest

from idemlab import module_spec, settings, stack


def test_lessons_are_read_from_a_list_with_commas_or_spaces():
    assert stack.parse_lessons(None) is None and stack.parse_lessons("  ") is None
    assert stack.parse_lessons("vehicles,checkout") == ["checkout", "vehicles"]
    assert stack.parse_lessons("queues keys, queues") == ["keys", "queues"]
    assert stack.parse_lessons("all") == []  # every lesson: forget an earlier choice


def test_the_chosen_lessons_reach_terraform_and_are_remembered_for_the_next_plan(tmp_path, monkeypatch):
    monkeypatch.setattr(stack, "WORKING_COPIES", tmp_path)
    chosen = stack._Stack("lessons", "embedded", ["checkout", "vehicles"])
    assert '-var=lessons=["checkout", "vehicles"]' in chosen.variables
    chosen.dir.mkdir(parents=True)
    chosen.remember_lessons()
    later = stack._Stack("lessons", "embedded")  # make plan, make destroy: no LESSONS given
    assert later.lessons == ["checkout", "vehicles"] and '-var=lessons=["checkout", "vehicles"]' in later.variables
    every = stack._Stack("lessons", "embedded", [])  # LESSONS=all
    assert not [variable for variable in every.variables if variable.startswith("-var=lessons=")]
    every.remember_lessons()
    assert stack._Stack("lessons", "embedded").lessons == []


def test_the_roots_lessons_default_to_the_modules_and_name_only_its_slugs():
    root = module_spec.blocks(settings.ROOT / "terraform" / "variables.tf", "variable")["lessons"]
    assert root.get("default") is None  # null: the module's own default, every lesson
    slugs = set(module_spec.default("lessons"))
    assert slugs == set(module_spec.local_value("lesson_builds_on")), "the default names every known slug"


@pytest.mark.parametrize("target", ["deploy", "plan", "workshop-check"])
def test_make_passes_lessons_on(target):
    shown = subprocess.run(
        ["make", "-n", target, "LESSONS=vehicles,checkout", "BACKEND=embedded", "PARTICIPANTS=2"],
        cwd=settings.ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert '--lessons "vehicles,checkout"' in shown.stdout, shown.stdout + shown.stderr


def test_the_workshops_concurrency_need_follows_the_lessons_taught():
    from idemlab import account_needs

    peaks = account_needs.lesson_peaks()
    assert account_needs.concurrency_per_participant() == max(peaks.values())
    assert account_needs.concurrency_per_participant(["checkout"]) == peaks["02_checkout"]
    assert account_needs.concurrency_per_participant(["vehicles", "queues"]) == 1  # one invocation at a time
    schedules = {need.key: need.per_participant for need in account_needs.needs({}, ["vehicles"])}["schedules"]
    assert schedules == 0, "no deletion lesson, no deletion schedules"
