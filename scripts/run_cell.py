"""Entry point of rules cell and early_round: measure one cell, or one early round of it,
from its spec (numbench.spec.CellSpec as JSON): numbench.measure.job says how, and what
its exit status means.

It imports only numbench's light modules before the job holds the host's timing lock
(numbench.measure.host_lock), and hands the job to a process forked from a zygote that has
imported the supervisor where one serves (worker_start: fork).
"""

import sys

import _path  # noqa: F401

from numbench.measure.job import run

sys.exit(run(sys.argv[1:]))
