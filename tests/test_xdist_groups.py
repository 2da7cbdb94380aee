"""The xdist groups hold (tests/conftest.py, ``_GroupSuffix``): a test of an ``xdist_group`` gets
the ``@group`` suffix that ``--dist loadgroup`` schedules by, on the pytest the tests run with."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from conftest import _GroupSuffix

pytest.importorskip("_pytest.nodeid", reason="before pytest 9.2, pytest-xdist's own suffix takes (item._nodeid)")


class _Item:
    """What the hook reads and writes of an item: its id, its marks."""

    def __init__(self, nodeid: str, *groups: str) -> None:
        from _pytest.nodeid import NodeId

        self._id = NodeId.parse(nodeid)
        self.marks = [pytest.mark.xdist_group(group).mark for group in groups]

    @property
    def nodeid(self) -> str:
        return str(self._id)

    def iter_markers(self, name: str) -> list:
        return [mark for mark in self.marks if mark.name == name]


def _worker(loadgroup: bool = True) -> SimpleNamespace:
    return SimpleNamespace(workerinput={"workerid": "gw0"}, option=SimpleNamespace(loadgroup=loadgroup))


def test_an_items_id_is_what_its_nodeid_says(request):
    """The suffix is written where this pytest reads a node's id from."""
    assert str(request.node._id) == request.node.nodeid


def test_grouped_tests_get_the_suffix_once_and_others_none():
    items = [_Item("tests/test_a.py::test_x[p-q]", "real"), _Item("tests/test_a.py::test_y"),
             _Item("tests/test_b.py::test_z", "release", "real"), _Item("tests/test_c.py::test_w@real", "real")]
    _GroupSuffix().pytest_collection_modifyitems(_worker(), items)
    assert [i.nodeid for i in items] == ["tests/test_a.py::test_x[p-q]@real", "tests/test_a.py::test_y",
                                         "tests/test_b.py::test_z@real_release", "tests/test_c.py::test_w@real"]


@pytest.mark.parametrize("config", [_worker(loadgroup=False), SimpleNamespace(option=SimpleNamespace(loadgroup=True))],
                         ids=["another --dist", "not a worker"])
def test_nothing_changes_without_loadgroup_in_a_worker(config):
    item = _Item("tests/test_a.py::test_x", "real")
    _GroupSuffix().pytest_collection_modifyitems(config, [item])
    assert item.nodeid == "tests/test_a.py::test_x"
