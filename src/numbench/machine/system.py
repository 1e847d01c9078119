"""What on this machine makes timings less stable, and what to do about each (``numbench
system``; the workflow's log prints its short form at the start).

Like pyperf's ``system show``, each check reads one thing the kernel exposes and says whether
it helps or hurts repeatable timings: the CPUs and the load, the CPU frequency governor and
turbo boost, address-space randomisation (ASLR), transparent huge pages; and, sampled over a
short interval, the processes that took the CPUs meanwhile and the time the hypervisor took
from this virtual machine (steal, from ``/proc/stat``). Unlike it, nothing is changed here:
each check says what to do, and the user does it.

Everything is read under ``root`` (``/`` on a real machine; a constructed tree in tests).
Anything that cannot be read (no ``/sys`` in a container, no ``/proc`` off Linux, a file the
kernel does not have) gives that check the state ``unknown`` with the path and the reason,
never an error: the command runs wherever Python does.

It is numbench's one reader of ``/proc``: the CPUs' ticks (``read_cpu_lines``), the load
(``read_load_1m``), a process's ``stat``, command line and working folder (``pid_stat``,
``read_argv``, ``read_cwd``), its threads, children and whole tree below it
(``thread_ids``, ``children``, ``descendants``), every process (``process_ids``) and the CPU
(``cpu_info``). What ``numbench.measure`` watches while a cell measures (``activity``,
``quiet``, ``cpu_taken``, ``apart``, the host lock) is read through them, so every part of
numbench reads those files alike. The one exception is what a zygote reads on its own side
(``numbench.measure.zygote``: its threads, its sockets, and a process's memory, whose reader
``rss_mb`` the rest of numbench shares): a zygote imports nothing of numbench's before it
forks, so that each worker imports numbench's modules itself from the files as they are
when it starts.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

#: a check's states: it helps or does no harm; it makes timings less stable; not readable
OK, UNSTABLE, UNKNOWN = "ok", "unstable", "unknown"
#: how long the busy processes and steal are sampled, by default (seconds)
SAMPLE_S = 0.5
#: a 1-minute load average above this (runnable tasks, besides this command) is busy
BUSY_LOAD = 0.5
#: fewer CPUs than this: anything else that runs competes with the benchmark's own
FEW_CPUS = 4
#: a process that took more than this share of one CPU over the sample is named
BUSY_PROCESS_SHARE = 0.05
#: the machine's CPUs busy with other work over the sample beyond this share: busy
BUSY_SHARE = 0.10
#: steal beyond this share of the CPUs' time: the hypervisor is taking them
STEAL_SHARE = 0.02
#: processes named at most
TOP_PROCESSES = 5


@dataclass(frozen=True)
class Check:
    """One thing read: its ``value`` as read (None: unreadable), its ``state`` (``OK``,
    ``UNSTABLE`` or ``UNKNOWN``) and ``advice``: what to do, or why it could not be read."""

    name: str
    state: str
    value: str | None
    advice: str


@dataclass(frozen=True)
class SystemReport:
    checks: tuple[Check, ...]
    #: the processes that took more than ``BUSY_PROCESS_SHARE`` of a CPU: (name, pid, share)
    busy_processes: tuple[tuple[str, int, float], ...] = field(default_factory=tuple)

    @property
    def unstable(self) -> list[Check]:
        return [c for c in self.checks if c.state == UNSTABLE]

    def to_dict(self) -> dict:
        return {
            "checks": [asdict(c) for c in self.checks],
            "busy_processes": [
                {"name": n, "pid": p, "cpu_share": s} for n, p, s in self.busy_processes
            ],
            "unstable": [c.name for c in self.unstable],
        }


def _read(root: Path, path: str) -> tuple[str | None, str]:
    """(text, "") of ``root/path``, or (None, why it could not be read)."""
    full = root / path.lstrip("/")
    try:
        return full.read_text(encoding="utf-8", errors="replace"), ""
    except OSError as exc:
        return None, f"cannot read {path} ({exc.strerror or type(exc).__name__})"


def cpu_info(path: Path = Path("/proc/cpuinfo")) -> dict[str, str]:
    """The first processor's fields of ``/proc/cpuinfo``, their names in lower case (model
    name, flags, cpu MHz...); none where it cannot be read."""
    info: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return info
    for line in text.splitlines():
        if not line.strip():
            if info:
                break
            continue
        key, sep, value = line.partition(":")
        if sep:
            info.setdefault(key.strip().lower(), value.strip())
    return info


def _unknown(name: str, why: str, meaning: str) -> Check:
    return Check(name, UNKNOWN, None, f"{why}: {meaning}")


# -- what can be read at once ---------------------------------------------------------------------
def cpu_count(root: Path) -> int | None:
    """Online CPUs from ``/sys/devices/system/cpu/online`` ("0-3,6"), else the processors
    ``/proc/cpuinfo`` lists; None where neither reads."""
    text, _ = _read(root, "/sys/devices/system/cpu/online")
    if text and text.strip():
        try:
            total = 0
            for part in text.strip().split(","):
                lo, _, hi = part.partition("-")
                total += int(hi or lo) - int(lo) + 1
            return total
        except ValueError:
            pass  # not a CPU list: try /proc/cpuinfo
    text, _ = _read(root, "/proc/cpuinfo")
    if text:
        count = sum(1 for line in text.splitlines() if line.split(":")[0].strip() == "processor")
        return count or None
    return None


def check_cpus(root: Path) -> Check:
    n = cpu_count(root)
    if n is None:
        return _unknown(
            "cpus",
            "cannot read /sys/devices/system/cpu/online nor /proc/cpuinfo",
            "the number of CPUs is not known",
        )
    if n < FEW_CPUS:
        return Check(
            "cpus",
            UNSTABLE,
            str(n),
            f"{n} CPU(s): any other program that runs "
            "competes with the benchmark's; close what you can while it runs",
        )
    return Check("cpus", OK, str(n), "")


def check_load(root: Path) -> Check:
    text, why = _read(root, "/proc/loadavg")
    averages = load_averages(text or "")
    if averages is None:
        why = why or "/proc/loadavg holds no three load averages"
        return _unknown("load", why, "the load is not known")
    one, five, fifteen = averages
    value = f"{one:.2f} {five:.2f} {fifteen:.2f}"
    if one > BUSY_LOAD:
        return Check(
            "load",
            UNSTABLE,
            value,
            f"{one:.2f} tasks ready to run on average over the last minute: other work is "
            "running; wait for it to end, or stop it (see other work)",
        )
    return Check("load", OK, value, "")


def check_governor(root: Path) -> Check:
    cpus = root / "sys/devices/system/cpu"
    try:
        files = sorted(cpus.glob("cpu[0-9]*/cpufreq/scaling_governor"))
    except OSError:
        files = []
    governors = {t.strip() for f in files if (t := _read(root, str(f.relative_to(root)))[0])}
    if not governors:
        return _unknown(
            "governor",
            "no /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor",
            "no frequency scaling is visible (a VM or a container: the host sets the clock)",
        )
    value = ", ".join(sorted(governors))
    if governors != {"performance"}:
        return Check(
            "governor",
            UNSTABLE,
            value,
            "the clock follows the load, so the first "
            "samples run slower: set the performance governor (`sudo cpupower "
            "frequency-set -g performance`)",
        )
    return Check("governor", OK, value, "")


def check_boost(root: Path) -> Check:
    no_turbo, _ = _read(root, "/sys/devices/system/cpu/intel_pstate/no_turbo")
    boost, why = _read(root, "/sys/devices/system/cpu/cpufreq/boost")
    if no_turbo is not None and no_turbo.strip() in ("0", "1"):
        on, path = no_turbo.strip() == "0", "/sys/devices/system/cpu/intel_pstate/no_turbo"
        fix = f"`echo 1 | sudo tee {path}`"
    elif boost is not None and boost.strip() in ("0", "1"):
        on, path = boost.strip() == "1", "/sys/devices/system/cpu/cpufreq/boost"
        fix = f"`echo 0 | sudo tee {path}`"
    else:
        return _unknown(
            "boost",
            why or "neither boost file holds 0 or 1",
            "turbo boost is not visible (a VM or a container: the host decides)",
        )
    if on:
        return Check(
            "boost",
            UNSTABLE,
            "on",
            "the clock depends on temperature and on how "
            f"many cores are busy: turn boost off while measuring ({fix})",
        )
    return Check("boost", OK, "off", "")


def check_aslr(root: Path) -> Check:
    text, why = _read(root, "/proc/sys/kernel/randomize_va_space")
    if text is None or not text.strip():
        return _unknown("aslr", why or "randomize_va_space is empty", "ASLR is not known")
    value = text.strip()
    if value == "0":
        return Check(
            "aslr",
            UNSTABLE,
            "off",
            "every process gets the same memory layout, so "
            "numbench's replicate processes sample one layout, not many: turn it "
            "back on (`echo 2 | sudo tee /proc/sys/kernel/randomize_va_space`)",
        )
    return Check("aslr", OK, "on" if value == "2" else f"partial ({value})", "")


def check_thp(root: Path) -> Check:
    text, why = _read(root, "/sys/kernel/mm/transparent_hugepage/enabled")
    if text is None or "[" not in text:
        return _unknown(
            "transparent huge pages",
            why or "no mode marked in it",
            "whether large arrays get huge pages is not known",
        )
    mode = text[text.index("[") + 1 : text.index("]")]
    if mode == "always":
        return Check(
            "transparent huge pages",
            UNSTABLE,
            mode,
            "a large array gets huge pages "
            "or not depending on what memory is free, and khugepaged merges pages in "
            "the background: set madvise (`echo madvise | sudo tee "
            "/sys/kernel/mm/transparent_hugepage/enabled`)",
        )
    return Check("transparent huge pages", OK, mode, "")


# -- what is sampled over an interval --------------------------------------------------------------
#: the columns of a ``cpu`` line of ``/proc/stat`` after its name, from 0: user nice system
#: idle iowait irq softirq steal (ticks)
IDLE, IOWAIT, STEAL = 3, 4, 7


def cpu_lines(stat_text: str) -> dict[str, list[int]]:
    """The ``cpu`` lines of ``/proc/stat`` by name (``cpu``: all the CPUs; ``cpu0``, ...:
    each one), their first eight columns, padded with 0 where a kernel gives fewer; a line
    that is not numbers is left out. The package's one parser of that file."""
    lines: dict[str, list[int]] = {}
    for line in stat_text.splitlines():
        fields = line.split()
        if not fields or not fields[0].startswith("cpu") or fields[0] in lines:
            continue
        try:
            values = [int(v) for v in fields[1:9]]
        except ValueError:
            continue
        lines[fields[0]] = values + [0] * (8 - len(values))
    return lines


