"""``numbench system`` on constructed /proc and /sys trees: each check read, judged and given
its advice; a tree without /sys (a container) and one without /proc (off Linux) say what
they could not read instead of failing; the busy processes and steal sampled over an
interval whose end is written by the injected sleep (no real time passes)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from numbench import cli
from numbench.machine import system
from numbench.machine.system import OK, UNKNOWN, UNSTABLE, short_form, system_report

#: /proc/stat's cpu line: user nice system idle iowait irq softirq steal guest guest_nice
QUIET = ("cpu  1000 0 500 10000 100 0 0 0 0 0", "cpu  1009 0 505 10186 100 0 0 0 0 0")
#: 200 ticks pass: 120 busy, of which 20 stolen (10%): 100 of other work (50%)
BUSY = ("cpu  1000 0 500 10000 100 0 0 0 0 0", "cpu  1080 0 520 10080 100 0 0 20 0 0")


def write(root, path: str, text: str) -> None:
    full = root / path.lstrip("/")
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_text(text)


def proc_stat(pid: int, name: str, utime: int, stime: int) -> str:
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
    return f"{pid} ({name}) R 1 1 1 0 -1 0 0 0 0 0 {utime} {stime} 0 0 20 0 1 0\n"


def machine(
    root,
    *,
    stat=QUIET,
    sys_tree=True,
    governor="performance",
    no_turbo="1",
    thp="always madvise [never]",
    aslr="2",
    load="0.10 0.20 0.30 1/100 999",
) -> dict:
    """A constructed machine under ``root`` (``no_turbo`` "1": boost off); returns what the
    sleep writes (the interval's end)."""
    write(root, "/proc/loadavg", load + "\n")
    write(root, "/proc/stat", stat[0] + "\nintr 0\n")
    write(root, "/proc/sys/kernel/randomize_va_space", aslr + "\n")
    write(root, "/proc/cpuinfo", "processor\t: 0\nprocessor\t: 1\n")
    write(root, "/proc/10/stat", proc_stat(10, "idle one", 100, 0))
    write(root, "/proc/20/stat", proc_stat(20, "stress (ng)", 500, 0))
    write(root, "/proc/30/stat", proc_stat(30, "numbench", 0, 0))  # this process itself
    if sys_tree:
        write(root, "/sys/devices/system/cpu/online", "0-7\n")
        for cpu in range(8):
            write(root, f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor", governor)
        write(root, "/sys/devices/system/cpu/intel_pstate/no_turbo", no_turbo + "\n")
        write(root, "/sys/kernel/mm/transparent_hugepage/enabled", thp + "\n")
    return {
        "/proc/stat": stat[1] + "\n",
        "/proc/10/stat": proc_stat(10, "idle one", 100, 1),
        "/proc/20/stat": proc_stat(20, "stress (ng)", 540, 5),  # 45 ticks in 0.5 s: 90%
        "/proc/30/stat": proc_stat(30, "numbench", 90, 0),
    }


def report(root, end: dict, seconds: float = 0.5):
    slept = []

    def sleep(s: float) -> None:
        slept.append(s)
        for path, text in end.items():
            write(root, path, text)

    got = system_report(root, seconds=seconds, sleep=sleep, own_pid=30, ticks_per_s=100)
    assert slept == [seconds]
    return {c.name: c for c in got.checks}, got


def test_a_quiet_tuned_machine_has_nothing_that_makes_timings_less_stable(tmp_path):
    end = machine(tmp_path, thp="always [madvise] never")
    end["/proc/20/stat"] = proc_stat(20, "stress (ng)", 500, 1)  # 2% of a CPU: not named
    checks, got = report(tmp_path, end)
    assert {c.state for c in checks.values()} == {OK}, checks
    assert checks["cpus"].value == "8" and checks["governor"].value == "performance"
    assert checks["boost"].value == "off" and checks["aslr"].value == "on"
    assert checks["transparent huge pages"].value == "madvise"
    assert checks["other work"].value == "7% of the CPUs" and checks["steal"].value == "0.0%"
    assert got.busy_processes == ()
    assert short_form(got).endswith("Nothing read makes timings less stable.")


def test_each_thing_that_makes_timings_less_stable_says_what_to_do(tmp_path):
    end = machine(tmp_path, stat=BUSY, governor="powersave", no_turbo="0", aslr="0",
                  thp="[always] madvise never", load="2.50 1.00 0.50 3/100 999")  # fmt: skip
    checks, got = report(tmp_path, end)
    unstable = {name for name, c in checks.items() if c.state == UNSTABLE}
    assert unstable == {
        "load", "governor", "boost", "aslr", "transparent huge pages", "other work", "steal",
    }  # fmt: skip
    assert "cpupower frequency-set -g performance" in checks["governor"].advice
    assert "no_turbo" in checks["boost"].advice and "randomize_va_space" in checks["aslr"].advice
    assert "madvise" in checks["transparent huge pages"].advice
    assert checks["steal"].value == "10.0%" and "dedicated CPUs" in checks["steal"].advice
    # 120 of 200 ticks busy less 20 stolen: 50% other work; the busy process named, this
    # process (pid 30) and the one at 2% not
    assert checks["other work"].value.startswith("50% of the CPUs (stress (ng) [20] 90%")
    assert got.busy_processes == (("stress (ng)", 20, 0.9),)
    assert "numbench" not in checks["other work"].value
    line = short_form(got)
    assert line.startswith("system: cpus 8; load 2.50 1.00 0.50; governor powersave;")
    assert "Less stable timings from: load, governor, boost" in line


def test_a_container_without_sys_says_what_it_could_not_read(tmp_path):
    end = machine(tmp_path, sys_tree=False)
    checks, got = report(tmp_path, end)
    for name in ("governor", "boost", "transparent huge pages"):
        assert checks[name].state == UNKNOWN and checks[name].value is None
    assert "/sys/devices/system/cpu/cpufreq/boost" in checks["boost"].advice
    assert "transparent_hugepage" in checks["transparent huge pages"].advice
    assert checks["cpus"].value == "2"  # from /proc/cpuinfo instead
    assert checks["cpus"].state == UNSTABLE  # two CPUs: others compete
    assert checks["steal"].state == OK and checks["load"].state == OK
    assert "boost unknown" in short_form(got)


def test_a_machine_without_proc_or_sys_reads_nothing_and_still_reports(tmp_path):
    checks, got = report(tmp_path, {})
    assert {c.state for c in checks.values()} == {UNKNOWN}
    assert "cannot read /proc/loadavg" in checks["load"].advice
    assert "cannot read /proc/stat" in checks["steal"].advice
    assert json.loads(json.dumps(got.to_dict()))["unstable"] == []


def test_garbage_in_a_file_is_unknown_not_an_error(tmp_path):
    end = machine(tmp_path, load="high")
    write(tmp_path, "/sys/devices/system/cpu/online", "zero\n")
    end["/proc/stat"] = "cpu  a b c\n"
    checks, _ = report(tmp_path, end)
    assert checks["load"].state == UNKNOWN and "no three load averages" in checks["load"].advice
    assert checks["cpus"].value == "2"  # the online list unreadable: /proc/cpuinfo
    assert checks["steal"].state == UNKNOWN


def test_the_command_prints_text_or_json_and_refuses_a_bad_interval(capsys, monkeypatch):
    made = []

    def fake_report(seconds):
        made.append(seconds)
        return system.SystemReport((system.Check("load", UNSTABLE, "3.00", "wait"),))

    monkeypatch.setattr(system, "system_report", fake_report)
    assert cli.main(["system", "--seconds", "0.1"]) == 0
    assert "unstable  load: 3.00\n          wait" in capsys.readouterr().out
    assert cli.main(["system", "--json"]) == 0 and made == [0.1, 0.5]
    assert json.loads(capsys.readouterr().out)["unstable"] == ["load"]
    for bad in ("0", "-1", "nan", "100"):
        assert cli.main(["system", "--seconds", bad]) == cli.EXIT_BAD_INPUT
        assert "--seconds must be above 0" in capsys.readouterr().err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads this machine's /proc")
def test_the_command_runs_on_this_machine():
    proc = subprocess.run(
        [sys.executable, "-m", "numbench", "system", "--json", "--seconds", "0.05"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    names = [c["name"] for c in json.loads(proc.stdout)["checks"]]
    assert names == ["cpus", "load", "governor", "boost", "aslr", "transparent huge pages",
                     "other work", "steal"]  # fmt: skip


def test_a_process_start_is_read_as_the_unix_time_it_was_started_at():
    import os
    import time
    from pathlib import Path

    from numbench.machine.system import process_started_unix

    before = time.time()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    after = time.time()
    time.sleep(0.3)  # its start stays what it was while it runs
    try:
        started = process_started_unix(child.pid)
    finally:
        child.kill()
        child.wait()
    # /proc counts the start in clock ticks: one tick of slack either way
    tick = 1.0 / os.sysconf("SC_CLK_TCK")
    assert before - tick <= started <= after + tick
    assert process_started_unix(child.pid) is None  # gone: unknown, not an error
    assert process_started_unix(os.getpid(), proc=Path("/nonexistent")) is None
