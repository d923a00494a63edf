"""Issue 36, item 14: the counts the docs state come from the code.

How many functions and alarms the module creates is read from the Terraform (the
`functions` and `queues` defaults, the alarms in `monitoring.tf`); the module README and
`docs/aws.md` must state those numbers. A number of functions that is a past measurement
says so ("measured").
"""

from __future__ import annotations

import re

from idemlab import module_spec, settings

MODULE_README = settings.MODULE_DIR / "README.md"
AWS_DOC = settings.ROOT / "docs" / "aws.md"
ROOT_README = settings.ROOT / "README.md"
WORDS = {1: "one", 2: "two", 3: "three", 4: "four"}


def functions() -> int:
    return len(module_spec.default("functions"))


def dead_letter_queues() -> int:
    return len([key for key in module_spec.default("queues") if key.endswith("_dlq")])


def sweeper_alarms() -> int:
    """The alarms beside the one per dead-letter queue: the sweeper's (stuck requests, its errors)."""
    return len([name for name in module_spec.resources("aws_cloudwatch_metric_alarm") if name != "dlq_not_empty"])


def test_every_stated_number_of_functions_is_the_modules_or_a_dated_measurement():
    for path in (MODULE_README, AWS_DOC, ROOT_README):
        text = " ".join(path.read_text().split())
        for sentence in re.split(r"(?<=[.;])\s", text):
            for stated in re.findall(r"\b(\d+) (?:Lambda )?functions\b", sentence):
                assert int(stated) == functions() or "measured" in sentence, (
                    f"{path.name} says {stated} functions; the module has {functions()}: {sentence!r}"
                )
    assert f"| Lambda functions | {functions()} " in AWS_DOC.read_text()


def test_the_docs_count_one_alarm_per_dead_letter_queue_and_the_sweepers_two():
    assert sweeper_alarms() == 2
    total = dead_letter_queues() + sweeper_alarms()
    aws = AWS_DOC.read_text()
    assert f"| CloudWatch alarms | {total} |" in aws
    assert f"| {total} alarms |" in aws
    readme = " ".join(MODULE_README.read_text().split())
    assert f"an alarm per dead-letter queue and {WORDS[sweeper_alarms()]} on the sweeper" in readme
