"""`Lab.explore`: every crash point and every interleaving of two copies, one schedule at a
time, instead of random rounds.

The handler runs as `deliver` runs it (zipped, in Lambda worker processes on the embedded
backend), deployed with the bootstrap's explore mode on: after each step (an AWS call, or
a function the test names as an effect) and as it starts, a copy reports where it is to
the `Explorer` in this process over a loopback connection, and waits for its answer. The
explorer answers from a schedule, so which copy runs when is decided here, not by the
machine's timing:

- ``twice``: one delivery, then a second after it answered.
- ``crash-<how>-<p>``: the first delivery dies at point p (the process exits, or hangs
  until the function's timeout stops it), then a synchronous retry; if that retry failed too
  (an error, or its SQS record listed in batchItemFailures) or the effect is still missing,
  a late retry (copy C) once the crashed copy's time is up, when Lambda's asynchronous retry
  or an SQS message back after its visibility timeout would come: an event source delivers
  until a delivery succeeds, and a caller told "in progress" comes back.
- ``pair-<i>-<j>``: copy A stops at point i, copy B runs to its point j, A finishes, then B.
- ``zombie-<i>``: copy A stops at point i, copy B runs to its end, then A goes on, as a
  copy does that a timeout or an expired lease did not stop.

Point 0 is the handler's start; point k is right after its k-th step, which is also right
before the next one. A schedule id names one schedule; `explore(..., schedule=id)` reruns it.

An interleaving is an order of steps, not a duration: while one copy waits for the other
(which may first need a cold start), the wait is the explorer's, not the handler's. So the
``pair`` and ``zombie`` schedules run in a second deployment of the handler whose timeout is
Lambda's largest, and no copy is stopped by its timeout in the middle of its interleaving
however busy the machine (a handler that reads its remaining time sees that timeout there).
The function's own timeout decides where it should: the timeout crashes and the late retry.
"""

from __future__ import annotations

import json
import re
import socketserver
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from idemlab.testing import _bootstrap
from idemlab.testing.handlers import HOWS, Handler
from idemlab.testing.report import CopyResult, DuplicateEffectError

# A copy held at a point waits at most this long for the explorer (which then has failed).
HOLD_SECONDS = 15 * 60
# The interleaving copies' function timeout: Lambda's largest (AWS docs:
# lambda/latest/dg/gettingstarted-limits.html), so only the explorer ends their waits.
INTERLEAVING_TIMEOUT_SECONDS = 15 * 60
# How long the explorer waits for a copy to reach the point a schedule names: a cold start
# on a loaded machine, plus the handler's own calls; the copy's invoke ending stops it sooner.
REACH_SECONDS = 120
SCHEDULE_ID = re.compile(r"^(twice|crash-(exit|timeout)-(\d+)|pair-(\d+)-(\d+)|zombie-(\d+))$")
COPY_NAMES = "ABC"  # C: a crashed schedule's late retry
# Timeout crashes run side by side, each holding one execution environment at a time: well
# under the backend's 40 concurrent invocations (LAMBDA_LIMITS_CONCURRENT_EXECUTIONS).
MAX_SIDE_BY_SIDE = 24


class LostEffectError(AssertionError):
    """An explored schedule ended with the effect never done, though a delivery answered success."""

    def __init__(self, report: ExplorationReport):
        super().__init__(report.message())
        self.report = report


class ScheduleError(ValueError):
    """A schedule id that names no schedule, or a point the handler never reached."""


LostEffectError.__module__ = ScheduleError.__module__ = "idemlab.testing"


@dataclass(frozen=True)
class Schedule:
    """One way the copies of an event can run, named by its id."""

    id: str
    crash: str | None = None  # "exit" or "timeout": the first delivery dies at `first_stop`
    first_stop: int | None = None  # copy A's point: where it dies or waits
    second_stop: int | None = None  # copy B's point, while A waits (None: B runs to its end)
    together: bool = False  # B runs while A waits at first_stop

    @classmethod
    def parse(cls, schedule_id: str) -> Schedule:
        found = SCHEDULE_ID.match(schedule_id or "")
        if not found:
            raise ScheduleError(
                f"{schedule_id!r} is not a schedule id: twice, crash-exit-<p>, crash-timeout-<p>, "
                "pair-<i>-<j> or zombie-<i>"
            )
        _, how, crash_point, i, j, zombie = found.groups()
        if how:
            return cls(schedule_id, crash=how, first_stop=int(crash_point))
        if i is not None:
            return cls(schedule_id, first_stop=int(i), second_stop=int(j), together=True)
        if zombie is not None:
            return cls(schedule_id, first_stop=int(zombie), together=True)
        return cls(schedule_id)

    def describe(self) -> str:
        if self.crash:
            return (
                f"the first delivery {HOWS[self.crash][1]} at point {self.first_stop}, then a synchronous retry "
                "(and, had it failed too or the effect been missing, a late retry once the first copy's time was up)"
            )
        if not self.together:
            return "one delivery, then a second after it answered"
        if self.second_stop is None:
            return f"copy A waits at point {self.first_stop}, copy B runs to its end, then A goes on (a zombie)"
        return f"copy A waits at point {self.first_stop}, copy B runs to point {self.second_stop}, A finishes, then B"


