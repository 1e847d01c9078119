"""The machine a run measured on: what else ran on it (other programs' share of the CPUs, the
hypervisor's steal), how steady it was (the sentinel's spread) and the run's headline that
says so ("Quiet", "Busy" or "Unsteady machine"), and ``numbench system``.

One concern, its modules on the floors of the stages they serve:

* ``contract`` (ground floor): the machine's columns and thresholds the stages share, and the
  run's headline facts (``MachineQuality``, ``RunTime``, ``CappedCell``);
* ``system`` (ground floor): ``numbench system``, what on this machine makes timings less
  stable, and numbench's one reader of ``/proc`` (but for a zygote's own side);
* ``analyse`` (with the analyse stage): how quiet the machine was and where the run's time
  went, from the cells' records;
* ``report`` (with the report stage): the summary's headline and time lines.

The measuring side (``measure/{activity,quiet,cpu_taken,apart,host_lock}.py``) sits in
``measure/`` beside the engine it serves, and reads ``/proc`` through ``system``. Importing
this package imports none of its modules.
"""
