"""What the whole machine did while a cell held the host's timing lock: the share of all its
CPUs' time that other processes took, the share the workflow's own processes took, the share
the hypervisor took (steal), and the load.

``numbench.measure.cpu_taken`` judges each worker process on its own CPUs; this is the cell's
record of the machine around it, for a reader of the cell row (and a run's headline) to see
how quiet the machine was while the cell measured. Both come from the aggregate ``cpu`` line
of ``/proc/stat`` read when the cell took the lock and when it let go: of the ticks of all
CPUs meanwhile, ``steal_share`` is the steal, and ``other_cpu_share`` the busy ticks (all but
idle, I/O wait and steal) less the CPU time of the cell's own processes (the supervisor and
every worker it waited for, ``os.times``) and less the workflow's, never below 0.
``load_avg_1m`` is the 1-minute load average when the cell let go (``/proc/loadavg``): the
cell's own processes count in it.

The workflow's own processes (``workflow_cpu_share``) are the cell job's ancestors, from its
parent up to and including the nearest one that is Snakemake (its command line runs
snakemake: ``snakemake ...``, ``python -m snakemake ...``, ``python .../bin/snakemake ...``),
and every other process under that Snakemake but the cell's own (this process and its
workers): the other jobs Snakemake runs beside the cell (with ``--cores`` above 1, the next
timing job waiting for the lock, an environment being made) and Snakemake's own helpers
(its scheduler's solver). Nothing is the workflow's where no ancestor is Snakemake (a cell
run by ``numbench offsite run``, or by hand: whatever started it may be busy on its own, so
it stays among the others and the workflow's share is None). Snakemake's scheduler takes CPU
beside every cell (docs/method.md, "One timing cell at a time"), and so may a job beside it:
a quiet machine must read quiet, and the workflow's own work must read as the workflow's.
Their CPU time (utime and stime of ``/proc/PID/stat``, in clock ticks), with that of the
children each waited for (cutime and cstime: the solver Snakemake's scheduler runs in a
process of its own at each pass, which starts and ends between two readings), is read when
the watch starts and when it stops. The ancestors are found once; the processes under
Snakemake at each reading (``/proc/PID/task/TID/children``), so that a job started meanwhile
counts: a process found at the stopping reading but not at the starting one (or under a PID
another process had then) started meanwhile, and all its time counts. A process that ended
meanwhile is missing from the stopping reading: where its parent was read at both (or,
where the parent ended too, the nearest ancestor that was), that one waited for it and its
whole time came into that one's, so what it had taken by the starting reading is taken out
again; otherwise (it left the tree: no such ancestor) what it took after its starting
reading counts among the other processes'. An ancestor whose PID another process took
counts nothing. Where its parent's ``/proc`` entry cannot be read, the workflow's share is
None and nothing is taken out for it.

An early round run as a job of its own (``replicates.early_rounds``) records its own stretch the
same way in its round file, and the cell's job adds it to its own (``combined``): the shares
are those of all the stretches together, each weighted by its length, and the load is the
cell job's. Where ``/proc`` cannot be read (not Linux), all four are None.

**The sentinel** (``time_sentinel``): a fixed small kernel, the same in every run and on
every machine, timed by each cell's job just before it measures, so that the run's cells in
the order they held the timing lock (``locked_from_unix``) form a series of the machine's
own speed through the run.

The kernel is NumPy's sort of ``SENTINEL_SIZE`` float64 values drawn from a fixed seed (8
MiB; NumPy's sort uses one thread whatever the config's threads, so the cell's library and
settings never change it). Its size makes a call last milliseconds, long enough to stand
above the timer's and the scheduler's noise, which a sort a quarter of its size did not on
the machine it was chosen on (docs/method.md, "Replicates, pairing and lockstep rounds").
``SENTINEL_REPEATS`` calls are timed after one untimed call and the fastest counts
(``sentinel_s``): a call that another program interrupted is left out, and what stays is how
fast this machine runs the same work now. A machine slowing down through the run (its clock,
a neighbour on the memory bus, a host under load) shows as ``sentinel_s`` drifting; the
run's spread (slowest cell's sentinel over the fastest's) is in the headline
(``numbench.machine.analyse``).

Where NumPy cannot be imported the sentinel is not timed (None).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from numbench.machine.system import (
    CSTIME,
    CUTIME,
    IDLE,
    IOWAIT,
    PPID,
    START_TIME,
    STEAL,
    STIME,
    UTIME,
    clock_ticks_per_s,
    descendants,
    pid_stat,
    read_argv,
    read_cpu_lines,
    read_load_1m,
)
from numbench.measure import zygote


def own_cpu_s() -> float:
    """CPU seconds of this process and of every child it has waited for (the workers), and
    of the workers zygotes forked for it (``zygote.relayed_cpu_s``: theirs, not its children)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system + zygote.relayed_cpu_s()