def schedules(steps: int) -> list[Schedule]:
    """Every schedule for a handler of `steps` steps, smallest first: a plain retry, crashes
    by point (exits, then timeouts), then interleavings by how far the copies got."""
    ids = ["twice"]
    ids += [f"crash-{how}-{p}" for how in HOWS for p in range(steps + 1)]
    # B stopped at its point 0 has done nothing, and A waiting at its last point has done
    # everything: both are `twice`. The zombie of point 0 is `twice` too.
    pairs = [(i, j) for i in range(steps) for j in range(1, steps)] + [(i, None) for i in range(1, steps)]
    pairs.sort(key=lambda pair: (pair[0] + (steps if pair[1] is None else pair[1]), pair[0]))
    ids += [f"pair-{i}-{j}" if j is not None else f"zombie-{i}" for i, j in pairs]
    return [Schedule.parse(schedule_id) for schedule_id in ids]


@dataclass
class Visit:
    """A copy at a point: the step it just made (None at its start) and what the answer said."""

    order: int  # across both copies: the timeline's row order
    copy: str
    point: int
    step: dict | None
    then: str = "go on"


@dataclass
class CopyState:
    """One copy of the event, as the explorer sees it."""

    name: str
    stop: int | None = None  # the point it waits at (or dies at, with `crash`)
    crash: str | None = None
    point: int = -1  # the last point it reported
    began: float | None = None  # when it reported its start (time.time())
    released: bool = False
    answered: bool = False
    result: CopyResult | None = None


@dataclass
class Run:
    """One schedule's copies of one event, and what they did, in order."""

    schedule: Schedule
    digest: str
    copies: list[CopyState] = field(default_factory=list)
    visits: list[Visit] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)
    arrived: int = 0
    counts: dict[str, int] | int | None = None
    seconds: float = 0.0  # from the first delivery to the effect counted
    number: int = 0  # the schedule's place in the plan, make_event's argument
    event: object = None
    payload: bytes = b""

    def wait_for(self, condition: Callable[[], bool], what: str) -> None:
        with self.changed:
            if not self.changed.wait_for(condition, timeout=REACH_SECONDS):
                raise TimeoutError(f"schedule {self.schedule.id}: still waiting for {what} after {REACH_SECONDS} s")

    def arrive(self) -> CopyState:
        with self.changed:
            copy = self.copies[self.arrived]
            self.arrived += 1
            return copy

    def at(self, copy: CopyState, point: int, step: dict | None) -> str:
        """What `copy` does at `point`: go on, die ("exit"), hang, or wait for its release first."""
        with self.changed:
            copy.point = point
            if point == 0:
                copy.began = time.time()
            visit = Visit(len(self.visits), copy.name, point, step)
            self.visits.append(visit)
            self.changed.notify_all()
            if copy.stop == point and copy.crash:
                visit.then = "CRASHED: " + ("the process exits" if copy.crash == "exit" else "hangs past its timeout")
                return "exit" if copy.crash == "exit" else "hang"
            if copy.stop == point:
                visit.then = "waits"
                self.changed.wait_for(lambda: copy.released, timeout=HOLD_SECONDS)
        return "go"

    # -- what a timeline shows

    def timeline(self) -> list[str]:
        lines = [f"  #   copy  point  {'step':<61} {'saw':<22} then"]
        for visit in self.visits:
            if visit.step is None:
                step, saw = "(handler starts)", ""
            else:
                step = _step_text(visit.step)
                saw = visit.step.get("saw", "")
            lines.append(
                f"  {visit.order:<3} {visit.copy:<5} {visit.point:<6} {step[:60]:<61} {saw[:22]:<22} {visit.then}"
            )
        for copy in self.copies:
            if copy.result is None:
                continue
            answer = copy.result.outcome(None)
            if copy.crash and copy.result.error_type in (HOWS[copy.crash][0], "Runtime.ExitError"):
                answer = f"CRASHED as scheduled ({copy.result.error_type})"
            elif not copy.result.ok:  # the handler's own error: its message, not a traceback
                answer = f"failed: {copy.result.error_type}: {copy.result.error.get('errorMessage', '')}"[:100]
            lines.append(f"  copy {copy.name} answered: {answer}")
        return lines


