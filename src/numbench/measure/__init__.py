"""Measuring a cell: its inputs, the worker process that times it, the supervisor that runs
its replicate processes (paired, in lockstep rounds), and what they write."""