def read_cpu_ticks(root: str | os.PathLike = "/") -> list[int] | None:
    """The aggregate ``cpu`` line of ``/proc/stat`` (``numbench.machine.system.cpu_lines``)."""
    lines = read_cpu_lines(root)
    return None if lines is None else lines.get("cpu")


#: the most ancestors followed up from the cell's job (a guard against a constructed loop)
MAX_ANCESTORS = 64


def read_process(pid: int, proc: str | os.PathLike = "/proc") -> tuple[int, int, int] | None:
    """(parent's pid, start time, CPU ticks: utime + stime) of a process from its
    ``/proc/PID/stat``; None where it cannot be read (it ended, or no ``/proc``)."""
    stat = pid_stat(pid, proc)
    if stat is None:
        return None
    fields = stat[1]
    try:
        return int(fields[PPID]), int(fields[START_TIME]), int(fields[UTIME]) + int(fields[STIME])
    except (ValueError, IndexError):
        return None


#: Python's options that take the next argument as their value
_PYTHON_VALUE_OPTIONS = ("-W", "-X", "-Q")


def is_snakemake(argv: list[str]) -> bool:
    """Whether a command line runs Snakemake: its program (``.../snakemake``), or a Python
    running its module (``-m snakemake``) or its script (``python .../bin/snakemake``),
    whatever options come before (``python -W ignore -m snakemake``); ``-c`` code is not."""
    if not argv:
        return False
    if os.path.basename(argv[0]) == "snakemake":
        return True
    if not os.path.basename(argv[0]).startswith("python"):
        return False
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("-c"):
            return False
        if arg.startswith("-m"):
            module = arg[2:] or (argv[i + 1] if i + 1 < len(argv) else "")
            return module.split(".")[0] == "snakemake"
        if not arg.startswith("-"):
            return os.path.basename(arg) == "snakemake"
        i += 2 if arg in _PYTHON_VALUE_OPTIONS else 1
    return False


def job_pid() -> int:
    """The timing job's own process, the one Snakemake started: this one, or the one that
    handed its job to this process, forked by a zygote (``numbench.measure.job``)."""
    return int(os.environ.get(zygote.JOB_PID_ENV) or os.getpid())


def job_parent() -> int:
    """The parent of the timing job's own process (``job_pid``): where the workflow's own
    processes are looked for (``workflow_pids``)."""
    return int(os.environ.get(zygote.JOB_PARENT_ENV) or os.getppid())


def workflow_pids(parent: int, proc: str | os.PathLike = "/proc") -> list[int] | None:
    """The workflow's own processes: ``parent`` and its ancestors up to the nearest that is
    Snakemake; None where none is, or ``parent`` cannot be read (nothing is set apart)."""
    if read_process(parent, proc) is None:
        return None
    chain, pid = [], parent
    while pid > 0 and len(chain) < MAX_ANCESTORS:
        stat = read_process(pid, proc)
        if stat is None:
            break
        chain.append(pid)
        if is_snakemake(read_argv(pid, proc)):
            return chain
        pid = stat[0]
    return None