@dataclass
class ExplorationReport:
    """What an exploration ran and found: the step map, each schedule's counts, the time taken."""

    handler: str
    steps: list[dict] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    seconds: float = 0.0
    planned: int = 0
    bound: str = ""
    failure: Run | None = None
    verdict: str = ""  # DUPLICATE or LOST, for the failing run

    @property
    def passed(self) -> bool:
        return self.failure is None

    def step_map(self) -> list[str]:
        lines = [f"Steps of {self.handler} (point k is right after step k; point 0 is the handler's start):"]
        for number, step in enumerate(self.steps, start=1):
            lines.append(f"  {number:>2}. {_step_text(step)}  (saw: {step.get('saw')})")
        return lines

    def message(self) -> str:
        lines = []
        if self.failure is not None:
            run = self.failure
            lines.append(
                f"{self.handler}: the effect was not exactly once: {self.verdict} (counted {run.counts}) "
                f"in schedule {run.schedule.id}: {run.schedule.describe()}."
            )
            lines.append(f"Rerun exactly this schedule with explore(..., schedule={run.schedule.id!r}).")
            lines += ["Timeline:", *run.timeline()]
        else:
            lines.append(f"{self.handler}: the effect was exactly once in every schedule.")
        lines += self.step_map()
        lines.append(f"{len(self.runs)} of {self.planned} schedules ran in {self.seconds:.1f} s; {self.bound}")
        return "\n".join(lines)


class _Connection(socketserver.StreamRequestHandler):
    """One copy's invocation: its reports in, the explorer's answers out."""

    def handle(self):
        explorer: Explorer = self.server.explorer
        hello = json.loads(self.rfile.readline() or b"null")
        if not hello:
            return
        run, copy = explorer.arrive(hello["event"])
        answer = run.at(copy, 0, None) if copy else "go"
        # Past its start, the copy waits for an answer only at its stop; elsewhere it just reports.
        stop = copy.stop if copy is not None and copy.stop else None
        self._answer(answer, stop)
        if answer != "go":
            return
        for line in self.rfile:
            message = json.loads(line)
            answer = run.at(copy, message["point"], message.get("step")) if copy else "go"
            if message["point"] == stop:
                self._answer(answer, None)
                if answer != "go":
                    return

    def _answer(self, answer: str, stop: int | None) -> None:
        self.wfile.write(json.dumps({"do": answer, "stop": stop}).encode() + b"\n")
        self.wfile.flush()


