"""The history store's two tables: their columns and what each means (docs/results-history.md).

Text that holds several values (the library versions, the roofs) is JSON, so that every
reader (pyarrow, pandas, DuckDB) reads the columns as they are.
"""

from __future__ import annotations

import pyarrow as pa

from numbench.cells import KEY_WITH_HOST
from numbench.contract import key_fields

#: one row per run: one host's cells of one results folder
RUNS_SCHEMA = pa.schema(
    [
        # the run's id: a hash of its cells' content (``numbench.history.ingest.run_id``)
        pa.field("run_id", pa.string()),
        # when its first cell started and its last one started (ISO 8601, UTC)
        pa.field("started_at", pa.string()),
        pa.field("finished_at", pa.string()),
        # when it was added to the store, and by which numbench (version, git commit)
        pa.field("added_at", pa.string()),
        pa.field("numbench_version", pa.string()),
        pa.field("numbench_commit", pa.string()),
        # a hash of the grid's settings as the cells recorded them: cell keys, parameters,
        # the operations' code, timing, replicate and allocator settings, pairing
        pa.field("config_hash", pa.string()),
        # every library's version, as JSON {"numpy": "2.4.0", ...}
        pa.field("library_versions", pa.string()),
        # the host's fingerprint
        pa.field("host", pa.string()),
        pa.field("cpu_model", pa.string()),
        pa.field("cpu_count", pa.int64()),
        pa.field("ram_gb", pa.float64()),
        pa.field("kernel", pa.string()),
        pa.field("platform", pa.string()),
        pa.field("python_version", pa.string()),
        # the CPU frequency governor, read when the run is added on the host that measured
        # it (null elsewhere, or where it cannot be read)
        pa.field("governor", pa.string()),
        # the run's roofs (results/roofs.parquet, its ok rows), as JSON; null without roofs
        pa.field("roofs", pa.string()),
        # the run's quality: cells, ok cells, unstable cells, cells measured on a busy
        # machine; verdicts over the baseline, those in doubt, and the predicted share a
        # rerun repeats (mean of speedups.parquet's repeat_chance); null without speedups
        pa.field("cells", pa.int64()),
        pa.field("cells_ok", pa.int64()),
        pa.field("cells_unstable", pa.int64()),
        pa.field("cells_busy", pa.int64()),
        pa.field("verdicts", pa.int64()),
        pa.field("verdicts_in_doubt", pa.int64()),
        pa.field("predicted_repeat", pa.float64()),
        # the sentinel's spread through the run: the slowest cell's sentinel_s over the
        # fastest's (numbench.measure.activity.time_sentinel); null below two cells that timed it, and in
        # a run added before it was kept (ADDED_LATER)
        pa.field("sentinel_spread", pa.float64()),
    ]
)

#: one row per cell of a run
CELLS_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string()),
        *key_fields(KEY_WITH_HOST),
        pa.field("status", pa.string()),
        pa.field("library_version", pa.string()),
        # the median time per call and its 95% interval (benchmarks.parquet)
        pa.field("median_s", pa.float64()),
        pa.field("ci_low_s", pa.float64()),
        pa.field("ci_high_s", pa.float64()),
        pa.field("n_samples", pa.int64()),
        # processes the statistics pool (``n_processes``) and rounds of the cell's own
        # library that ran (``replicates`` of benchmarks.parquet)
        pa.field("replicates", pa.int64()),
        pa.field("rounds", pa.int64()),
        pa.field("unstable", pa.bool_()),
        pa.field("process_spread", pa.float64()),
        pa.field("cpu_taken", pa.float64()),
        pa.field("started_at", pa.string()),
        # the baseline pairing: the baseline run beside the cell, and its speedup over the
        # baseline with the interval and verdict (speedups.parquet; null without)
        pa.field("paired_with", pa.string()),
        pa.field("paired", pa.bool_()),
        pa.field("speedup", pa.float64()),
        pa.field("speedup_ci_low", pa.float64()),
        pa.field("speedup_ci_high", pa.float64()),
        pa.field("verdict", pa.string()),
    ]
)
#: a cell's series in the store: its key on its host
SERIES_KEY = list(KEY_WITH_HOST)

#: columns added to the tables after the store's format was fixed: a file written before
#: them reads with them null, instead of being skipped for lacking them
ADDED_LATER = frozenset({"sentinel_spread"})
