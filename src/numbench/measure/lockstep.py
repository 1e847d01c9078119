"""Lockstep rounds: the two processes of a paired round take their samples in turns.

A paired round measures the baseline's process and the library's. Back to back, their samples
lie a second or more apart (the second process's start and import between them), and on a
machine whose speed moves within seconds the two sides see different speeds (on a shared VM,
half-second blocks of one process spread as much as separate processes did: docs/history.md,
"Reproducibility: fourteen run pairs", and "Lockstep rounds" for what taking turns changed). In
lockstep (``replicates.lockstep``) the supervisor starts both processes, one after the other,
and each imports, loads, compiles, makes its first call and calibrates while the other waits;
then the samples are taken in turns, one of each side per turn in a seeded random order, so
each side's samples lie milliseconds from the other's; then each process in turn finishes alone
(its pipelined loop and transfers, its output check). Exactly one of the two runs at any
moment; the other waits on a pipe (at more than one thread, a library's idle thread pools may
spin for a moment after its turn). Each library is still alone in a process of its own, with
its own first call and calibration.

The protocol, one line per message over two pipes whose descriptors the worker finds in
``TURNS_ENV`` ("read,write"):

- the worker says ``ready`` once calibrated, then waits;
- the supervisor says ``sample``: the worker takes one sample and says ``more`` or, once its
  own stopping rule is met (``min_samples`` taken and ``budget_s`` of its own samples
  spent, or ``max_samples``), ``enough``, and waits again;
- the supervisor says ``go``: the worker takes whatever samples it still needs without
  waiting and goes on to the end. It is said to a worker whose partner has ended or said
  ``enough``, and to one that has said ``enough`` once its partner has finished.

The end of the pipe (a supervisor gone) reads as ``go``. Each turn begins with untimed calls
(``warm_calls``), so caches and threads the partner's turn took over are back before the
timed calls, as they are for a sample that follows its own process's last one: a tenth of a
sample's calls, and at least enough calls to fill 40 ms, up to four. One untimed call was
not enough for a kernel of a few milliseconds at two threads: TensorFlow's equation of state
of examples/eos read slower in lockstep than alone after one, and as alone after four
(the figures are in docs/history.md, "Kernels handed over as they are"). The time spent waiting is not the
worker's: ``numbench.measure.cpu_taken`` is paused while it waits, and ``budget_s`` counts its own
samples only.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import select
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from numbench.errors import machinery
from numbench.measure import process
from numbench.spec import CellSpec, ProcessReport

TURNS_ENV = "NUMBENCH_TURNS"
READY, SAMPLE, MORE, ENOUGH, GO = "ready", "sample", "more", "enough", "go"
#: the untimed calls that open a turn (``warm_calls``): a share of a sample's calls, and at
#: least enough to fill WARM_S, up to WARM_CALLS (at least one call)
WARM_SHARE = 10
WARM_CALLS = 4
WARM_S = 0.04


def warm_calls(loops: int, per_call_s: float) -> int:
    """The untimed calls that open a turn whose samples are of ``loops`` calls of about
    ``per_call_s`` seconds: a tenth of the sample's calls, and at least enough calls to fill
    ``WARM_S``, up to ``WARM_CALLS``: a call of ``WARM_S`` or longer gets one, so a turn
    of long calls costs no more than before, and a turn's untimed calls take at most a
    tenth of a sample or about ``WARM_S``, whichever is more."""
    within = math.ceil(WARM_S / per_call_s) if per_call_s > 0 else WARM_CALLS
    return max(1, loops // WARM_SHARE, min(WARM_CALLS, within))


class LineChannel:
    """Lines in and out over two pipe descriptors (unbuffered, so a turn is never held)."""

    def __init__(self, read_fd: int, write_fd: int):
        self.read_fd, self.write_fd = read_fd, write_fd
        self._buffer = b""

    def say(self, word: str) -> bool:
        """Write one line; False when the other end is gone."""
        try:
            os.write(self.write_fd, f"{word}\n".encode("ascii"))
            return True
        except (BrokenPipeError, OSError):
            return False

    def has_line(self) -> bool:
        return b"\n" in self._buffer

    def read_some(self) -> bool:
        """Read what the pipe holds now into the buffer; False at its end."""
        try:
            chunk = os.read(self.read_fd, 4096)
        except OSError:
            return False
        self._buffer += chunk
        return bool(chunk)

    def take_line(self) -> str:
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("ascii", "replace").strip()

    def hear(self) -> str | None:
        """Block until a whole line arrives; None at the pipe's end."""
        while not self.has_line():
            if not self.read_some():
                return None
        return self.take_line()

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            try:
                os.close(fd)
            except OSError:
                pass