def read_cpu_lines(root: str | os.PathLike = "/") -> dict[str, list[int]] | None:
    """``cpu_lines`` of ``root``'s ``/proc/stat``; None where it cannot be read (not Linux)."""
    try:
        with open(os.path.join(root, "proc/stat"), encoding="ascii", errors="replace") as fh:
            return cpu_lines(fh.read())
    except OSError:
        return None


def read_load_1m(root: str | os.PathLike = "/") -> float | None:
    """The 1-minute load average of ``root``'s ``/proc/loadavg``; None where it cannot be read."""
    try:
        text = (Path(root) / "proc/loadavg").read_text(encoding="ascii")
    except (OSError, ValueError):
        return None
    averages = load_averages(text)
    return None if averages is None else averages[0]


def load_averages(loadavg_text: str) -> tuple[float, float, float] | None:
    """The 1-, 5- and 15-minute load averages of ``/proc/loadavg``; None where it does not
    begin with three numbers."""
    try:
        one, five, fifteen = (float(v) for v in loadavg_text.split()[:3])
    except ValueError:
        return None
    return one, five, fifteen


def clock_ticks_per_s() -> int:
    """The clock ticks a second that ``/proc``'s CPU times count in (100 where the OS does
    not say)."""
    return os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


#: fields of ``/proc/PID/stat`` after the command's closing parenthesis, from 0: the
#: parent's pid (field 4 of proc(5)), utime and stime (14 and 15), cutime and cstime (16 and
#: 17: the children it waited for), the start time (22)
PPID, UTIME, STIME, CUTIME, CSTIME, START_TIME = 1, 11, 12, 13, 14, 19


