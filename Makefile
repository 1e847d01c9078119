# The two commands: `make run` (set up, then run the default grid) and `make test`
# (`make test-fast`: the unit tier only);
# `make report` bundles the results into results/report.html.
# `make run CONFIG=my.yaml ARGS='--dry-run'` passes a config file and any other arguments on
# to Snakemake.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.numbench-installed
CORES ?= 1
CONFIG ?=
ARGS ?=
SNAKEMAKE_CONFIG := $(if $(CONFIG),--configfile '$(CONFIG)')

.PHONY: run report test test-fast check-cuda-env gpu-wheelhouse readme-table lint venv clean

venv: $(STAMP)

# The pinned set, then numbench itself (editable: the `numbench` command runs this checkout).
$(STAMP): envs/requirements-cpu.txt envs/requirements-docs.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check -q -r envs/requirements-cpu.txt \
		-r envs/requirements-docs.txt
	$(BIN)/python -m pip install --disable-pip-version-check -q --no-deps -e .
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/numbench unlock
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/snakemake --cores $(CORES) $(SNAKEMAKE_CONFIG) $(ARGS)

# The charts and the summary with captions, in one HTML file (after `make run`).
report: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/snakemake --report results/report.html $(SNAKEMAKE_CONFIG)

# Tests run in TEST_WORKERS processes (pytest-xdist); a shared workflow run is still made once
# (tests/conftest.py, made_once). TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2
XDIST := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS))
# make test: each process is handed the next test as it finishes one, in conftest's
# start_order (long end-to-end tests first), not a quarter of the suite at once, which would
# give one process every long test. The unit tier keeps xdist's chunks, which keep a module's
# tests, and its module-scoped fixtures, in one process.
ONE_AT_A_TIME := $(if $(XDIST),--maxschedchunk 1)

# Every test, as CI runs it (.ci/run), with the 25 slowest listed at the end: where the
# suite's time goes, in every CI log.
test: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest $(XDIST) $(ONE_AT_A_TIME) --durations=25 $(PYTEST_ARGS)

# The unit tier, for contributors between edits: no Snakemake run, no environment built, no
# browser, no Slurm (the tests marked e2e or slurm are left out; `make test` runs them).
test-fast: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest $(XDIST) -m "not e2e and not slurm" $(PYTEST_ARGS)

# pip resolves the CUDA sets (envs/requirements-cuda*.txt) against the public index, dry run:
# one CUDA major each, every package pinned. Minutes; skipped when no index answers.
check-cuda-env: $(STAMP)
	$(BIN)/python -m pytest -m cuda_env tests/test_cuda_env.py $(PYTEST_ARGS)

# The wheels a lent GPU host lacks (benchmarks/gpu_env.sh): Snakemake and NumPy 2.4, pinned as in
# envs/requirements-cpu.txt, for CPython 3.12, into .gpu-wheels (git-ignored), with its size.
gpu-wheelhouse:
	PYTHON='$(PYTHON)' bash benchmarks/gpu_env.sh download .gpu-wheels

# The README's first table ("What an answer looks like"), rewritten from a run's results
# folder (benchmarks/readme_table.py): its speedups, intervals, verdicts, date and machine.
RESULTS ?= results
readme-table: $(STAMP)
	$(BIN)/python benchmarks/readme_table.py '$(RESULTS)' --write README.md

lint: $(STAMP)
	$(BIN)/ruff check src scripts tests benchmarks examples
	$(BIN)/ruff format --check src scripts tests benchmarks examples
	$(BIN)/snakefmt --check Snakefile workflow/rules
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/snakemake --lint

clean:
	rm -rf results logs .snakemake
