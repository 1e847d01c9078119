"""Comparing runs: two result sets cell by cell, or a run against its history, and what
``numbench compare`` does with them.

``runs`` compares two result sets (the ratio of each cell's medians, its interval with the
run-to-run variance, the verdict, what differs between the two sides) into a ``Comparison``;
``gate`` judges two runs against each cell's own run-to-run spread in the history store
(``--history``); ``confirm`` measures the flagged cells again, old against new in lockstep
(``--confirm``); ``report`` words all three (the comparison as Markdown, the gate's verdict,
``--confirm``'s section), and ``command`` is the ``numbench compare`` command that prints
them. The margin's check and ``CompareError`` sit on the ground floor (``numbench.stats``),
for the versions' rule too.

It reads results through the contract's tables and measures again through ``measure``, so it
sits above the stages, beside the history.
"""