def pid_stat(pid: int | str, proc: str | os.PathLike = "/proc") -> tuple[str, list[str]] | None:
    """(command name, the fields after it) of ``/proc/PID/stat`` (``"self"``: this process),
    the fields counted as ``PPID``... are; None where it cannot be read (the process ended,
    or no ``/proc``). The name ends at the last parenthesis: a command's name may hold one."""
    try:
        with open(os.path.join(proc, str(pid), "stat"), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        return text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 1 :].split()
    except (OSError, ValueError):
        return None


def process_started_unix(pid: int | str, proc: str | os.PathLike = "/proc") -> float | None:
    """When a process started (Unix seconds, to the clock tick): its start in ``/proc/PID/stat``
    counts from the boot, as ``CLOCK_BOOTTIME`` does; None where either cannot be read."""
    read = pid_stat(pid, proc)
    if read is None or len(read[1]) <= START_TIME or not hasattr(time, "CLOCK_BOOTTIME"):
        return None
    age = time.clock_gettime(time.CLOCK_BOOTTIME) - int(read[1][START_TIME]) / clock_ticks_per_s()
    return time.time() - max(0.0, age)


def read_argv(pid: int, proc: str | os.PathLike = "/proc") -> list[str]:
    """A process's command line (``/proc/PID/cmdline``); empty where it cannot be read."""
    try:
        raw = (Path(proc) / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode("utf-8", errors="replace") for a in raw.split(b"\0") if a]


