#!/usr/bin/env bash
# One run of a fixed commit from a fresh copy: the default grid, for the history's gate on
# unchanged code (benchmarks/gate_pairs.py; docs/history.md, "The history gate"), or another
# grid, for two engines side by side (benchmarks/engine_ab.py).
#
#     bash benchmarks/unchanged_run.sh COMMIT DIR [CONFIG]
#
# DIR (new) gets a fresh copy of COMMIT (git archive), and `snakemake --cores 1` runs the
# default grid in it (given CONFIG, a path inside the copy such as
# benchmarks/engine_grid.yaml, that grid instead) with this checkout's .venv (make venv), the
# copy's own src/ first on
# PYTHONPATH, so edits to this checkout during the run change nothing it measures. DIR/run.txt
# gets the commit, the start and end (UTC), the wall seconds, the load average before and
# after, and Snakemake's exit status; DIR/snakemake.log its output. Run nothing else on the
# machine meanwhile: the run's own rule counts the cells other processes disturbed.
set -euo pipefail
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
    echo "usage: bash benchmarks/unchanged_run.sh COMMIT DIR [CONFIG]" >&2
    exit 2
fi
commit=$1
dir=$2
config=(${3:+--configfile "$3"})
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$here/.venv/bin
[ -x "$bin/snakemake" ] || { echo "no $bin/snakemake: run make venv first" >&2; exit 2; }
[ ! -e "$dir" ] || { echo "$dir exists: give a new folder" >&2; exit 2; }
full=$(git -C "$here" rev-parse --verify "$commit^{commit}")
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
git -C "$here" archive "$full" | tar -x -C "$dir"
cd "$dir"
{
    echo "commit $full"
    echo "config ${3:-config/config.yaml}"
    echo "start $(date -u +%FT%TZ)"
    echo "load_before $(cut -d' ' -f1-3 /proc/loadavg)"
} >run.txt
t0=$(date +%s)
set +e
PYTHONPATH="$dir/src" PATH="$bin:$PATH" "$bin/snakemake" --cores 1 "${config[@]}" >snakemake.log 2>&1
rc=$?
set -e
{
    echo "end $(date -u +%FT%TZ)"
    echo "wall_s $(($(date +%s) - t0))"
    echo "load_after $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "exit $rc"
} >>run.txt
exit $rc
