"""The grid: every cell a validated config asks for, the spec each one runs from, and the
seeded order the rules follow."""

from __future__ import annotations

import random

from numbench import inputs_file, libraries, operations
from numbench.cells import Cell, inputs_path
from numbench.config.dims import adapter_of, cell_options
from numbench.config.environments import environment
from numbench.config.operations import (
    operation_found,
    operation_inputs_from,
    operation_params,
    operation_seed,
)
from numbench.spec import CELL_CONTRACT, CellSpec, ReplicateSettings
from numbench.timing import TimingSettings

DEVICES = ("cpu", "gpu")


def job_order(cfg: dict, cells: list[Cell]) -> dict[str, int]:
    """A seeded random rank (0 .. len - 1) for every cell, by its path.

    The rules' priorities follow it within each stage (early rounds, then cells), so the
    grid runs interleaved (operations and libraries mixed, as Google Benchmark's random
    interleaving does) and a slow period of the machine spreads over many groups instead of
    landing on one; the seed keeps a rerun's order.
    """
    paths = sorted(cell.path for cell in cells)
    random.Random(cfg["seed"]).shuffle(paths)
    return {path: rank for rank, path in enumerate(paths)}


def operation_file(cfg: dict, name: str) -> str | None:
    """The user's file of an operation (its absolute path), or None where it is found by
    name (built in, or installed)."""
    return (cfg["operations"][name] or {}).get("module")


def operation_hash(cfg: dict, name: str) -> str:
    """The hash of an operation's code (``numbench.operations.sources``)."""
    return operation_found(cfg, name).sha256


def operation_params_json(cfg: dict, name: str) -> str:
    """The same, as the canonical JSON text the rules pass on ("" when it has none)."""
    return operations.params_json(operation_params(cfg, name))


def cell_spec(cfg: dict, cell: Cell) -> CellSpec:
    """The one spec a cell's supervisor and workers run from, built from the validated config."""
    reps, base = cfg["replicates"], cfg["baseline"]
    is_baseline = (cell.library, cell.device) == (base["library"], base["device"])
    # a cell of an environment is paired with its library in the base environment
    partner = f"{cell.library}/{cell.device}" if cell.environment else None
    from_file = operation_inputs_from(cfg, cell.operation)
    if partner is None and not is_baseline:
        partner = f"{base['library']}/{base['device']}"
    return CellSpec(
        library=cell.library,
        device=cell.device,
        operation=cell.operation,
        operation_file=operation_file(cfg, cell.operation),
        operation_hash=operation_hash(cfg, cell.operation),
        size=cell.size,
        dtype=cell.dtype,
        threads=int(cell.threads),
        inputs=inputs_path(cell.operation, cell.size),
        params=operation_params(cfg, cell.operation),
        seed=None if from_file else operation_seed(cfg, cell.operation),
        inputs_from=from_file and str(inputs_file.file_for(from_file, cell.size)),
        adapter=None
        if adapter_of(cfg, cell.library) == cell.library
        else adapter_of(cfg, cell.library),
        options=cell_options(cfg, cell.operation, cell.library),
        paired_options=cell_options(cfg, cell.operation, base["library"])
        if partner is not None and not cell.environment
        else {},
        timing=TimingSettings(**cfg["timing"]),
        timeout_s=float(cfg["cell_timeout_s"]),
        memory_limit_mb=cfg["cell_memory_limit_mb"],
        allocator=cfg["allocator"],
        worker_start=cfg["worker_start"],
        compile_cache=cfg["compile_cache"],
        replicates=ReplicateSettings(
            min=reps["min"],
            max=reps["max"],
            target_ci=float(reps["target_ci"]),
            stop_margin=float(reps["stop_margin"]),
            early_rounds=reps["early_rounds"],
            round_sd=float(reps["round_sd"]),
            max_cpu_taken=None if reps["max_cpu_taken"] is None else float(reps["max_cpu_taken"]),
            lockstep=bool(reps["lockstep"]),
            max_cell_s=None if reps["max_cell_s"] is None else float(reps["max_cell_s"]),
        ),
        paired_with=partner if reps["paired"] else None,
        contract=CELL_CONTRACT,
        environment=environment(cfg, cell.environment) if cell.environment else None,
    )


def devices_for(cfg: dict) -> tuple[str, ...]:
    return DEVICES if cfg["device"] == "all" else (cfg["device"],)


def grid(cfg: dict) -> list[Cell]:
    """Every (library, device, operation, size, dtype, threads) cell of the config, plus the baseline cells.

    A library is placed only on the devices it can run on (NumPy has no GPU cells); the
    baseline library's cells on the baseline device are always included, so ``device=gpu``
    still gives speedups against NumPy on the CPU of the same host.

    Each of the config's ``environments`` adds its libraries' cells again, on the same
    devices, in that environment (``numbench.config.environments``).
    """
    wanted, base = devices_for(cfg), cfg["baseline"]
    placed = {(base["library"], base["device"], "")}
    for lib in cfg["libraries"]:
        devices = libraries.get(adapter_of(cfg, lib)).devices
        placed.update((lib, dev, "") for dev in wanted if dev in devices)
    for name, entry in cfg.get("environments", {}).items():
        own = set(entry["libraries"])
        placed.update((lib, dev, name) for lib, dev, env in list(placed) if not env and lib in own)
    return sorted(
        Cell(lib, dev, op, int(s), dt, th, env)
        for lib, dev, env in placed
        for op, entry in cfg["operations"].items()
        for s in entry["sizes"]
        for dt in cfg["dtype"]
        for th in cfg["threads"]
    )


def input_files(cfg: dict) -> list[str]:
    return sorted({inputs_path(op, s) for op, e in cfg["operations"].items() for s in e["sizes"]})