class Turns:
    """The worker's side of a lockstep round."""

    def __init__(self, channel: LineChannel, clock: Callable[[], float] = time.perf_counter):
        self.channel, self.clock = channel, clock
        #: paused while the worker waits for its turn (``numbench.measure.cpu_taken.CpuTaken``)
        self.cpu_taken = None
        #: seconds spent waiting for the supervisor's word (the partner's turns and work)
        self.waited_s = 0.0

    @classmethod
    def from_environment(cls) -> Turns | None:
        """The turns the supervisor asked for in ``TURNS_ENV``, or None (measured alone)."""
        value = os.environ.get(TURNS_ENV)
        if not value:
            return None
        try:
            read_fd, write_fd = (int(v) for v in value.split(","))
            for fd in (read_fd, write_fd):
                os.set_inheritable(fd, False)  # the library's own children must not hold them
        except (ValueError, OSError) as exc:
            raise ValueError(
                f"{TURNS_ENV}={value!r}: expected two open descriptors 'read,write' ({exc})"
            ) from None
        return cls(LineChannel(read_fd, write_fd))

    def _hand_over(self, word: str) -> str:
        """Say ``word`` and wait for the supervisor's next one; ``go`` when it is gone. The
        wait is not this process's time: ``cpu_taken`` is paused before the word is said,
        since the partner may run from the moment it is."""
        if self.cpu_taken is not None:
            self.cpu_taken.pause()
        t0 = self.clock()
        self.channel.say(word)
        heard = self.channel.hear()
        self.waited_s += self.clock() - t0
        if self.cpu_taken is not None:
            self.cpu_taken.resume()
        return GO if heard is None else heard

    def take_samples(
        self,
        settings,
        time_loops: Callable[[int], float],
        loops: int,
        per_call_s: float | None = None,
    ) -> list[float]:
        """Samples of ``loops`` calls (seconds per call) in turns, by the same stopping rule
        as ``Timer.take_samples`` with ``budget_s`` counted on this process's samples only.
        ``per_call_s`` (the calibration's last reading) sizes the first turn's untimed
        calls, each sample the next's; without it a call is taken to fill its share of
        ``min_sample_time_s``."""
        samples: list[float] = []
        spent = 0.0
        said = READY
        if per_call_s is None:
            per_call_s = settings.min_sample_time_s / loops
        alone = False
        while True:
            if not alone:
                if self._hand_over(said) != SAMPLE:
                    alone = True  # go: the partner is done or gone
                else:
                    time_loops(warm_calls(loops, per_call_s))
            t0 = self.clock()
            samples.append(time_loops(loops) / loops)
            spent += self.clock() - t0
            per_call_s = samples[-1]
            if len(samples) >= settings.max_samples or (
                len(samples) >= settings.min_samples and spent >= settings.budget_s
            ):
                break
            said = MORE
        if not alone:
            while self._hand_over(ENOUGH) != GO:
                pass  # never asked for another sample after enough: still waiting for go
        return samples


# -- the supervisor's side ----------------------------------------------------------------
@dataclass
class _Partner:
    """One live worker of a lockstep round, as the supervisor sees it."""

    spec: CellSpec
    proc: subprocess.Popen
    channel: LineChannel
    result_path: Path
    started_unix: float
    #: seconds the supervisor has waited on it while it ran (its time limit counts these)
    active_s: float = 0.0
    #: the last word it said (``ready``, ``more``, ``enough``); None once it has ended
    said: str | None = None
    report: ProcessReport | None = None
    #: how it started (``process.spawn``)
    start: str = "exec"


