"""Moving data between the host and the device, timed apart from the samples.

The samples never hold a copy: inputs are placed on the device, and waited for, before
anything is timed, and results stay there. That is right for the compute figures, but "is it
worth moving my arrays to the GPU?" needs the other half of the cost. So a cell on a device
that does not compute in the host's memory also records, after its samples:

- ``h2d_s``: the time to place every input, already in the cell's dtype, on the device as the
  cell places them (the adapter's ``to_device``, which waits until the copy is complete),
  median of a few repeats after the first placement;
- ``d2h_s``: the time to bring a result back into a NumPy array (``to_numpy``), median of a
  few repeats, each reading a fresh result;
- ``h2d_bytes`` and ``d2h_bytes``: the bytes each way (the inputs in the cell's dtype, the
  result as it arrives on the host).

The first placement (the one the samples use) warms the path (CUDA context, pinned staging
buffers) and is not among the repeats; the output check has already read one result back.
On the CPU nothing is moved: the figures are null, not zero.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from numbench.timing import result_nbytes

#: timed placements and read-backs per process; the median of each is recorded
TRANSFER_REPEATS = 5


@dataclass(frozen=True)
class Transfers:
    h2d_s: float
    d2h_s: float
    h2d_bytes: int
    d2h_bytes: int


def measure(
    adapter: Any,
    inputs: Sequence[Any],
    fresh_result: Callable[[], Any],
    repeats: int = TRANSFER_REPEATS,
    clock: Callable[[], float] = time.perf_counter,
) -> Transfers:
    """Time placing ``inputs`` (host arrays) on the adapter's device and reading a result
    back, ``repeats`` times each; medians.

    The inputs are converted to the cell's dtype first, outside the timing (the inputs file
    is float64), so a placement times the copy to the device. ``fresh_result()`` makes a new,
    computed result on the device for each read-back, outside the timing: a JAX array keeps
    its host copy once made, so reading one array back twice would time a cache."""
    import numpy as np

    host = [np.ascontiguousarray(a, dtype=adapter.dtype) for a in inputs]
    h2d, d2h = [], []
    for _ in range(repeats):
        t0 = clock()
        placed = [adapter.to_device(a) for a in host]
        h2d.append(clock() - t0)
        del placed
    back = None
    for _ in range(repeats):
        result = fresh_result()
        t0 = clock()
        back = adapter.to_numpy(result)
        d2h.append(clock() - t0)
        del result
    return Transfers(
        h2d_s=statistics.median(h2d),
        d2h_s=statistics.median(d2h),
        h2d_bytes=sum(int(a.nbytes) for a in host),
        d2h_bytes=result_nbytes(back),
    )
