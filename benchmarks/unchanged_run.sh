#!/usr/bin/env bash
# One run of the default grid of a fixed commit, for the history's gate on unchanged code
# (benchmarks/gate_pairs.py; docs/history.md, "The gate on runs of unchanged code").
#
#     bash benchmarks/unchanged_run.sh COMMIT DIR
#
# DIR (new) gets a fresh copy of COMMIT (git archive), and `snakemake --cores 1` runs the
# default grid in it with this checkout's .venv (make venv), the copy's own src/ first on
# PYTHONPATH, so edits to this checkout during the run change nothing it measures. DIR/run.txt
# gets the commit, the start and end (UTC), the wall seconds, the load average before and
# after, and Snakemake's exit status; DIR/snakemake.log its output. Run nothing else on the
# machine meanwhile: the run's own rule counts the cells other processes disturbed.
set -euo pipefail
if [ $# -ne 2 ]; then
    echo "usage: bash benchmarks/unchanged_run.sh COMMIT DIR" >&2
    exit 2
fi
commit=$1
dir=$2
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
    echo "start $(date -u +%FT%TZ)"
    echo "load_before $(cut -d' ' -f1-3 /proc/loadavg)"
} >run.txt
t0=$(date +%s)
set +e
PYTHONPATH="$dir/src" PATH="$bin:$PATH" "$bin/snakemake" --cores 1 >snakemake.log 2>&1
rc=$?
set -e
{
    echo "end $(date -u +%FT%TZ)"
    echo "wall_s $(($(date +%s) - t0))"
    echo "load_after $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "exit $rc"
} >>run.txt
exit $rc