def process_ids(proc: str | os.PathLike = "/proc") -> list[int]:
    """Every process ``/proc`` lists; none where it cannot be read."""
    try:
        return [int(entry.name) for entry in os.scandir(proc) if entry.name.isdigit()]
    except OSError:
        return []


def read_cwd(pid: int, proc: str | os.PathLike = "/proc") -> Path | None:
    """A process's working folder, resolved; None where it cannot be read."""
    try:
        return Path(os.readlink(os.path.join(proc, str(pid), "cwd"))).resolve()
    except OSError:
        return None


def thread_ids(pid: int | str, proc: str | os.PathLike = "/proc") -> list[int]:
    """The threads of a process (``/proc/PID/task``); none where it cannot be read."""
    try:
        return sorted(int(name) for name in os.listdir(Path(proc) / str(pid) / "task"))
    except (OSError, ValueError):
        return []


def children(pid: int | str, proc: str | os.PathLike = "/proc") -> list[int]:
    """The child processes of ``pid`` (``"self"``: this process), any of its threads' (a
    child belongs to the thread that started it): none where ``/proc`` cannot tell. A thread
    that ends while they are read is skipped."""
    kids: list[int] = []
    for tid in thread_ids(pid, proc):
        try:
            with open(
                os.path.join(proc, str(pid), "task", str(tid), "children"), encoding="ascii"
            ) as fh:
                kids.extend(int(k) for k in fh.read().split())
        except (OSError, ValueError):
            continue
    return kids


def descendants(
    top: int | str, proc: str | os.PathLike = "/proc", leave_out: Iterable[int] = ()
) -> Iterator[int]:
    """The processes under ``top`` (its children, theirs, and so on), each once, without
    those of ``leave_out`` and the processes under them; none where ``/proc`` cannot tell.
    Each is given before its own children are listed, so what the caller reads of it
    (its CPU time with the children it waited for) comes first: a child it waits for
    meanwhile is then counted in it, never twice."""
    todo, seen = children(top, proc), {*leave_out}
    if isinstance(top, int):
        seen.add(top)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        yield pid
        todo.extend(children(pid, proc))


def process_ticks(root: Path, own_pid: int) -> dict[int, tuple[str, int]]:
    """pid -> (name, user + system ticks) of every process ``/proc`` lists, this one left out."""
    found = {}
    try:
        entries = [p for p in (root / "proc").iterdir() if p.name.isdigit()]
    except OSError:
        return found
    for entry in entries:
        pid = int(entry.name)
        if pid == own_pid:
            continue
        stat = pid_stat(pid, root / "proc")
        if stat is None:
            continue  # ended meanwhile, or not ours to read
        name, rest = stat
        try:
            found[pid] = (name, int(rest[UTIME]) + int(rest[STIME]))
        except (IndexError, ValueError):
            continue
    return found


def busy_processes(before: dict, after: dict, seconds: float, ticks_per_s: float) -> list:
    """(name, pid, share of one CPU) of the processes over ``BUSY_PROCESS_SHARE`` between two
    ``process_ticks``, busiest first, at most ``TOP_PROCESSES``."""
    shares = []
    for pid, (name, ticks) in after.items():
        if pid in before and seconds > 0:
            share = (ticks - before[pid][1]) / ticks_per_s / seconds
            if share > BUSY_PROCESS_SHARE:
                shares.append((name, pid, round(share, 3)))
    return sorted(shares, key=lambda s: -s[2])[:TOP_PROCESSES]


