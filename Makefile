# The two commands: `make run` (set up, then run the default grid) and `make test`;
# `make report` bundles the results into results/report.html.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.numbench-installed
CORES ?= 1

.PHONY: run report test check-cuda-env lint venv clean

venv: $(STAMP)

$(STAMP): envs/requirements-cpu.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check -q -r envs/requirements-cpu.txt
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/python scripts/unlock_stale.py
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/snakemake --cores $(CORES)

# The charts and the summary with captions, in one HTML file (after `make run`).
report: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/snakemake --report results/report.html

test: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest $(PYTEST_ARGS)

# pip resolves the CUDA sets (envs/requirements-cuda*.txt) against the public index, dry run:
# one CUDA major each, every package pinned. Minutes; skipped when no index answers.
check-cuda-env: $(STAMP)
	$(BIN)/python -m pytest -m cuda_env tests/test_cuda_env.py $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src scripts tests benchmarks
	$(BIN)/ruff format --check src scripts tests benchmarks
	$(BIN)/snakefmt --check Snakefile workflow/rules
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/snakemake --lint

clean:
	rm -rf results logs .snakemake
