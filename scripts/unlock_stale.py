"""Before `make run`: remove Snakemake's lock if the run that held it was killed."""

import _path  # noqa: F401

from numbench.resume import unlock_if_stale

print(f"resume: {unlock_if_stale('.')}")
