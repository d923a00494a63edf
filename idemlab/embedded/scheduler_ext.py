"""EventBridge Scheduler that refuses what AWS refuses.

moto stores any schedule expression, and answers a duplicate schedule name with HTTP
400. AWS answers:

- a malformed expression, on CreateSchedule and UpdateSchedule, with 400
  ValidationException "Invalid Schedule Expression <expression>." (the wording AWS
  answered in the recordings of LocalStack's tests/aws/services/scheduler/test_scheduler.py,
  v4.14.0: `at(2021-12-31)`, `at(2021-12-31T23:59:59Z)`, `rate(10 seconds)` and others);
- a duplicate name with 409 ConflictException (Scheduler API reference, CreateSchedule).

The accepted forms are those of the Scheduler user guide, "Schedule types":
`at(yyyy-mm-ddThh:mm:ss)` (no zone suffix: the zone is ScheduleExpressionTimezone),
`rate(value unit)` with a positive whole value and a unit of minute(s), hour(s) or day(s),
singular exactly when the value is 1 (stated on the EventBridge "Rate expressions"
page), and `cron(...)` with six fields (minutes hours day-of-month month day-of-week
year) where exactly one of day-of-month and day-of-week is `?`.
"""

from __future__ import annotations

import re
from datetime import datetime

from idemlab.embedded.patching import wrap

_AT = re.compile(r"at\((\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\)")
_RATE = re.compile(r"rate\(([1-9][0-9]*) (minute|minutes|hour|hours|day|days)\)")
_CRON = re.compile(r"cron\(([^()]*)\)")

_MONTHS = {name: n for n, name in enumerate("JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split(), start=1)}
_WEEKDAYS = {name: n for n, name in enumerate("SUN MON TUE WED THU FRI SAT".split(), start=1)}
_DAY = r"([1-7]|SUN|MON|TUE|WED|THU|FRI|SAT)"
# Each cron field: its range, its names, and what it accepts besides values, ranges and
# steps (in the two day fields: the last day L, the weekday nearest n nW, the nth weekday d#n).
_CRON_FIELDS = (
    (0, 59, {}, None),  # minutes
    (0, 23, {}, None),  # hours
    (1, 31, {}, re.compile(r"L|LW|([1-9]|[12][0-9]|3[01])W")),  # day of month
    (1, 12, _MONTHS, None),  # month
    (1, 7, _WEEKDAYS, re.compile(rf"L|{_DAY}L|{_DAY}#[1-5]")),  # day of week
    (1970, 2199, {}, None),  # year
)


def _field(text: str, low: int, high: int, names: dict[str, int], special: re.Pattern | None) -> bool:
    """A cron field: a comma list of `*`, values, ranges, each with an optional /step."""
    if text == "?":  # only a day field may be left open
        return special is not None

    def value(item: str) -> bool:
        return item in names or (item.isdigit() and low <= int(item) <= high)

    for item in text.split(","):
        if special is not None and special.fullmatch(item):
            continue
        base, slash, step = item.partition("/")
        first, dash, last = base.partition("-")
        if slash and not (step.isdigit() and int(step) > 0):
            return False
        if base != "*" and not (value(first) and (not dash or value(last))):
            return False
    return True


def _cron(fields: str) -> bool:
    parts = fields.split(" ")
    if len(parts) != 6 or (parts[2] == "?") == (parts[4] == "?"):
        return False  # six fields, and exactly one of the two day fields is left open
    return all(_field(part, *spec) for part, spec in zip(parts, _CRON_FIELDS))


def valid_schedule_expression(expression: str) -> bool:
    if match := _AT.fullmatch(expression):
        try:
            datetime(*(int(part) for part in match.groups()))
        except ValueError:
            return False
        return True
    if match := _RATE.fullmatch(expression):
        return (match.group(1) == "1") == (not match.group(2).endswith("s"))
    if match := _CRON.fullmatch(expression):
        return _cron(match.group(1))
    return False


def _validated(original, self, *args, **kwargs):
    from moto.scheduler.exceptions import ValidationException

    expression = kwargs.get("schedule_expression")
    if expression is not None and not valid_schedule_expression(expression):
        raise ValidationException(f"Invalid Schedule Expression {expression}.")
    return original(self, *args, **kwargs)


def install() -> None:
    """Patch moto's Scheduler in this process; calling it again does nothing."""
    from moto.scheduler.exceptions import ScheduleExists
    from moto.scheduler.models import EventBridgeSchedulerBackend

    ScheduleExists.code = 409  # ConflictException, as AWS answers a duplicate name
    for action in ("create_schedule", "update_schedule"):
        wrap(EventBridgeSchedulerBackend, action)(_validated)
