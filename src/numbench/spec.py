"""What goes into a cell and what comes out of it: one typed object each.

``CellSpec`` is built once from the validated config (``numbench.config.cell_spec``), handed
by the ``cell`` rule to the supervisor as one JSON text, and by the supervisor to each worker
as the same JSON. Nothing on the way restates a default: every field the workflow sets is
required, and the defaults live in the config schema and ``config/config.yaml`` alone.
What only decides how a job waits or reports, not what it measures (the timing lock's
``lock_timeout_s``), stays out of the spec, so that changing it remeasures nothing.

``ReplicateSettings`` is the config's ``replicates`` section as a spec holds it: how many
worker processes a cell runs, when it stops adding rounds, and the names two of its settings
are stored under (``STORED_NAMES``); ``TimingSettings`` (``numbench.timing``) is its
``timing`` section, beside the loop it steers.

``ProcessReport`` is what one worker process reports (its samples and what it saw);
``CellMeta`` is what the supervisor adds about the host and the run. The cell file's columns
are derived from these dataclasses (``numbench.contract``), so a field cannot be added to one
and forgotten in the other.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from numbench.timing import TimingSettings

#: What a cell file holds, as a number: raised whenever a cell measures something new or its
#: columns change (2: pipelined samples and transfers; 3: the allocator's settings; 4: the
#: CPUs each worker really had, ``cpus_allowed``; 5: the hash of the operation's code,
#: ``operation_hash``, and the inputs checked after the timed loop; 6: the bytes of a call's
#: output, ``output_bytes``; 7: whether the kernel came compiled, ``as_is``, the seed of its
#: inputs, ``seed``, or the file they were read from, ``inputs_from``, the library's compile
#: options, ``options``, whether the operation's flop count is exact, ``flops_exact``, which
#: decides whether a cell past its roof found the roof low or the cost model wrong, what the
#: machine did while the cell measured, ``other_cpu_share``, ``steal_share`` and
#: ``load_avg_1m``, whether the time cap stopped it, ``capped``, and its wait for quiet,
#: ``quiet_wait_s`` and ``quiet_reached``; 8: the sentinel's time just before the cell
#: measured, ``sentinel_s``; 9: the share of the CPUs' time the workflow's own processes took,
#: Snakemake's scheduler above all, ``workflow_cpu_share``, no longer counted in
#: ``other_cpu_share``; 10: those processes kept off the CPUs the workers are timed on while
#: the cell measures, ``workflow_moved``; 11: how each worker started, ``worker_start``, and
#: the import it paid itself, ``import_paid_s``; 12: whether a process compiled for its cell or
#: loaded what an earlier round compiled, ``compile_cache``). It is
#: part of the spec, so the rule's parameters change with it and Snakemake remeasures cells
#: an older numbench wrote.
CELL_CONTRACT = 12

STATUSES = ("ok", "mismatch", "unsupported", "unavailable", "failed", "timeout", "crashed")

#: the supervisor's pid, in its worker's environment: a worker whose parent is already another
#: process (its supervisor died before it asked to die with it) exits at once
SUPERVISOR_ENV = "NUMBENCH_SUPERVISOR_PID"
#: the worker's exit status when it cannot read its spec or write its report (EX_TEMPFAIL of
#: sysexits.h): a fault of the machinery, which the supervisor never stores as the library's
MACHINERY_FAULT_EXIT = 75


#: The names two replicate settings are stored under, in a cell's spec (the rules' parameter,
#: the round files, an offsite plan) and its ``replicate_settings`` column: the config keys
#: they had before each word of the config was given one meaning (``replicates.margin``,
#: ``replicates.spread``; ``numbench.config.RENAMED_KEYS``). Kept so that a spec is
#: the same text as before, and the cells, history runs and plans made before keep the same
#: settings: Snakemake measures no cell again for the new names, and the history store's
#: config hash and ``numbench compare`` see the same grid.
STORED_NAMES = {"stop_margin": "margin", "early_rounds": "spread"}


@dataclass(frozen=True)
class ReplicateSettings:
    """The ``replicates`` section of the config: how many worker processes a cell runs. No
    defaults here: they live in the config schema and ``config/config.yaml`` alone."""

    #: processes always run
    min: int
    #: processes never exceeded
    max: int
    #: after ``min``, an unpaired cell adds processes until the 95% interval of its median is
    #: within this relative half-width, or ``max`` is reached
    target_ci: float
    #: the stopping margin (``replicates.stop_margin``): a paired speedup whose whole interval
    #: lies beyond it is settled. Not the report's margin, which changes no cell
    stop_margin: float
    #: the early rounds (``replicates.early_rounds``): the first rounds, each measured by a job
    #: of its own scheduled before every cell's remaining rounds, so that a cell's rounds lie
    #: minutes apart (``numbench.measure.replicates``)
    early_rounds: int
    #: after ``min``, a paired cell adds rounds while its speedup's verdict is in doubt: while
    #: its interval, widened to at least ``1.96 * round_sd / sqrt(rounds)`` in log terms,
    #: holds ``stop_margin`` or ``1 / stop_margin`` (``numbench.stats.verdict_settled``);
    #: the run's own round spread takes its place once enough cells have finished
    #: (``numbench.measure.replicates.run_round_sd``)
    round_sd: float
    #: a round with a process whose CPUs other programs used more than this share of while it
    #: measured (``ProcessReport.cpu_taken``) is measured again, up to ``CPU_TAKEN_RETRIES``
    #: times; None measures every round once, busy machine or not
    max_cpu_taken: float | None
    #: a paired round starts both processes and takes their samples in turns
    #: (``numbench.measure.lockstep``) instead of running them back to back
    lockstep: bool
    #: a cell that has spent this many seconds on its rounds adds no further round (its
    #: first always runs; ``numbench.measure.replicates.capped``); None: no cap
    max_cell_s: float | None

    def __post_init__(self) -> None:
        if not 1 <= self.min <= self.max:
            raise ValueError("need 1 <= replicates.min <= replicates.max")
        if not 0 <= self.early_rounds <= self.min:
            raise ValueError("need 0 <= replicates.early_rounds <= replicates.min")
        if not self.round_sd >= 0:
            raise ValueError("need replicates.round_sd >= 0")
        if self.max_cpu_taken is not None and not self.max_cpu_taken > 0:
            raise ValueError("need replicates.max_cpu_taken > 0 (or null)")
        if self.max_cell_s is not None and not self.max_cell_s > 0:
            raise ValueError("need replicates.max_cell_s > 0 (or null)")

    def to_dict(self) -> dict[str, Any]:
        """The settings under their stored names (``STORED_NAMES``), as a cell's spec and its
        ``replicate_settings`` column hold them."""
        return {STORED_NAMES.get(k, k): v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReplicateSettings:
        """The settings from a dict under either their stored or their own names (not both)."""
        own = {stored: name for name, stored in STORED_NAMES.items()}
        twice = sorted(k for k in data if k in own and own[k] in data)
        if twice:
            raise ValueError(f"replicate settings: {twice} given under both names")
        return cls(**{own.get(k, k): v for k, v in data.items()})


@dataclass(frozen=True)
class Environment:
    """One of the config's ``environments``: where a cell of library versions side by side
    runs (``numbench.config.environments``). The base environment is no ``Environment``."""

    #: its name in the config (and in the cell's paths: ``numpy@NAME``)
    name: str
    #: the requirement pins layered on the base set, as written in the config
    pins: list[str]
    #: the interpreter of its virtual environment (relative to the workflow's folder), or
    #: None where it pins nothing and runs the base interpreter
    python: str | None
    #: environment variables set in its worker processes
    variables: dict[str, str]


@dataclass(frozen=True)
class CellSpec:
    library: str
    device: str
    operation: str
    #: the user's file that defines the operation (absolute; in an offsite plan, its place
    #: in the bundle), or None for one found by name (built in, or installed)
    operation_file: str | None
    #: SHA-256 of the operation's code: its file and the files it imports from its own
    #: folder (``numbench.operations.loading``). Editing them changes the spec of that
    #: operation's cells alone, so Snakemake measures those again
    operation_hash: str
    size: int
    dtype: str
    threads: int
    #: the inputs file (seeded arrays and the float64 reference)
    inputs: str
    #: the operation's parameters (``operations.<name>.<key>`` in the config)
    params: dict[str, Any]
    timing: TimingSettings
    #: a worker still running after this long is killed (status ``timeout``)
    timeout_s: float
    #: RSS limit of the worker (and its children) in MB; None: no limit
    memory_limit_mb: float | None
    #: the C allocator's settings in every worker: "steady" or "system"
    #: (``numbench.libraries.allocator_environment``)
    allocator: str
    replicates: ReplicateSettings
    #: the baseline measured beside this cell, process for process ("numpy/cpu"), or None
    #: (the baseline cell itself, or pairing switched off)
    paired_with: str | None
    #: ``CELL_CONTRACT`` of the numbench that built the spec
    contract: int
    #: the environment the cell runs in, or None for the base one. The one field with a
    #: default: left out of the JSON when None, so a grid without environments keeps the
    #: specs (and the measured cells) it had
    environment: Environment | None = None
    #: the seed its inputs were drawn with (``numbench.config.operations.operation_seed``),
    #: recorded in the cell's ``seed`` column; None where they are read from a file, or in a
    #: spec that does not say
    seed: int | None = None
    #: the user's file its inputs were read from (``operations.NAME.inputs``), or None where
    #: they were drawn; recorded in the cell's ``inputs_from`` column
    inputs_from: str | None = None
    #: the adapter a variant library runs (``variants.NAME.library``: ``numba`` for a
    #: ``numba-parallel``), or None where ``library`` is an adapter's own name
    adapter: str | None = None
    #: compile options the config gives for this cell's library (its ``operations.NAME.options``
    #: and its variant's), over the operation's own (``numbench.operations.kernels``)
    options: dict[str, Any] = field(default_factory=dict)
    #: the compile options the config gives the baseline library paired beside this cell
    #: (its ``paired_spec``'s ``options``, where that is another library)
    paired_options: dict[str, Any] = field(default_factory=dict)
    #: how its workers start (``worker_start``): "fork" from a process that has imported the
    #: library (``numbench.measure.zygote``), or "exec", a fresh interpreter each
    worker_start: str = "exec"
    #: whether its processes share their library's compilations (``compile_cache``): "none",
    #: or "cell", a persistent compilation cache per cell and run
    #: (``numbench.measure.compile_cache``)
    compile_cache: str = "none"

    @property
    def adapter_name(self) -> str:
        """The library adapter that runs the cell (``numbench.libraries``)."""
        return self.adapter or self.library

    @property
    def key(self) -> dict[str, Any]:
        return {
            "library": self.library,
            "device": self.device,
            "operation": self.operation,
            "size": int(self.size),
            "dtype": self.dtype,
        }

    @property
    def interpreter(self) -> str | None:
        """The environment's interpreter, or None for the one running the supervisor."""
        return self.environment.python if self.environment is not None else None

    def to_json(self) -> str:
        data = asdict(self)
        data["replicates"] = self.replicates.to_dict()
        if self.environment is None:
            del data["environment"]
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CellSpec:
        names = {f.name for f in fields(cls)}
        required = {f.name for f in fields(cls) if f.default is MISSING}
        missing, unknown = sorted(required - set(data)), sorted(set(data) - names)
        if missing or unknown:
            raise ValueError(f"cell spec: missing fields {missing}, unknown fields {unknown}")
        timing, replicates = data["timing"], data["replicates"]
        environment = data.get("environment")
        if not isinstance(timing, TimingSettings):
            timing = TimingSettings(**timing)
        if not isinstance(replicates, ReplicateSettings):
            replicates = ReplicateSettings.from_dict(replicates)
        if environment is not None and not isinstance(environment, Environment):
            environment = Environment(**environment)
        return cls(
            **{
                **data,
                "timing": timing,
                "replicates": replicates,
                "size": int(data["size"]),
                "environment": environment,
            }
        )

    def paired_spec(self) -> CellSpec | None:
        """The spec of the baseline processes measured beside this cell's, or None. A cell
        of an environment is paired with its library in the base environment."""
        if self.paired_with is None:
            return None
        library, device = self.paired_with.split("/")
        same = library == self.library  # an environment's cell: its library in the base one
        return self.replace(
            library=library,
            device=device,
            paired_with=None,
            environment=None,
            adapter=self.adapter if same else None,
            options=self.options if same else self.paired_options,
            paired_options={},
            # the partner's first call is not the cell's: it compiles afresh, and never
            # shares the baseline cell's own folder (``compile_cache``)
            compile_cache="none",
        )

    @classmethod
    def from_json(cls, text: str) -> CellSpec:
        return cls.from_dict(json.loads(text))

    def replace(self, **changes: Any) -> CellSpec:
        return CellSpec.from_dict({**asdict(self), **changes})


