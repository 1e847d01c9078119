"""Lockstep rounds: the two processes of a paired round take their samples in turns.

A paired round measures the baseline's process and the library's. Back to back, their
samples lie a second or more apart (the second process's start and import between them),
and on a machine whose speed moves within seconds the two sides see different speeds: on the
2-core machine of docs/performance.md, half-second blocks of one NumPy process spread 8.5 to
9.6%. In lockstep (``replicates.lockstep``) the supervisor starts both processes, one after
the other, and each imports, loads, compiles, makes its first call and calibrates while the
other waits; then the samples are taken in turns, one of each side per turn in a seeded
random order, so each side's samples lie milliseconds from the other's; then each process in
turn finishes alone (its pipelined loop and transfers, its output check). Exactly one of
the two runs at any moment; the other waits on a pipe (at more than one thread, a library's
idle thread pools may spin for a moment after its turn). Each library is still alone in its own
fresh process, with its own import, first call and calibration.

The protocol, one line per message over two pipes whose descriptors the worker finds in
``TURNS_ENV`` ("read,write"):

- the worker says ``ready`` once calibrated, then waits;
- the supervisor says ``sample``: the worker takes one sample and says ``more`` or, once its
  own stopping rule is met (``min_samples`` taken and ``budget_s`` of its own samples
  spent, or ``max_samples``), ``enough``, and waits again;
- the supervisor says ``go``: the worker takes whatever samples it still needs without
  waiting and goes on to the end. It is said to a worker whose partner has ended or said
  ``enough``, and to one that has said ``enough`` once its partner has finished.

The end of the pipe (a supervisor gone) reads as ``go``. Each turn begins with an untimed
tenth of a sample's calls (none when a sample is under 10 calls, whose calls are long), so
caches and threads the partner's turn took over are back before the timed calls, as they
are for a sample that follows its own process's last one. The time spent waiting is not the
worker's: ``numbench.cpu_taken`` is paused while it waits, and ``budget_s`` counts its own
samples only.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

TURNS_ENV = "NUMBENCH_TURNS"
READY, SAMPLE, MORE, ENOUGH, GO = "ready", "sample", "more", "enough", "go"
#: the untimed calls that open a turn, as a share of a sample's calls
WARM_SHARE = 10


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
        #: paused while the worker waits for its turn (``numbench.cpu_taken.CpuTaken``)
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

    def take_samples(self, settings, time_loops: Callable[[int], float], loops: int) -> list[float]:
        """Samples of ``loops`` calls (seconds per call) in turns, by the same stopping rule
        as ``Timer.take_samples`` with ``budget_s`` counted on this process's samples only."""
        samples: list[float] = []
        spent = 0.0
        said = READY
        alone = False
        while True:
            if not alone:
                if self._hand_over(said) != SAMPLE:
                    alone = True  # go: the partner is done or gone
                elif loops >= WARM_SHARE:
                    time_loops(loops // WARM_SHARE)
            t0 = self.clock()
            samples.append(time_loops(loops) / loops)
            spent += self.clock() - t0
            if len(samples) >= settings.max_samples or (
                len(samples) >= settings.min_samples and spent >= settings.budget_s
            ):
                break
            said = MORE
        if not alone:
            while self._hand_over(ENOUGH) != GO:
                pass  # never asked for another sample after enough: still waiting for go
        return samples
