"""A roof's jobs: each runs in a fresh worker process (``python -m
numbench.roofline.measure.kernels JOB RESULT``), made, started and watched by the cells' own
process machinery (``numbench.measure.process``: the same threads' limits, allocator,
library variables, interpreter, private temporary folder, time limit and kill of the whole
session), and measured again when other programs disturbed it, by the rule a cell's round
follows (``numbench.measure.quiet.undisturbed``).

A job is a mapping, written to the worker as JSON: its ``kind`` (``memory``, ``gemm`` or
``gpu``), its ``threads`` and what the kind needs (a GEMM's ``library``, ``device``,
``dtype`` and ``sizes``; the memory job's ``dtypes`` and ``working_sets``). Its result is the
mapping the worker wrote, or a ``status`` and an ``error`` where it wrote none.

``RoofJobs`` holds how jobs run (the allocator, the disturbance limit, where to say what
happens, the runner) apart from what they measure, so a run may measure its roofs again
later with the same settings.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from numbench.errors import MachineryFault
from numbench.measure import process
from numbench.measure.quiet import QUIETEST, STILL_BUSY, undisturbed
from numbench.spec import ProcessReport

#: the module a roof's worker runs
KERNELS_MODULE = "numbench.roofline.measure.kernels"
#: a roof's worker process still running after this long is killed (status ``timeout``)
ROOF_JOB_TIMEOUT_S = 300.0
#: how the time limit is named in a killed job's error
LIMIT_NAME = "a roof job's limit"


def worker_job(job: dict, allocator: str, timeout_s: float = ROOF_JOB_TIMEOUT_S):
    """A roof job as a worker of the process machinery (``process.WorkerJob``): the cells'
    thread limits and allocator, and a GEMM's library's own variables
    (``Adapter.environment``), in this interpreter."""
    return process.WorkerJob(
        module=KERNELS_MODULE,
        job_file="job.json",
        job_text=json.dumps(job),
        threads=int(job["threads"]),
        allocator=allocator,
        timeout_s=timeout_s,
        limit_name=LIMIT_NAME,
        library=job.get("library"),
        device=job.get("device", "cpu"),
        dtype=job.get("dtype", "float64"),
        scratch_prefix="numbench-roof-",
    )


def read_result(returncode: int, result_path: Path) -> dict:
    """What a roof worker that ended by itself wrote, or, without it, the status of how it
    ended (``process.ended_without_report``). A result that cannot be read is a
    ``MachineryFault``."""
    if result_path.exists():
        try:
            return json.loads(result_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            why = f"the roof worker's result {result_path} is unreadable: {exc}"
            raise MachineryFault(why) from exc
    ended = process.ended_without_report(returncode, "the roofs' log")
    return {"status": ended.status, "error": ended.error}


def run_job(job: process.WorkerJob) -> dict:
    """Run one roof worker (``process.run_job``) and return its result; a worker killed past
    its limits returns the kill's status and error instead."""
    out = process.run_job(job, read_result)
    if isinstance(out, ProcessReport):
        return {"status": out.status, "error": out.error}
    return out


def _shares(result: dict) -> list[float | None]:
    return [result.get("cpu_taken")]


@dataclass(frozen=True)
class RoofJobs:
    """How the roof jobs of one measurement run: the config's ``allocator``, its
    ``replicates.max_cpu_taken`` (None: every job once), where progress is said, the
    runner (``run_job``; the tests give their own) and the look at the machine before a
    retry (``busy_now``, given the job's threads: ``numbench.measure.quiet.busy_now``; None: no
    look)."""

    allocator: str
    max_cpu_taken: float | None = None
    say: Callable[[str], None] = print
    runner: Callable[[process.WorkerJob], dict] = run_job
    busy_now: Callable[[int], float | None] | None = None

    def measure(self, job: dict) -> dict:
        """Run ``job``; while other programs took more than ``max_cpu_taken`` of its CPUs,
        run it again (``disturbed.undisturbed``). The quietest attempt is kept, with the
        number of the others (``set_aside``). Where a look at the machine before a retry
        (``busy_now``) finds that others would still take more than that of the job's CPUs,
        no retry is made."""
        worker = worker_job(job, self.allocator)

        def again(result: dict) -> None:
            taken = result["cpu_taken"]
            self.say(
                f"roofs: other programs took {taken:.0%} of the CPUs during {job['kind']}: again"
            )

        def still_busy(result: dict, now: float) -> None:
            self.say(
                f"roofs: other programs took {result['cpu_taken']:.0%} of the CPUs during "
                f"{job['kind']} and would still take {now:.0%} of the worker's CPUs: {STILL_BUSY}"
            )

        kept, set_aside = undisturbed(
            lambda _: self.runner(worker),
            _shares,
            self.max_cpu_taken,
            again,
            QUIETEST,
            busy_now=None if self.busy_now is None else lambda: self.busy_now(worker.threads),
            still_busy=still_busy,
        )
        return {**kept, "set_aside": set_aside}