def sampled_checks(
    root: Path,
    seconds: float = SAMPLE_S,
    sleep: Callable[[float], None] = time.sleep,
    own_pid: int | None = None,
    ticks_per_s: float | None = None,
) -> tuple[list[Check], list]:
    """(the busy and steal checks, the busy processes), from ``/proc`` read before and after
    ``sleep(seconds)``: while this command sleeps, whatever runs is other work."""
    own_pid = os.getpid() if own_pid is None else own_pid
    if ticks_per_s is None:
        ticks_per_s = clock_ticks_per_s()
    stat_before, why = _read(root, "/proc/stat")
    procs_before = process_ticks(root, own_pid)
    sleep(seconds)
    stat_after, why_after = _read(root, "/proc/stat")
    procs_after = process_ticks(root, own_pid)
    busy = busy_processes(procs_before, procs_after, seconds, ticks_per_s)
    first = cpu_lines(stat_before).get("cpu") if stat_before else None
    last = cpu_lines(stat_after).get("cpu") if stat_after else None
    if first is None or last is None:
        reason = why or why_after or "/proc/stat has no cpu line"
        return [
            _unknown("other work", reason, "how busy the CPUs are is not known"),
            _unknown("steal", reason, "whether a hypervisor takes the CPUs is not known"),
        ], busy
    delta = [b - a for a, b in zip(first, last, strict=True)]
    total = sum(delta)
    if total <= 0:
        reason = f"/proc/stat did not move in {seconds:g} s"
        return [
            _unknown("other work", reason, "how busy the CPUs are is not known"),
            _unknown("steal", reason, "whether a hypervisor takes the CPUs is not known"),
        ], busy
    steal = delta[STEAL] / total
    other = (total - delta[IDLE] - delta[IOWAIT] - delta[STEAL]) / total
    return [_other_work(other, busy), _steal(steal)], busy


def _other_work(share: float, busy: list) -> Check:
    value = f"{share:.0%} of the CPUs"
    if busy:
        value += " (" + ", ".join(f"{n} [{p}] {s:.0%}" for n, p, s in busy) + ")"
    if share > BUSY_SHARE:
        return Check(
            "other work",
            UNSTABLE,
            value,
            "other programs used the CPUs while nothing of numbench ran: stop them, or "
            "wait until they end (numbench sets aside rounds they disturb, which costs time)",
        )
    return Check("other work", OK, value, "")


def _steal(share: float) -> Check:
    value = f"{share:.1%}"
    if share > STEAL_SHARE:
        return Check(
            "steal",
            UNSTABLE,
            value,
            "the hypervisor gave this virtual machine's CPUs to other guests: use an "
            "instance with dedicated CPUs, or measure at a quieter time",
        )
    return Check("steal", OK, value, "")


# -- all of it --------------------------------------------------------------------------------------
def system_report(
    root: str | os.PathLike = "/",
    seconds: float = SAMPLE_S,
    sleep: Callable[[float], None] = time.sleep,
    own_pid: int | None = None,
    ticks_per_s: float | None = None,
) -> SystemReport:
    """Every check, read under ``root``; the busy processes and steal over ``seconds``."""
    root = Path(root)
    checks = [check(root) for check in (check_cpus, check_load, check_governor, check_boost)]
    checks += [check_aslr(root), check_thp(root)]
    sampled, busy = sampled_checks(root, seconds, sleep, own_pid, ticks_per_s)
    return SystemReport(tuple(checks + sampled), tuple(busy))


def short_form(report: SystemReport) -> str:
    """One line: every check's value, then what makes timings less stable."""
    parts = [f"{c.name} {c.value if c.value is not None else 'unknown'}" for c in report.checks]
    line = "system: " + "; ".join(parts)
    unstable = report.unstable
    if unstable:
        names = ", ".join(c.name for c in unstable)
        return f"{line}. Less stable timings from: {names} (`numbench system` says what to do)."
    return f"{line}. Nothing read makes timings less stable."


def long_form(report: SystemReport) -> str:
    """A line per check: its state, its value, and what to do (or why it is unknown)."""
    lines = []
    for c in report.checks:
        value = c.value if c.value is not None else "unknown"
        lines.append(f"{c.state:<9} {c.name}: {value}")
        if c.advice:
            lines.append(f"          {c.advice}")
    count = len(report.unstable)
    lines.append(
        f"{count} of {len(report.checks)} checks make timings less stable"
        if count
        else "Nothing read makes timings less stable."
    )
    return "\n".join(lines)
