"""``python -m numbench``: the ``numbench`` command where the package is not installed (the
other host of ``offsite run``, with only the package's sources on ``PYTHONPATH``)."""

from numbench.cli import entry

entry()
