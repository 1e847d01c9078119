#!/usr/bin/env bash
# The environment a lent GPU host lacks, carried to it as a folder of wheels (docs/running.md,
# "A GPU run over several leases"). The host has Python 3.12 with the GPU libraries, NumPy 2.5,
# pyarrow and pandas, but no Snakemake, no package index and no network; a call there carries at
# most 64 MiB of ignored paths. Three steps, and a look at the pins:
#
#   bash benchmarks/gpu_env.sh download [WHEELS]     # here, with an index: the wheelhouse
#   bash benchmarks/gpu_env.sh setup [WHEELS] [VENV] # there, offline: a venv over the host's
#   bash benchmarks/gpu_env.sh run CONFIGFILE OUT [SNAKEMAKE ARGUMENTS...]   # there: measure
#   bash benchmarks/gpu_env.sh pins [WHEELS]         # the pins, and Snakemake's requirements
#
# WHEELS  the wheelhouse (default .gpu-wheels, git-ignored: carry it to the host)
# VENV    the venv made there (default .gpu-venv): --system-site-packages, so that the host's
#         torch, jax, cupy, numba, pyarrow and pandas stay visible; only what is missing is
#         added, and NumPy below 2.5, which shadows the host's 2.5 (numba-cuda 0.30.4 fails
#         beside NumPy 2.5: np.row_stack; envs/requirements-cuda.txt says more)
# OUT     where `run` leaves results.tar.gz (results/ and logs/ of the run) and snakemake.log;
#         `run` takes the venv from $GPU_VENV (default .gpu-venv) and runs from the repository
#         root, its arguments after OUT passed on to Snakemake
#
# The wheelhouse holds Snakemake and its requirements, pinned as in envs/requirements-cpu.txt,
# and that file's NumPy, as wheels for CPython 3.12 on manylinux x86_64. Left out: PuLP (16 MB,
# Snakemake's ILP scheduler only; `run` asks for the greedy scheduler, and Snakemake imports
# PuLP only to use that one), and the analysis's packages (altair, vl-convert-python, ruptures
# and its SciPy: tens of MB): the measuring jobs run there, the analysis here, on the results
# `run` brings back. numbench is not a wheel: its source tree travels with the working copy,
# and the workflow and `python -m numbench` import it from src/.
#
# Exit status: 0 done; 1 a step failed (or the wheelhouse is over GPU_WHEELS_MAX_MIB, default
# 32); 2 a usage error. Python: $PYTHON (default python3).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${PYTHON:-python3}
cpu_set="$here/envs/requirements-cpu.txt"
#: Snakemake's requirements that are not carried (lowercase names, as in its metadata)
left_out="pulp"
#: pins of the CPU set that the index offers as source only: built into wheels here
source_only="connection_pool"
#: the target of `pip download`: CPython 3.12, manylinux x86_64. manylinux_2_28 too: NumPy 2.4's
#: cp312 wheels are tagged 2_27/2_28 only, as PyPI's torch wheels, which the host runs, are 2_28
target=(--only-binary=:all: --python-version 3.12 --implementation cp
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64
    --platform manylinux_2_28_x86_64 --platform any)
max_mib=${GPU_WHEELS_MAX_MIB:-32}

usage() {
    echo "usage: gpu_env.sh download [WHEELS] | setup [WHEELS] [VENV]" \
        "| run CONFIGFILE OUT [ARGS...] | pins [WHEELS]" >&2
    exit 2
}

# The pin of one package in the CPU set, as NAME==VERSION (names compared as pip does).
pin() {
    "$python" - "$cpu_set" "$1" <<'EOF'
import re, sys
norm = lambda name: re.sub(r"[-_.]+", "-", name).lower()
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    name, sep, version = line.partition("==")
    if sep and norm(name) == norm(sys.argv[2]):
        print(f"{name}=={version}")
        sys.exit(0)
sys.exit(f"gpu_env.sh: no pin of {sys.argv[2]} in {sys.argv[1]}")
EOF
}

# Snakemake's own requirements, read from its wheel, one a line: without extras' and without
# those left out.
requirements_of() {
    "$python" - "$1" "$left_out" <<'EOF'
import re, sys, zipfile
wheel, left_out = sys.argv[1], set(sys.argv[2].split())
with zipfile.ZipFile(wheel) as archive:
    metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
    lines = archive.read(metadata).decode().splitlines()
for line in lines:
    if not line.startswith("Requires-Dist:"):
        continue
    requirement = line.split(":", 1)[1].strip()
    if "extra ==" in requirement:
        continue
    name = re.match(r"[A-Za-z0-9._-]+", requirement).group(0)
    if re.sub(r"[-_.]+", "-", name).lower() not in left_out:
        print(requirement)
EOF
}

snakemake_wheel() {
    local found=("$1"/snakemake-"${snakemake_pin#*==}"-*.whl)
    [ -f "${found[0]}" ] || {
        echo "gpu_env.sh: no Snakemake wheel in $1" >&2
        return 1
    }
    echo "${found[0]}"
}

