"""Resuming a killed run: remove Snakemake's lock only when it is stale.

A Snakemake process killed with SIGKILL (or a lost node) leaves ``.snakemake/locks`` behind,
and the next run refuses to start until ``snakemake --unlock``. ``make run`` calls
``unlock_if_stale`` first: when no live Snakemake process on this host works in the
directory, the lock is stale and is removed with ``snakemake --unlock``; the run then picks
up where it stopped (``rerun-incomplete`` in the default profile remakes the cells that
were being written). The check sees this host only: do not start a second run from another
host on a shared file system while one runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from numbench.machine.system import PPID, pid_stat


def lock_files(workdir: str | os.PathLike) -> list[Path]:
    locks = Path(workdir, ".snakemake", "locks")
    return sorted(locks.iterdir()) if locks.is_dir() else []


def snakemake_running_in(workdir: str | os.PathLike) -> list[int]:
    """Pids of live Snakemake processes on this host whose working directory is ``workdir``
    (this process and its ancestors excepted)."""
    target = Path(workdir).resolve()
    mine = {os.getpid()}
    pid = os.getpid()
    while pid > 1:  # ancestors: make, a shell
        stat = pid_stat(pid)
        if stat is None:
            break
        try:
            pid = int(stat[1][PPID])
        except (ValueError, IndexError):
            break
        mine.add(pid)
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        try:
            with open(f"{entry.path}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ")
            if b"snakemake" not in cmdline:
                continue
            if Path(os.readlink(f"{entry.path}/cwd")).resolve() == target:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def unlock_if_stale(workdir: str | os.PathLike = ".", python: str = sys.executable) -> str:
    """Remove a stale Snakemake lock; return what was done, in one line."""
    if not lock_files(workdir):
        return "no lock"
    running = snakemake_running_in(workdir)
    if running:
        return f"locked by a running Snakemake (pid {', '.join(map(str, running))}); left alone"
    subprocess.run(
        [python, "-m", "snakemake", "--unlock", "--cores", "1"],
        cwd=workdir,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return "stale lock of a killed run removed (snakemake --unlock)"