@dataclass
class ProcessReport:
    """One worker process: how it ended, its samples, and what it saw of the library."""

    status: str
    error: str | None = None
    import_s: float | None = None
    #: the part of ``import_s`` this process paid itself: all of it in a fresh process; in
    #: one forked from a zygote, its own rest of the import (and the zygote's import for the
    #: zygote's first worker)
    import_paid_s: float | None = None
    #: how the process started (``worker_start``): "fork" from a zygote that had imported
    #: the library, or "exec", a fresh interpreter ("exec: why" where a fork was asked for)
    worker_start: str | None = None
    #: where the cell's compilations are shared (``compile_cache: cell``) and its library
    #: compiles: "cold" (this process compiled them, into the cell's empty folder) or "warm"
    #: (it loaded an earlier process's); None where nothing is shared
    compile_cache: str | None = None
    first_call_s: float | None = None
    #: seconds the worker spent calibrating and sampling per call (latency)
    sampling_s: float | None = None
    rel_error: float | None = None
    tolerance: float | None = None
    library_version: str | None = None
    device_name: str | None = None
    device_details: str | None = None
    blas: str | None = None
    peak_rss_mb: float | None = None
    device_peak_mb: float | None = None
    #: threads the library really ran with (what it reports), which may differ from those asked
    threads_used: int | None = None
    #: set where ``threads_used`` differs from the cell's threads ("asked for 2, torch runs 1"),
    #: or where the worker had fewer CPUs than threads
    threads_note: str | None = None
    #: CPUs the worker could run on once pinned to the cell's threads (its affinity mask):
    #: the threads it really got. Fewer than ``threads`` where the job (a cluster's
    #: allocation, a cgroup) or the host gave fewer CPUs than the config asks
    cpus_allowed: int | None = None
    #: "asynchronous" (calls return before their work is done: timed per call and pipelined)
    #: or "synchronous" (the two coincide: timed once)
    dispatch: str | None = None
    #: seconds the worker spent calibrating and sampling the pipelined loop (its cost)
    pipelined_sampling_s: float | None = None
    #: results a pipelined loop held alive at once (its queue's depth)
    pipelined_window: int | None = None
    #: relative error of the pipelined loop's last result against the reference
    pipelined_rel_error: float | None = None
    #: placing every input on the device / reading the result back, synced, median of a few
    #: repeats, apart from the samples; null on the CPU (nothing moved)
    h2d_s: float | None = None
    d2h_s: float | None = None
    h2d_bytes: int | None = None
    d2h_bytes: int | None = None
    #: share of the process's CPUs' time that something else used (other programs, or the host
    #: of a virtual machine) while it measured its latency (first call, calibration, samples;
    #: ``numbench.measure.cpu_taken``); null where the OS does not tell
    cpu_taken: float | None = None
    #: attempts at this process's round set aside before it, because other programs took
    #: more than ``replicates.max_cpu_taken`` of a process's CPUs (``numbench.measure.replicates.measure_round``)
    set_aside: int | None = None
    #: bytes of one call's output as the library returned it (every array of it): what the
    #: roofline's first-touch estimate counts as fresh memory (``roofline.analyse``)
    output_bytes: int | None = None
    #: True where the builder handed its kernel over as it is (``numbench.as_is``: compiled
    #: its own way, neither compiled nor wrapped by numbench), False where numbench compiled
    #: what the builder returned (``jax.jit``, ``tf.function``, ``numba.njit``, or eager);
    #: null where the cell ended before its kernel was built
    as_is: bool | None = None
    #: calls per sample
    loops: int | None = None
    #: seconds per call, one per sample: every call waited for (latency)
    samples_s: list[float] = field(default_factory=list)
    #: calls per pipelined sample, and its seconds per call: calls queued back to back, one
    #: sync per sample (asynchronous libraries only)
    pipelined_loops: int | None = None
    pipelined_samples_s: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProcessReport:
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"worker report: unknown fields {unknown}")
        return cls(**data)