[ $# -ge 1 ] || usage
command=$1
shift
snakemake_pin=$(pin snakemake) || exit 1
numpy_pin=$(pin numpy) || exit 1

case $command in
    pins)
        [ $# -le 1 ] || usage
        echo "$snakemake_pin"
        echo "$numpy_pin"
        for name in $source_only; do pin "$name" || exit 1; done
        echo "left out: $left_out"
        if [ $# -eq 1 ]; then
            wheel=$(snakemake_wheel "$1") || exit 2
            requirements_of "$wheel" | sed 's/^/requires: /'
        fi
        ;;
    download)
        [ $# -le 1 ] || usage
        wheels=${1:-.gpu-wheels}
        mkdir -p "$wheels" || exit 1
        for name in $source_only; do
            "$python" -m pip wheel -q --no-deps -w "$wheels" "$(pin "$name")" || exit 1
        done
        "$python" -m pip download -q --no-deps "${target[@]}" -d "$wheels" "$snakemake_pin" ||
            exit 1
        wheel=$(snakemake_wheel "$wheels") || exit 1
        mapfile -t requirements < <(requirements_of "$wheel")
        [ ${#requirements[@]} -gt 0 ] || {
            echo "gpu_env.sh: no requirements read from $wheel" >&2
            exit 1
        }
        "$python" -m pip download -q "${target[@]}" -d "$wheels" --find-links "$wheels" \
            -c "$cpu_set" "$numpy_pin" "${requirements[@]}" || exit 1
        bytes=$(du -sb "$wheels" | cut -f1)
        mib=$(((bytes + 1048575) / 1048576))
        count=$(find "$wheels" -name '*.whl' | wc -l)
        echo "gpu_env.sh: $wheels holds $count wheels, $bytes bytes ($mib MiB)"
        if [ "$mib" -gt "$max_mib" ]; then
            echo "gpu_env.sh: over GPU_WHEELS_MAX_MIB=$max_mib MiB (a call carries 64 MiB)" >&2
            exit 1
        fi
        ;;
    setup)
        [ $# -le 2 ] || usage
        wheels=${1:-.gpu-wheels} venv=${2:-.gpu-venv}
        [ -d "$wheels" ] || {
            echo "gpu_env.sh: no wheelhouse at $wheels" >&2
            exit 2
        }
        wheel=$(snakemake_wheel "$wheels") || exit 2
        mapfile -t requirements < <(requirements_of "$wheel")
        "$python" -m venv --system-site-packages "$venv" || exit 1
        # --system-site-packages shows the *base* interpreter's packages. Where the host's python
        # is itself a venv (the lent host's python3 is one, holding torch, JAX and CuPy), its own
        # site-packages are added by a .pth file: after the venv's, so the venv's NumPy shadows.
        "$python" - "$venv" <<'EOF' || exit 1
import pathlib, site, sys
venv = pathlib.Path(sys.argv[1])
if sys.prefix != sys.base_prefix:
    own = [p for p in site.getsitepackages() if p.startswith(sys.prefix)]
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    target = venv / "lib" / version / "site-packages" / "numbench-host-venv.pth"
    target.write_text("".join(f"{p}\n" for p in own))
    print(f"gpu_env.sh: {sys.prefix} is a venv: its site-packages seen through {target.name}")
EOF
        offline=(--disable-pip-version-check --no-index --find-links "$wheels")
        # Snakemake without its requirements (PuLP is not carried), then those requirements: a
        # host package that satisfies one is kept; NumPy is the CPU set's, shadowing the host's.
        "$venv/bin/python" -m pip install -q "${offline[@]}" --no-deps "$snakemake_pin" || exit 1
        "$venv/bin/python" -m pip install -q "${offline[@]}" "$numpy_pin" "${requirements[@]}" ||
            exit 1
        echo "gpu_env.sh: installed; $left_out left out (pip's note that Snakemake requires it" \
            "is expected)"
        PYTHONPATH="$here/src" "$venv/bin/python" - <<'EOF' || exit 1
import importlib.util, sys
import numpy, snakemake, numbench
print(f"gpu_env.sh: python {sys.version.split()[0]}, numpy {numpy.__version__},"
      f" snakemake {snakemake.__version__}, numbench {numbench.__version__}")
if tuple(int(p) for p in numpy.__version__.split(".")[:2]) >= (2, 5):
    sys.exit("gpu_env.sh: NumPy 2.5 or later in the venv: numba-cuda fails beside it")
# Reported, not required: a host without a GPU library runs its cells as 'unavailable'.
for name in ("torch", "jax", "cupy", "numba", "numba_cuda"):
    print(f"gpu_env.sh: {name}: {'present' if importlib.util.find_spec(name) else 'absent'}")
if importlib.util.find_spec("numba_cuda"):
    try:
        from numba import cuda
        print(f"gpu_env.sh: numba.cuda imports; a GPU: {cuda.is_available()}")
    except Exception as exc:  # reported: the Numba CUDA cells will say why they failed
        print(f"gpu_env.sh: numba.cuda does not import: {type(exc).__name__}: {exc}")
EOF
        "$venv/bin/snakemake" --version || exit 1
        ;;
    run)
        [ $# -ge 2 ] || usage
        configfile=$(realpath -m "$1") out=$(realpath -m "$2")
        venv=$(realpath -m "${GPU_VENV:-.gpu-venv}")
        shift 2
        [ -f "$configfile" ] || {
            echo "gpu_env.sh: no config file at $configfile" >&2
            exit 2
        }
        [ -x "$venv/bin/snakemake" ] || {
            echo "gpu_env.sh: no venv at $venv (setup first)" >&2
            exit 2
        }
        mkdir -p "$out" && cd "$here" || exit 1
        # Every rule runs the `python` first on PATH: the venv's. The measuring jobs only (the
        # inputs, the roofs, the cells): --omit-from aggregate leaves out the analysis, which runs
        # here on what comes back. (--until with the measuring rules' names stopped, here, with
        # Snakemake's "BUG: Out of jobs ready to be started" after the inputs.)
        PATH="$venv/bin:$PATH" snakemake --cores 1 --scheduler greedy \
            --config device=gpu --configfile "$configfile" \
            --omit-from aggregate "$@" 2>&1 | tee "$out/snakemake.log"
        rc=${PIPESTATUS[0]}
        tar -czf "$out/results.tar.gz" results logs ||
            echo "gpu_env.sh: could not pack results/ and logs/" >&2
        exit "$rc"
        ;;
    *) usage ;;
esac