def _start_partner(spec: CellSpec, tmp: str) -> _Partner:
    with machinery("the worker cannot start"):
        cmd, env, result_path = process.prepare_worker(spec, tmp)
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
    env[TURNS_ENV] = f"{to_worker_r},{from_worker_w}"
    started = time.time()
    try:
        with machinery("the worker cannot start"):
            job = process.cell_job(spec, process.worker_interpreter(spec))
            proc, how = process.spawn(job, cmd, env, pass_fds=(to_worker_r, from_worker_w))
    except BaseException:
        for fd in (to_worker_r, to_worker_w, from_worker_r, from_worker_w):
            os.close(fd)
        raise
    os.close(to_worker_r)
    os.close(from_worker_w)
    return _Partner(
        spec, proc, LineChannel(from_worker_r, to_worker_w), result_path, started, start=how
    )


def _hear(partner: _Partner) -> str | None:
    """Wait for the partner's next word while it runs, its memory watched and its time
    counted against its limit; None once it has ended (its report is then set)."""
    spec, proc = partner.spec, partner.proc
    t0 = time.monotonic()
    try:
        while True:
            if partner.channel.has_line():
                return partner.channel.take_line()
            remaining = spec.timeout_s - partner.active_s - (time.monotonic() - t0)
            readable, _, _ = select.select(
                [partner.channel.read_fd], [], [], max(0.0, min(process.POLL_S, remaining))
            )
            if readable and partner.channel.read_some():
                continue
            if readable or proc.poll() is not None:
                # the pipe closed or the worker exited: it is ending, under its limits
                left = spec.timeout_s - partner.active_s - (time.monotonic() - t0)
                killed = process.supervise(proc, max(0.0, left), spec.memory_limit_mb)
                partner.report = killed or process.ended_report(
                    proc.returncode, partner.result_path
                )
                return None
            partner.report = process.kill_over_memory(proc, spec.memory_limit_mb)
            if partner.report is not None:
                return None
            if remaining <= 0:
                process.kill_group(proc)
                partner.report = ProcessReport(
                    status="timeout",
                    error=f"no result within cell_timeout_s = {spec.timeout_s:g} s of its "
                    "own (its partner's turns not counted); worker killed",
                )
                return None
    finally:
        partner.active_s += time.monotonic() - t0


def run_lockstep(specs: list[CellSpec], seed: int) -> list[tuple[float, ProcessReport]]:
    """Run the processes of a lockstep round (``numbench.measure.lockstep``): started in this order,
    each one prepared while the other waits, their samples taken in turns in an order seeded
    by ``seed``, then each finished in turn. Returns each one's start (Unix seconds) and its
    report, in the order given.

    Every way a worker can end is its own status, as with ``run_worker``; its time limit
    counts only the time it runs, not its partner's turns. A partner that ends, however it
    ends, frees the other, which takes the samples it still needs alone.
    """
    rng = random.Random(seed)
    partners: list[_Partner] = []
    with contextlib.ExitStack() as stack:
        try:
            for spec in specs:
                partner = _start_partner(spec, process.scratch_folder(stack))
                partners.append(partner)
                partner.said = _hear(partner)  # ready, or ended before its samples
            while all(p.said in (READY, MORE) for p in partners):
                for partner in rng.sample(partners, len(partners)):
                    partner.channel.say(SAMPLE)  # a gone worker is seen by _hear
                    partner.said = _hear(partner)
            # those still sampling finish first, so their samples stay close to the others'
            for partner in sorted(partners, key=lambda p: p.said == ENOUGH):
                if partner.report is None:
                    partner.channel.say(GO)
                while partner.report is None:
                    _hear(partner)
        except BaseException:
            for partner in partners:
                if partner.proc.poll() is None:
                    process.kill_group(partner.proc)  # the supervisor is stopped: take them along
            raise
        finally:
            for partner in partners:
                partner.channel.close()
    for partner in partners:
        partner.report.worker_start = partner.start
    return [(p.started_unix, p.report) for p in partners]
