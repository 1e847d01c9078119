"""The roofline: what this host can do (its roofs: the bandwidth of each cache and of DRAM,
and its compute peak, measured by the workflow's ``roofs`` rule into results/roofs.parquet)
and every cell placed on them.

One concern, its modules on the floors of the stages they serve:

* ``contract`` (ground floor): the roofs table's columns and reader, the notes of a cell's
  place on it (the ``roof_note`` column) and the roofline's facts (``RoofFinding``);
* ``measure`` (with the measure stage): measuring the roofs under the host's timing lock,
  each job a worker process (the package itself), the workers' kernels (``kernels``) and
  the table's rows (``rows``);
* ``analyse`` (with the analyse stage): each cell's place on its host's roofline, and what
  the roofline says about each operation;
* ``report`` (with the report stage): the summary's Roofline section and the roofline
  charts.

The roofs of an offsite run, measured there, carried in its archive and merged here, are
``numbench.offsite.common``'s, beside the other things every offsite step shares.

Importing this package imports none of them: the analysis does not load the measuring code
by taking the roofs' vocabulary.
"""
