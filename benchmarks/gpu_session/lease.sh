#!/usr/bin/env bash
# Everything one GPU lease runs, in order, within DEADLINE_S seconds (docs/running.md, "A GPU
# run over several leases"):
#   1. the host: its GPU, CPUs and library versions, into the lease's log;
#   2. the carried environment (benchmarks/gpu_env.sh setup: Snakemake, NumPy 2.4 for numba-cuda);
#   3. the workflow itself there, on workflow.yaml (Numba's CUDA cells, PyTorch beside them),
#      its measuring jobs only, packed for the analysis here (OUT/workflow/);
#   4. each sweep's plan (a bundle made here by `numbench offsite plan --bundle`, one per
#      operation) run with benchmarks/gpu_lease.sh under what is left of the deadline, going on
#      from that sweep's earlier parts (OUT/SWEEP/part-NN.tar.gz and its log).
#
#   bash benchmarks/gpu_session/lease.sh LEASE OUT DEADLINE_S [SWEEP ...]
#
# LEASE  a folder made here: bundle-SWEEP.tar.gz for each sweep, parts-SWEEP/ with its earlier
#        parts (may be empty), .gpu-wheels beside the repository root as gpu_env.sh expects
# SWEEP  the sweeps in the order to run (default: batched_matmul mlp)
# Steps 2 and 3 are skipped with NO_WORKFLOW=1. SWEEP_S caps each sweep's budget, so that
# one sweep leaves time for the next (engine-after, then engine-before: engine.yaml). The
# host's own python3 runs the sweeps, as the earlier leases did; the workflow runs in the venv.
set -u
[ $# -ge 3 ] || { echo "usage: lease.sh LEASE OUT DEADLINE_S [SWEEP ...]" >&2; exit 2; }
lease=$(realpath "$1") out=$(realpath -m "$2") deadline=$3
shift 3
sweeps=("$@")
[ ${#sweeps[@]} -gt 0 ] || sweeps=(batched_matmul mlp)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$here" || exit 2
mkdir -p "$out"
started=$SECONDS
left() { echo $((deadline - (SECONDS - started))); }
say() { echo "lease.sh [$((SECONDS - started)) s] $*"; }

say "host: $(hostname), $(nproc) CPUs, kernel $(uname -r)"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader ||
    say "nvidia-smi failed"
python3 - <<'PY'
import importlib, sys
print("python", sys.version.split()[0], sys.executable)
for name in ("numpy", "pyarrow", "torch", "jax", "jaxlib", "cupy", "numba", "numba_cuda"):
    try:
        module = importlib.import_module(name)
        print(name, getattr(module, "__version__", "?"))
    except Exception as exc:
        print(name, "absent:", type(exc).__name__, exc)
PY

if [ "${NO_WORKFLOW:-0}" != 1 ]; then
    say "setup of the carried environment"
    bash benchmarks/gpu_env.sh setup .gpu-wheels .gpu-venv || say "setup failed"
    if [ -x .gpu-venv/bin/snakemake ]; then
        limit=$(($(left) / 4)); [ "$limit" -le 120 ] || limit=120
        say "the workflow on workflow.yaml, at most $limit s"
        # its own session, so that at the limit every process it started goes with it
        setsid bash benchmarks/gpu_env.sh run benchmarks/gpu_session/workflow.yaml \
            "$out/workflow" >/dev/null &
        pid=$!
        (sleep "$limit" && kill -TERM -- "-$pid" && sleep 10 && kill -KILL -- "-$pid") \
            2>/dev/null &
        watchdog=$!
        wait "$pid"
        say "the workflow exited $?"
        kill "$watchdog" 2>/dev/null
        [ -f "$out/workflow/results.tar.gz" ] || tar -czf "$out/workflow/results.tar.gz" results logs
    fi
fi

for sweep in "${sweeps[@]}"; do
    # 60 s kept for a cell's overrun and the packing of this part
    budget=$(($(left) - 60))
    [ -z "${SWEEP_S:-}" ] || [ "$budget" -le "$SWEEP_S" ] || budget=$SWEEP_S
    if [ "$budget" -lt 30 ]; then
        say "no time left for $sweep"
        continue
    fi
    mkdir -p "$lease/parts-$sweep"
    say "sweep $sweep, a budget of $budget s"
    bash benchmarks/gpu_lease.sh "$lease/bundle-$sweep.tar.gz" "$lease/parts-$sweep" \
        "$out/$sweep" "$budget" >/dev/null
    say "sweep $sweep exited $?"
    tail -n 4 "$out/$sweep"/part-*.log
done
say "done, $(left) s of the deadline left"