class Explorer(socketserver.ThreadingTCPServer):
    """The loopback server the copies report to, and the runs it answers for, by event."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Connection)
        self.explorer = self
        self.runs: dict[str, Run] = {}
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.serve_forever, name="idemlab-explorer", daemon=True)
        self.thread.start()

    @property
    def address(self) -> list:
        return list(self.server_address[:2])

    def arrive(self, digest: str) -> tuple[Run | None, CopyState | None]:
        with self.lock:
            run = self.runs.get(digest)
        if run is None or run.arrived >= len(run.copies):
            return run, None  # not an event of a schedule (a ping): it goes on freely
        return run, run.arrive()

    def begin(self, run: Run) -> None:
        with self.lock:
            self.runs[run.digest] = run

    def close(self) -> None:
        self.shutdown()
        self.server_close()


def explore(
    lab,
    handler: Handler | str,
    make_event: Callable[[int], object],
    count_effect: Callable[[object], int | Mapping[str, int]],
    effects: tuple[str, ...] = (),
    schedule: str | None = None,
    timeout: int = 10,
    environment: dict | None = None,
) -> ExplorationReport:
    """Run the handler under every schedule (or the one named) and count the effect after each."""
    __tracebackhide__ = True
    handler = Handler.of(handler)
    started = time.perf_counter()
    report = ExplorationReport(handler.name)
    # One explorer per test: each exploration of a handler reuses its function's warm environments.
    explorer = lab.explorer()
    variables = {
        **lab.environment,
        **(environment or {}),
        _bootstrap.EXPLORE_VARIABLE: json.dumps({"address": explorer.address, "effects": list(effects)}),
    }
    function = lab.backend.function(handler, variables, timeout, None)
    lab._check_loads(function, handler)
    interleaving = lab.backend.function(handler, variables, INTERLEAVING_TIMEOUT_SECONDS, None)
    runner = _Runner(lab, explorer, (function, interleaving), handler, make_event, count_effect, timeout)
    if schedule is not None:
        plan = [Schedule.parse(schedule)]
        report.bound = "one schedule, named"
        runs = [runner.run(plan[0], 0, strict=True)]
    else:
        mapped = runner.run(Schedule("map"), 0)
        report.steps = [visit.step for visit in mapped.visits if visit.step is not None]
        if mapped.counts is None or _verdict(mapped) is not None:
            report.runs, report.failure, report.verdict = [mapped], mapped, _verdict(mapped) or "FAILED"
            raise DuplicateEffectError(report)
        plan = schedules(len(report.steps))
        n = len(report.steps)
        crashes = sum(1 for s in plan if s.crash)
        pairs = len(plan) - 1 - crashes
        interleavings = (
            f"{pairs} interleavings of two copies (copy A waiting at each point before its last step, "
            f"copy B run to each of its points 1 to {n - 1} or to its end)"
        )
        if not pairs:
            interleavings = "no interleaving (one step leaves no point inside the handler for another copy)"
        report.bound = f"bound: {crashes} crashes (at points 0 to {n}, each way, then a retry) and {interleavings}"
        runs = runner.run_all(plan)
    report.planned = len(plan)
    for run in runs:
        report.runs.append(run)
        verdict = _verdict(run)
        if verdict:
            report.failure, report.verdict = run, verdict
            break
    report.seconds = time.perf_counter() - started
    if report.verdict == "LOST":
        raise LostEffectError(report)
    if report.failure is not None:
        raise DuplicateEffectError(report)
    return report


def _verdict(run: Run) -> str | None:
    """DUPLICATE when an effect counted more than once; LOST when one never happened though
    a copy answered success (a copy that failed told its caller, who retries)."""
    counts = run.counts if isinstance(run.counts, dict) else {"effect": run.counts}
    if any(count > 1 for count in counts.values()):
        return "DUPLICATE"
    if any(count == 0 for count in counts.values()) and any(_succeeded(copy) for copy in run.copies):
        return "LOST"
    return None


class _Runner:
    """Runs schedules of one handler's deployed function, one event each."""

    def __init__(self, lab, explorer: Explorer, functions: tuple[str, str], handler, make_event, count_effect, timeout):
        """`functions`: the handler deployed with its own timeout, and with the interleavings' one."""
        self.lab, self.explorer, self.functions, self.handler = lab, explorer, functions, handler
        self.make_event, self.count_effect = make_event, count_effect
        self.timeout = timeout

    def run_all(self, plan: list[Schedule]) -> list[Run]:
        """Every schedule, smallest first, up to the first that fails. A timeout crash mostly
        waits out the function's timeout, and a late retry waits for its moment, so those run
        side by side, each schedule with its own event, while the exit crashes run one by one
        (each costs its retry a cold start: the machine's CPU, not waiting). The smallest
        failing schedule is still the first in the plan, whatever order they finish in."""
        numbered = list(enumerate(plan, start=1))  # event 0 was the map run's
        first = self.run(plan[0], 1)  # a plain retry: when it fails, nothing else need run
        if _verdict(first):
            return [first]
        done: dict[int, Run] = {1: first}
        numbered = numbered[1:]
        with ThreadPoolExecutor(MAX_SIDE_BY_SIDE) as pool:
            waiting = [pool.submit(self.run, s, n) for n, s in numbered if s.crash == "timeout"]
            for number, schedule in numbered:
                if not schedule.together and schedule.crash != "timeout":
                    done[number] = self.run(schedule, number, late=False)
            waiting += [pool.submit(self.late_retry, run) for run in done.values() if _needs_late_retry(run)]
            done.update({run.number: run for run in (future.result() for future in waiting)})
            if not any(_verdict(run) for run in done.values()):
                for number, schedule in numbered:
                    if schedule.together:
                        done[number] = self.run(schedule, number)
                        if _verdict(done[number]):
                            break
        runs = [done[number] for number in sorted(done)]
        failing = next((index for index, run in enumerate(runs) if _verdict(run)), None)
        return runs if failing is None else runs[: failing + 1]

    def late_retry(self, run: Run) -> Run:
        """One more delivery of a crashed schedule's event (its retry failed too, or the effect is missing), once the
        crashed copy's time is up, as Lambda's asynchronous retry (a minute or more later) and
        an SQS message back after its visibility timeout (at least the function's) come: by then
        a lease the copy took for its invocation's time has expired."""
        crashed = run.copies[0]
        moment = (crashed.began or time.time()) + self.timeout
        threading.Event().wait(max(0.0, moment - time.time()))  # the event source's own delay
        late = CopyState("C")
        run.copies.append(late)
        self._send(run, late, run.payload)
        run.counts = self.lab._count(self.count_effect, run.event, run.number)
        return run

    def run(self, schedule: Schedule, number: int, strict: bool = False, late: bool = True) -> Run:
        started = time.perf_counter()
        event = self.make_event(number)
        digest = _bootstrap.event_digest(json.loads(json.dumps(event, default=str)))
        run = Run(schedule, digest, number=number, event=event, payload=json.dumps(event, default=str).encode())
        first = CopyState("A", stop=schedule.first_stop, crash=schedule.crash)
        second = CopyState("B", stop=schedule.second_stop if schedule.together else None)
        run.copies = [first] if schedule.id == "map" else [first, second]
        self.explorer.begin(run)
        payload = run.payload
        if schedule.id == "map":
            self._send(run, first, payload)
        elif not schedule.together:  # twice, or a crash then its retry
            self._send(run, first, payload)
            if strict and schedule.crash and first.point != schedule.first_stop:
                raise ScheduleError(_not_reached(schedule, first))
            self._send(run, second, payload)
            if schedule.crash and late:
                run.counts = self.lab._count(self.count_effect, event, number)
                if _needs_late_retry(run):
                    self.late_retry(run)
        else:
            a = self._start(run, first, payload)
            run.wait_for(lambda: first.point == first.stop or first.answered, "copy A at its point")
            if strict and first.point != first.stop:
                raise ScheduleError(_not_reached(schedule, first))
            b = self._start(run, second, payload)
            run.wait_for(lambda: second.point == second.stop or second.answered, "copy B at its point")
            with run.changed:
                first.released = True
                run.changed.notify_all()
            a.join()
            with run.changed:
                second.released = True
                run.changed.notify_all()
            b.join()
        run.counts = self.lab._count(self.count_effect, event, number)
        run.seconds = time.perf_counter() - started
        return run

    def _send(self, run: Run, copy: CopyState, payload: bytes) -> None:
        function = self.functions[1] if run.schedule.together else self.functions[0]
        copy.result = self.lab._send(function, self.handler, payload, COPY_NAMES.index(copy.name) + 1)
        with run.changed:
            copy.answered = True
            run.changed.notify_all()

    def _start(self, run: Run, copy: CopyState, payload: bytes) -> threading.Thread:
        sender = threading.Thread(target=self._send, args=(run, copy, payload), daemon=True)
        sender.start()
        return sender


