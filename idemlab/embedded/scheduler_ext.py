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

import functools
import re
from datetime import datetime

from idemlab.embedded.patching import replace_once

_AT = re.compile(r"at\((\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\)")
_RATE = re.compile(r"rate\(([1-9][0-9]*) (minute|minutes|hour|hours|day|days)\)")
_CRON = re.compile(r"cron\(([^()]*)\)")

_MONTHS = {name: n for n, name in enumerate("JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split(), start=1)}
_WEEKDAYS = {name: n for n, name in enumerate("SUN MON TUE WED THU FRI SAT".split(), start=1)}


def _value(text: str, low: int, high: int, names: dict[str, int]) -> bool:
    if text in names:
        return True
    return text.isdigit() and low <= int(text) <= high


def _field(text: str, low: int, high: int, names: dict[str, int] | None = None, special=None) -> bool:
    """A cron field: a comma list of `*`, values, ranges, each with an optional /step."""
    names = names or {}
    for item in text.split(","):
        if special is not None and special(item):
            continue
        base, slash, step = item.partition("/")
        if slash and not (step.isdigit() and int(step) > 0):
            return False
        if base == "*":
            continue
        first, dash, last = base.partition("-")
        if not _value(first, low, high, names) or (dash and not _value(last, low, high, names)):
            return False
    return True


def _day_of_month_special(item: str) -> bool:
    return item in ("L", "LW") or bool(re.fullmatch(r"([1-9]|[12][0-9]|3[01])W", item))


def _day_of_week_special(item: str) -> bool:
    day = r"([1-7]|SUN|MON|TUE|WED|THU|FRI|SAT)"
    return item == "L" or bool(re.fullmatch(rf"{day}L|{day}#[1-5]", item))


def _cron(fields: str) -> bool:
    parts = fields.split(" ")
    if len(parts) != 6:
        return False
    minutes, hours, day_of_month, month, day_of_week, year = parts
    if (day_of_month == "?") == (day_of_week == "?"):
        return False  # exactly one of the two day fields is left open
    return (
        _field(minutes, 0, 59)
        and _field(hours, 0, 23)
        and (day_of_month == "?" or _field(day_of_month, 1, 31, special=_day_of_month_special))
        and _field(month, 1, 12, _MONTHS)
        and (day_of_week == "?" or _field(day_of_week, 1, 7, _WEEKDAYS, special=_day_of_week_special))
        and _field(year, 1970, 2199)
    )


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


def _validating(method):
    @functools.wraps(method)
    def validated(self, *args, **kwargs):
        from moto.scheduler.exceptions import ValidationException

        expression = kwargs.get("schedule_expression")
        if expression is not None and not valid_schedule_expression(expression):
            raise ValidationException(f"Invalid Schedule Expression {expression}.")
        return method(self, *args, **kwargs)

    return validated


def install() -> None:
    """Patch moto's Scheduler in this process; calling it again does nothing."""
    from moto.scheduler.exceptions import ScheduleExists
    from moto.scheduler.models import EventBridgeSchedulerBackend

    ScheduleExists.code = 409  # ConflictException, as AWS answers a duplicate name
    for action in ("create_schedule", "update_schedule"):
        replace_once(EventBridgeSchedulerBackend, action, _validating(getattr(EventBridgeSchedulerBackend, action)))