@dataclass
class CellMeta:
    """What the supervisor records about the host and the run (the same on every row)."""

    #: the cell's status and error: the first process that was not ``ok`` decides them
    status: str | None = None
    error: str | None = None
    #: worker processes of the cell's own library that ran (replicates)
    replicates: int | None = None
    #: the baseline measured beside the cell ("numpy/cpu"), or None
    paired_with: str | None = None
    #: paired: whether the rounds took their samples in turns (``replicates.lockstep``) or
    #: ran back to back; None for a cell measured alone
    lockstep: bool | None = None
    params: str | None = None
    #: the hash of the operation's code the cell was measured with (``CellSpec.operation_hash``)
    operation_hash: str | None = None
    #: the seed the cell's inputs were drawn with (``CellSpec.seed``)
    seed: int | None = None
    #: the user's file the cell's inputs were read from (``CellSpec.inputs_from``)
    inputs_from: str | None = None
    #: the compile options the library ran with, as sorted JSON ("" where none)
    options: str | None = None
    host: str | None = None
    cpu_model: str | None = None
    threads: int | None = None
    #: the config's ``allocator`` the workers ran with ("steady" or "system")
    allocator: str | None = None
    #: the timing and replicate settings the cell was measured with, as sorted JSON:
    #: ``compare`` marks a cell whose two sides were measured with different ones
    timing_settings: str | None = None
    replicate_settings: str | None = None
    python_version: str | None = None
    #: the interpreter that ran the worker (the environment's ``python``)
    python_executable: str | None = None
    platform: str | None = None
    flops: float | None = None
    bytes: float | None = None
    #: the operation's ``flops_exact`` where it gives flops (``numbench.roofline.analyse``)
    flops_exact: bool | None = None
    gflop_per_s: float | None = None
    gb_per_s: float | None = None
    wall_s: float | None = None
    started_at: str | None = None
    #: when the first of the cell's jobs (its early rounds' and its own) started, its process
    #: (Unix seconds): where the run's time line begins
    jobs_from_unix: float | None = None
    cpu_count: int | None = None
    ram_gb: float | None = None
    #: when this cell held the host's timing lock (Unix seconds): shows cells never overlap
    locked_from_unix: float | None = None
    locked_until_unix: float | None = None
    #: the whole machine while the cell held the lock (``numbench.measure.activity``): other
    #: processes' share of all CPUs' time, the hypervisor's (steal), the 1-minute load after
    other_cpu_share: float | None = None
    #: the workflow's own processes' share (Snakemake's, and the shells between it and the
    #: cell's job), taken out of ``other_cpu_share``
    workflow_cpu_share: float | None = None
    #: whether those processes were kept off the CPUs the cell's workers were timed on
    #: (``numbench.measure.apart``): False where they could not be (no other CPU), None
    #: where nothing was tried (no Snakemake above the cell's job)
    workflow_moved: bool | None = None
    steal_share: float | None = None
    load_avg_1m: float | None = None
    #: whether ``replicates.max_cell_s`` stopped the cell before its stopping rule did (None:
    #: no cap was set)
    capped: bool | None = None
    #: seconds the cell waited, lock held, for other processes to quiet down before it
    #: measured (``wait_for_quiet``; its early rounds' waits included), and whether they did
    #: (None: no wait asked, or the machine could not be read)
    quiet_wait_s: float | None = None
    quiet_reached: bool | None = None
    #: the sentinel (``numbench.measure.activity.time_sentinel``: a fixed sort, the same in every run),
    #: fastest of its calls timed by the cell's job, lock held, just before it measured: the
    #: run's cells in ``locked_from_unix`` order are a series of the machine's speed (None:
    #: not timed, no NumPy)
    sentinel_s: float | None = None