def _step_text(step: dict) -> str:
    """A step as the map and the timeline show it: service, operation, what it names."""
    names = " ".join(f"{key}={value}" for key, value in step.items() if key not in ("service", "operation", "saw"))
    return f"{step.get('service', '')} {step.get('operation', '')} {names}".strip()


def _succeeded(copy: CopyState) -> bool:
    """The copy answered success: no error and, for an SQS event, no record listed as failed
    (a listed record's message is not deleted and comes back, AWS docs:
    lambda/latest/dg/services-sqs-errorhandling.html)."""
    if copy.result is None or not copy.result.ok:
        return False
    answer = copy.result.result
    return not (isinstance(answer, dict) and answer.get("batchItemFailures"))


def _needs_late_retry(run: Run) -> bool:
    """A crashed schedule whose retry failed too (the event source delivers once more), or
    whose effect is still missing (its caller comes back)."""
    counts = run.counts if isinstance(run.counts, dict) else {"effect": run.counts}
    missing = any(count == 0 for count in counts.values())
    return bool(run.schedule.crash) and len(run.copies) == 2 and (missing or not _succeeded(run.copies[1]))


def _not_reached(schedule: Schedule, copy: CopyState) -> str:
    return (
        f"schedule {schedule.id}: copy {copy.name} never reached point {copy.stop} "
        f"(its last point was {copy.point}): has the handler changed since the id was kept?"
    )
