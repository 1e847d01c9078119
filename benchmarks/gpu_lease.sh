#!/usr/bin/env bash
# One lease of a GPU host (docs/running.md, "A GPU run over several leases"): unpack the
# bundle of `numbench offsite plan --bundle`, run its plan for at most STOP_S seconds, going on
# from every earlier part, and leave the new part (and the run's output) in OUT.
#
#   bash gpu_lease.sh BUNDLE PARTS OUT [STOP_S]
#
# BUNDLE  the bundle made here (numbench's sources and the plan)
# PARTS   a folder holding every earlier part, part-01.tar.gz, part-02.tar.gz ... (may be empty)
# OUT     where the new part goes, named after the earlier ones (part-NN.tar.gz), with its log
# STOP_S  the time budget: no cell is begun past it, nor one that the longest so far says
#         would end past it (default 420: a 600 s call keeps 180 s for a cell's overrun, the
#         roofs of the last lease and the packing)
#
# Exit status: `offsite run`'s. 0 the plan is complete (import every part), 3 cells are left
# (another lease, with the new part added to PARTS), anything else an error, which its log
# names. Runs with the host's own Python ($PYTHON, default python3) and libraries: it needs
# numpy and pyarrow there, nothing else of the workflow's environment. Numba's CUDA cells need
# a NumPy below 2.5: PYTHON=.gpu-venv/bin/python runs the plan in the venv that
# `benchmarks/gpu_env.sh setup` makes there, the host's libraries behind it.
set -u
if [ $# -lt 3 ] || [ $# -gt 4 ]; then
    echo "usage: gpu_lease.sh BUNDLE PARTS OUT [STOP_S]" >&2
    exit 2
fi
bundle=$(realpath "$1") parts=$(realpath "$2") out=$(realpath -m "$3") stop=${4:-420}
python=${PYTHON:-python3}
# a path to an interpreter (a venv's) still names it once this script has changed folder; -s
# keeps the venv's own link rather than the interpreter it points to
case $python in */*) python=$(realpath -s "$python") ;; esac
[ -f "$bundle" ] || { echo "gpu_lease.sh: no bundle at $1" >&2; exit 2; }
[ -d "$parts" ] || { echo "gpu_lease.sh: no folder of earlier parts at $2" >&2; exit 2; }
mkdir -p "$out"
earlier=()
for part in "$parts"/part-*.tar.gz; do
    [ -e "$part" ] && earlier+=(--resume-from "$part")
done
name=$(printf 'part-%02d.tar.gz' $((${#earlier[@]} / 2 + 1)))
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
tar -xzf "$bundle" -C "$scratch" || { echo "gpu_lease.sh: cannot unpack $bundle" >&2; exit 2; }
cd "$scratch" || exit 2
# the plan is the bundle's one top-level JSON file, under the name it was planned with
plans=(*.json)
[ ${#plans[@]} -eq 1 ] && [ -f "${plans[0]}" ] || {
    echo "gpu_lease.sh: $1 holds no single plan (*.json at its top level)" >&2
    exit 2
}
PYTHONPATH=src "$python" -m numbench offsite run "${plans[0]}" --output "$out/$name" \
    --workdir "$scratch/work" --stop-after-s "$stop" "${earlier[@]}" 2>&1 |
    tee "$out/${name%.tar.gz}.log"
rc=${PIPESTATUS[0]}
case $rc in
    0) echo "gpu_lease.sh: the plan is complete; bring back $out/$name and import every part" ;;
    3) echo "gpu_lease.sh: cells are left; bring back $out/$name, add it to the parts, lease again" ;;
    *) echo "gpu_lease.sh: offsite run failed (exit $rc); see $out/${name%.tar.gz}.log" >&2 ;;
esac
exit "$rc"