class Reading(dict):
    """A reading of the workflow's processes: pid -> (start time, CPU ticks), and
    ``parents``: pid -> its parent's pid, where read (a plain dict reads as none known)."""

    def __init__(self, *args, parents: dict[int, int] | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.parents = parents or {}


def read_process_total(pid: int, proc: str | os.PathLike = "/proc") -> tuple[int, int, int] | None:
    """(parent's pid, start time, CPU ticks of the process and of the children it waited
    for: utime + stime + cutime + cstime); None where it cannot be read."""
    stat = pid_stat(pid, proc)
    if stat is None:
        return None
    fields = stat[1]
    try:
        ticks = sum(int(fields[i]) for i in (UTIME, STIME, CUTIME, CSTIME))
        return int(fields[PPID]), int(fields[START_TIME]), ticks
    except (ValueError, IndexError):
        return None


class WorkflowCpu:
    """Reads the CPU ticks of the workflow's own processes: the ancestors of the process's
    parent up to Snakemake (``workflow_pids``, found when made) and, at each reading, every
    other process under that Snakemake but ``own`` (this process by default) and those under
    it; each with the children it waited for; a reading is None where no Snakemake was
    found. An ancestor whose PID another process took since (another start time) is left out
    of a reading."""

    def __init__(
        self,
        parent: int | None = None,
        proc: str | os.PathLike = "/proc",
        own: int | None = None,
    ) -> None:
        self._proc = proc
        self._own = job_pid() if own is None else own
        self.pids = workflow_pids(job_parent() if parent is None else parent, proc)
        found = {pid: read_process(pid, proc) for pid in self.pids or []}
        self._started = {pid: stat[1] for pid, stat in found.items() if stat is not None}

    def __call__(self) -> Reading | None:
        if self.pids is None:
            return None
        reading = Reading()
        for pid in self.pids:
            stat = read_process_total(pid, self._proc)
            if stat is not None and stat[1] == self._started.get(pid):
                reading[pid], reading.parents[pid] = (stat[1], stat[2]), stat[0]
        for pid in descendants(self.pids[-1], self._proc, leave_out=[self._own]):
            if pid in reading:
                continue
            stat = read_process_total(pid, self._proc)
            if stat is not None:
                reading[pid], reading.parents[pid] = (stat[1], stat[2]), stat[0]
        return reading


def _same(pid: int | None, before: Reading, after: Reading) -> bool:
    """Whether ``pid`` is the same process in both readings (read in both, one start)."""
    return pid in before and pid in after and before[pid][0] == after[pid][0]


def _waited_for_within(pid: int, before: Reading, after: Reading) -> bool:
    """Whether an ended process's time came into a process read in both readings: its
    parent's, or, where the parent ended too, that one's parent's, and so on (each waited
    for its children; ``before.parents``)."""
    parents = getattr(before, "parents", {})
    parent, seen = parents.get(pid), {pid}
    while parent is not None and parent not in seen:
        if _same(parent, before, after):
            return True
        if parent not in before or parent in after:
            return False  # not the workflow's, or its PID taken by another process
        seen.add(parent)
        parent = parents.get(parent)
    return False


def workflow_ticks(before: Reading | None, after: Reading | None) -> int | None:
    """The ticks the workflow's processes took between two readings, never below 0.

    A process read in both adds what it took between them; one in the second only, or under
    a PID another process had in the first (another start time), started meanwhile and adds
    all it took. A process of the first that is gone from the second (it ended) adds
    nothing itself; where its parent (``before.parents``) was read in both, that parent
    waited for it and its whole time came into the parent's (so too where the parent ended
    as well, and its own parent was read in both: ``_waited_for_within``), so what it had
    taken by the first reading, which is not the stretch's, is taken back out."""
    if before is None or after is None:
        return None
    taken = 0
    for pid, (_, ticks) in after.items():
        taken += max(0, ticks - before[pid][1]) if _same(pid, before, after) else ticks
    for pid, (_, ticks) in before.items():
        if not _same(pid, before, after) and _waited_for_within(pid, before, after):
            taken -= ticks
    return max(0, taken)


@dataclass(frozen=True)
class Activity:
    """The four figures of one cell (None: unknown), and the seconds watched."""

    other_cpu_share: float | None
    steal_share: float | None
    load_avg_1m: float | None
    watched_s: float | None = None
    workflow_cpu_share: float | None = None
    #: whether the workflow's own processes (Snakemake's threads, what counts) were kept off
    #: the worker's CPUs meanwhile (``numbench.measure.apart``; None: not tried)
    workflow_moved: bool | None = None

    def to_dict(self) -> dict:
        return {
            "other_cpu_share": self.other_cpu_share,
            "workflow_cpu_share": self.workflow_cpu_share,
            "workflow_moved": self.workflow_moved,
            "steal_share": self.steal_share,
            "load_avg_1m": self.load_avg_1m,
            "watched_s": self.watched_s,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Activity:
        """The figures ``to_dict`` wrote (``workflow_cpu_share`` None where absent: a round
        file from before it). ``ValueError``, naming the entry, where one is neither None
        nor a finite number >= 0, or ``data`` is no dict."""
        if not isinstance(data, dict):
            raise ValueError(f"the activity entry is {data!r}, not an object of figures")

        def number(name: str) -> float | None:
            value = data.get(name)
            if value is None:
                return None
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                raise ValueError(f"activity's {name} is {value!r}, not a number >= 0 or null")
            return float(value)

        moved = data.get("workflow_moved")
        if moved is not None and not isinstance(moved, bool):
            raise ValueError(f"activity's workflow_moved is {moved!r}, not true, false or null")

        return cls(
            *(number(n) for n in ("other_cpu_share", "steal_share", "load_avg_1m")),
            watched_s=number("watched_s"),
            workflow_cpu_share=number("workflow_cpu_share"),
            workflow_moved=moved,
        )


#: the shares ``combined`` weighs by their stretches' seconds
SHARES = ("other_cpu_share", "workflow_cpu_share", "steal_share")


def combined(parts: list[Activity]) -> Activity:
    """The figures of several stretches together (a cell's early rounds' jobs and its own,
    in that order): each share weighted by its stretch's seconds over the stretches that
    have it; the load the last part's. A part with no share, or watched for no time (its job
    measured nothing: a time cap), adds nothing. ``workflow_moved``: False where a part that
    tried could not, else True where one did, else None."""
    if not parts:
        return Activity(None, None, None)
    totals = {}
    for name in SHARES:
        known = [
            (getattr(p, name), p.watched_s)
            for p in parts
            if getattr(p, name) is not None and p.watched_s
        ]
        seconds = sum(s for _, s in known)
        totals[name] = sum(v * s for v, s in known) / seconds if seconds > 0 else None
    watched = sum(p.watched_s or 0.0 for p in parts)
    tried = {p.workflow_moved for p in parts} - {None}
    return Activity(
        totals["other_cpu_share"],
        totals["steal_share"],
        parts[-1].load_avg_1m,
        watched,
        totals["workflow_cpu_share"],
        min(tried) if tried else None,
    )


def _ticks_between(before: list[int] | None, after: list[int] | None) -> list[int] | None:
    if before is None or after is None:
        return None
    delta = [b - a for a, b in zip(before, after, strict=True)]
    return delta if sum(delta) > 0 else None


def shares(
    before: list[int] | None,
    after: list[int] | None,
    own_s: float,
    ticks_per_s: float,
    workflow: int | None = None,
) -> tuple[float | None, float | None]:
    """(other processes' share, steal share) of the CPUs' ticks between two readings of the
    ``cpu`` line, the cell's own ``own_s`` CPU seconds and the workflow's ``workflow``
    ticks (``workflow_ticks``; None: unknown, nothing) taken out of the first."""
    delta = _ticks_between(before, after)
    if delta is None:
        return None, None
    total = sum(delta)
    busy = total - delta[IDLE] - delta[IOWAIT] - delta[STEAL]
    other = max(0.0, busy - own_s * ticks_per_s - (workflow or 0)) / total
    return min(1.0, other), delta[STEAL] / total


def sample_shares(
    sample_s: float,
    *,
    ticks: Callable[[], list[int] | None],
    own_s: Callable[[], float],
    workflow: Callable[[], Reading | None],
    sleep: Callable[[float], None],
    ticks_per_s: float,
) -> tuple[float | None, float | None] | None:
    """(other processes' share, steal share) of all CPUs' ticks over ``sample_s`` seconds
    from now (``shares``: this process's CPU time and the workflow's processes' taken out of
    the others); None where the ``cpu`` line cannot be read. One sample of the machine, for
    the wait for quiet (``numbench.measure.quiet``) and the look before a retry
    (``numbench.measure.quiet.busy_now``)."""
    before, own0, workflow0 = ticks(), own_s(), workflow()
    if before is None:
        return None
    sleep(sample_s)
    taken = workflow_ticks(workflow0, workflow())
    return shares(before, ticks(), own_s() - own0, ticks_per_s, taken)


def workflow_share(
    before: list[int] | None, after: list[int] | None, workflow: int | None
) -> float | None:
    """The workflow's ``workflow`` ticks as a share of the CPUs' ticks between two readings
    of the ``cpu`` line; None where either is unknown."""
    delta = _ticks_between(before, after)
    if delta is None or workflow is None:
        return None
    return min(1.0, workflow / sum(delta))


class ActivityWatch:
    """Started when made; ``stop()`` gives the ``Activity`` since. The readings can be
    handed in (tests give constructed ones; ``workflow``: a ``WorkflowCpu`` of their own
    ``/proc``, or a callable of ``Reading``; by default the real one, made here)."""

    def __init__(
        self,
        *,
        ticks: Callable[[], list[int] | None] = read_cpu_ticks,
        own_s: Callable[[], float] = own_cpu_s,
        load: Callable[[], float | None] = read_load_1m,
        workflow: Callable[[], Reading | None] | None = None,
        ticks_per_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ticks, self._own_s, self._load, self._clock = ticks, own_s, load, clock
        self._workflow = WorkflowCpu() if workflow is None else workflow
        if ticks_per_s is None:
            ticks_per_s = clock_ticks_per_s()
        self._per_s = ticks_per_s
        self._from = (ticks(), own_s(), self._workflow(), clock())

    def stop(self) -> Activity:
        ticks0, own0, workflow0, t0 = self._from
        ticks1, own1, workflow1 = self._ticks(), self._own_s(), self._workflow()
        taken = workflow_ticks(workflow0, workflow1)
        other, steal = shares(ticks0, ticks1, own1 - own0, self._per_s, taken)
        return Activity(
            other,
            steal,
            self._load(),
            self._clock() - t0,
            workflow_share(ticks0, ticks1, taken),
        )


# -- the sentinel: the machine's own speed before each cell -------------------------------
#: what the sentinel sorts, and the seed of its values: never change them, or runs measured
#: before and after no longer compare
SENTINEL_SIZE = 2**20
SENTINEL_SEED = 20261126
#: timed calls; the fastest counts
SENTINEL_REPEATS = 3
#: how the sentinel is named in the docs and the findings
SENTINEL_KERNEL = f"NumPy sort of {SENTINEL_SIZE} float64 values (seed {SENTINEL_SEED})"


#: The test suite sets this (beside ``NUMBENCH_TEST_ADAPTERS=1``, without which it is ignored)
#: to sort fewer values: its runs time the sentinel before every cell, their machine's speed
#: is no test's subject, and the tests check that it is timed and carried, not its value (as
#: ``numbench.roofline.measure.TEST_GEMM_ENV`` does for the compute roof).
TEST_SENTINEL_ENV = "NUMBENCH_TEST_SENTINEL_SIZE"


def sentinel_size(environ=os.environ) -> int:
    """The values the sentinel sorts: ``SENTINEL_SIZE``, or what ``TEST_SENTINEL_ENV`` names
    in a test run. A malformed value is an error naming the variable."""
    from numbench.libraries import setting_of_tests

    text = setting_of_tests(TEST_SENTINEL_ENV, environ)
    if text is None:
        return SENTINEL_SIZE
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{TEST_SENTINEL_ENV}={text!r}: expected a count of values above 0")
    return int(text)


def sentinel_kernel() -> Callable[[], object] | None:
    """One call of the sentinel, its values drawn once; None without NumPy."""
    try:
        import numpy as np
    except ImportError:
        return None
    values = np.random.default_rng(SENTINEL_SEED).random(sentinel_size())
    return lambda: np.sort(values, kind="quicksort")


def time_sentinel(
    kernel: Callable[[], object] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    repeats: int = SENTINEL_REPEATS,
) -> float | None:
    """Seconds of the fastest of ``repeats`` timed calls of ``kernel`` (the sentinel's by
    default) after one untimed call; None where there is no kernel."""
    if repeats < 1:
        raise ValueError(f"the sentinel needs at least one timed call, not {repeats}")
    kernel = sentinel_kernel() if kernel is None else kernel
    if kernel is None:
        return None
    kernel()
    best = math.inf
    for _ in range(repeats):
        t0 = clock()
        kernel()
        best = min(best, clock() - t0)
    return best
