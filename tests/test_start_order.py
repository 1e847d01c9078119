"""The order the tests start in (conftest.start_order): one reader of each shared run first,
then the slowest tests of their own, the other end-to-end tests, the unit tests, the other
readers of the shared runs, and the Slurm tests that wait for test_slurm's hold on the host."""

from __future__ import annotations

from conftest import SLOW_FIRST, start_order


class Item:
    """What start_order reads of a pytest item: its id, fixtures and marks."""

    def __init__(self, nodeid: str, fixtures=(), marks=()) -> None:
        self.nodeid = nodeid
        self.fixturenames = list(fixtures)
        self.marks = set(marks)

    def get_closest_marker(self, name: str):
        return name if name in self.marks else None

    def __repr__(self) -> str:
        return self.nodeid


def test_shared_run_makers_first_their_other_readers_after_the_unit_tests():
    items = [
        Item("tests/test_a.py::unit_1"),
        Item("tests/test_d.py::reads_dims_1", ["dims_run"], ["e2e"]),
        Item("tests/test_d.py::reads_dims_2", ["dims_run"], ["e2e"]),
        Item("tests/test_e.py::own_run", ["workdir"], ["e2e"]),
        Item("tests/test_t.py::reads_tiny_1", ["tiny_run", "cpu_roofs"], ["e2e"]),
        Item("tests/test_t.py::reads_tiny_2", ["tiny_run"], ["e2e"]),
        Item("tests/test_u.py::slurm_op", ["workdir"], ["e2e", "slurm"]),
        Item(SLOW_FIRST[2], ["workdir"], ["e2e"]),
        Item("tests/test_z.py::unit_2"),
        Item(SLOW_FIRST[0], ["workdir", "cpu_roofs"], ["e2e"]),
    ]
    order = [item.nodeid for item in start_order(items)]
    assert order == [
        "tests/test_t.py::reads_tiny_1",  # makes the tiny run: the longest, first
        "tests/test_d.py::reads_dims_1",  # makes the dimensions run
        SLOW_FIRST[0],
        SLOW_FIRST[2],
        "tests/test_e.py::own_run",
        "tests/test_a.py::unit_1",
        "tests/test_z.py::unit_2",
        "tests/test_d.py::reads_dims_2",
        "tests/test_t.py::reads_tiny_2",
        "tests/test_u.py::slurm_op",
    ]


def test_without_end_to_end_tests_the_collection_order_stays():
    items = [Item(f"tests/test_{n}.py::unit") for n in "cab"]
    assert start_order(items) == items
