"""The test suite's adapters, registered from their files where ``NUMBENCH_ADAPTERS`` names
them (``numbench.libraries``; the suite's conftest names both): ``faults``, NumPy misbehaving
one way each, and ``slowed``, every library stretched by a known factor."""
