"""The forms of an EventBridge schedule expression, and the period of a `rate(...)` one.

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

_AT = re.compile(r"at\((\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\)")
RATE = re.compile(r"rate\(([1-9][0-9]*) (minute|minutes|hour|hours|day|days)\)")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}

_WEEKDAYS = "SUN|MON|TUE|WED|THU|FRI|SAT"
# Each cron field: its values (numbers may have leading zeros), then what it accepts
# besides values, ranges and steps: in the two day fields, `?` (the whole field), the
# last day L, the weekday nearest n nW, the last weekday dL and the nth weekday d#n.
_CRON_FIELDS = (
    (r"0*[1-5]?\d", None),  # minutes 0-59
    (r"0*(?:1?\d|2[0-3])", None),  # hours 0-23
    (r"0*(?:[1-9]|[12]\d|3[01])", r"L|LW|(?:[1-9]|[12]\d|3[01])W"),  # day of month 1-31
    (r"0*(?:[1-9]|1[0-2])|JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC", None),  # month 1-12
    (rf"0*[1-7]|{_WEEKDAYS}", rf"L|(?:[1-7]|{_WEEKDAYS})(?:L|#[1-5])"),  # day of week 1-7
    (r"0*(?:19[7-9]\d|2[01]\d\d)", None),  # year 1970-2199
)


def _cron_field(values: str, special: str | None) -> str:
    """A comma list of `*`, values and ranges, each with an optional /step above zero; a
    day field (with specials) may be `?` instead, and is captured for the `?` rule."""
    item = rf"(?:\*|(?:{values})(?:-(?:{values}))?)(?:/0*[1-9]\d*)?"
    if special is None:
        return rf"(?:{item}(?:,{item})*)"
    return rf"(\?|(?:{special}|{item})(?:,(?:{special}|{item}))*)"


_CRON = re.compile(r"cron\(" + " ".join(_cron_field(*field) for field in _CRON_FIELDS) + r"\)")


def rate_seconds(expression: str) -> int | None:
    """The period of a `rate(...)` expression, in seconds; None for any other."""
    match = RATE.fullmatch(expression or "")
    if match is None:
        return None
    value = int(match.group(1))
    unit = match.group(2).rstrip("s")
    return value * _UNIT_SECONDS[unit]


def valid_schedule_expression(expression: str) -> bool:
    """Whether Scheduler accepts the expression (the forms in this module's docstring)."""
    if match := _AT.fullmatch(expression):
        try:
            datetime(*(int(part) for part in match.groups()))
        except ValueError:
            return False
        return True
    if match := RATE.fullmatch(expression):
        return (match.group(1) == "1") == (not match.group(2).endswith("s"))
    if match := _CRON.fullmatch(expression):  # exactly one of the two day fields is `?`
        return (match.group(1) == "?") != (match.group(2) == "?")
    return False
