"""``_kits.records`` against ``dataclasses`` itself: the same class body declared both ways must
build, show, compare, hash, order, refuse and copy alike, for every feature the package uses."""

from __future__ import annotations

import copy
import dataclasses
from typing import ClassVar, Optional

import pytest

from kubectl_kvdtype._kits import records


def _both(body: str, frozen: bool = False, order: bool = False) -> tuple[type, type]:
    """The class ``body`` declared as a dataclass and as a record (each in its own namespace)."""
    made = []
    for decorate, specify in ((dataclasses.dataclass, dataclasses.field), (records.record_type, records.field)):
        # __name__: dataclasses looks a string annotation's ClassVar up in the module of the class.
        namespace = {"decorate": decorate, "field": specify, "ClassVar": ClassVar, "Optional": Optional,
                     "__name__": __name__}
        source = f"@decorate(frozen={frozen}, order={order})\nclass Thing:\n" + body
        exec(compile(source, "<test>", "exec"), namespace)
        made.append(namespace["Thing"])
    return made[0], made[1]


FIELDS = '''
    name: str
    count: int = 0
    tags: list = field(default_factory=list)
    secret: str = field(default="", repr=False)
    noise: int = field(default=0, compare=False)
    kind: ClassVar[str] = "thing"
'''


@pytest.mark.parametrize("frozen", [True, False])
def test_a_record_builds_shows_and_compares_as_a_dataclass_does(frozen):
    dc, rec = _both(FIELDS, frozen=frozen)
    for args, kwargs in [(("a",), {}), (("a", 2), {"secret": "s"}), ((), {"name": "b", "tags": [1], "noise": 5})]:
        d, r = dc(*args, **kwargs), rec(*args, **kwargs)
        assert repr(r) == repr(d)
        assert [getattr(r, f.name) for f in records.fields(r)] == [getattr(d, f.name) for f in dataclasses.fields(d)]
    assert [f.name for f in records.fields(rec)] == [f.name for f in dataclasses.fields(dc)]
    assert rec("a").tags is not rec("a").tags  # a fresh default per record
    assert rec.kind == "thing" and rec.count == 0 and rec.__match_args__ == dc.__match_args__
    assert (rec("a", noise=1) == rec("a", noise=2)) is True and (rec("a") == rec("b")) is False
    assert rec("a").__eq__(dc("a")) is NotImplemented
    assert (rec.__hash__ is None) == (dc.__hash__ is None) == (not frozen)
    if frozen:
        assert hash(rec("a", 1, (), noise=3)) == hash(dc("a", 1, (), noise=4)) == hash(rec("a", 1, ()))


def test_a_record_refuses_what_a_dataclass_refuses():
    dc, rec = _both(FIELDS, frozen=True)
    for cls in (dc, rec):
        with pytest.raises(TypeError):
            cls()  # a field without a default
        with pytest.raises(TypeError):
            cls("a", unknown=1)
        with pytest.raises(TypeError):
            cls("a", 1, [], "s", 0, "one too many")
    with pytest.raises(records.FrozenInstanceError):
        rec("a").name = "b"
    with pytest.raises(records.FrozenInstanceError):
        del rec("a").name
    assert issubclass(records.FrozenInstanceError, AttributeError)
    with pytest.raises(TypeError, match="follows"):  # dataclasses' own words
        dataclasses.dataclass(type("Late", (), {"__annotations__": {"a": "int", "b": "int"}, "a": 0}))
    with pytest.raises(TypeError, match="follows a field with a default"):
        records.record_type(type("Late", (), {"__annotations__": {"a": "int", "b": "int"}, "a": 0}))


def test_ordering_replace_asdict_and_inheritance_as_dataclasses():
    dc, rec = _both("    major: int\n    minor: int = 0\n", frozen=True, order=True)
    values = [(1, 2), (0, 9), (1, 0), (1, 2)]
    assert [(v.major, v.minor) for v in sorted(rec(*v) for v in values)] == \
        [(v.major, v.minor) for v in sorted(dc(*v) for v in values)]
    assert rec(1) < rec(1, 1) <= rec(1, 1) and rec(2) > rec(1, 5) >= rec(1, 5)
    copied = records.replace(rec(1, 2), minor=3)
    assert (copied.major, copied.minor) == (1, 3) and copied == rec(1, 3)
    with pytest.raises(TypeError):
        records.replace(rec(1), nope=1)

    @records.record_type(frozen=True)
    class Inner:
        values: tuple = ()

    @records.record_type(frozen=True)
    class Outer(Inner):
        inner: Optional[Inner] = None
        items: list = records.field(default_factory=list)

    outer = Outer((1,), Inner((2,)), [Inner(), {"k": Inner((3,))}])
    assert [f.name for f in records.fields(Outer)] == ["values", "inner", "items"]
    assert records.asdict(outer) == {"values": (1,), "inner": {"values": (2,)},
                                     "items": [{"values": ()}, {"k": {"values": (3,)}}]}
    assert copy.deepcopy(outer) == outer and copy.deepcopy(outer).items is not outer.items  # frozen, yet copied


def test_a_method_the_class_defines_is_kept_and_post_init_runs():
    @records.record_type(frozen=True)
    class Named:
        name: str
        seen: ClassVar[list] = []

        def __repr__(self) -> str:
            return f"<{self.name}>"

        def __post_init__(self) -> None:
            Named.seen.append(self.name)

    assert repr(Named("x")) == "<x>" and Named.seen == ["x"]
    assert Named.__init__.__qualname__.endswith("Named.__init__")
    with pytest.raises(TypeError, match="not a record"):
        records.fields(object())


def test_the_init_is_compiled_at_the_first_construction_and_serves_subclasses():
    """A class never built costs no compiled ``__init__``; the first construction, through the
    class or a plain subclass, compiles it once, and every later one uses it, arguments checked alike."""
    @records.record_type(frozen=True)
    class Base:
        name: str
        count: int = 0

    class Plain(Base):
        pass

    standing_in = Base.__init__
    assert "__init__" not in Plain.__dict__
    assert records.asdict(Plain("x", 2)) == {"name": "x", "count": 2}  # the subclass built first
    assert Plain("y").count == 0
    compiled = Base.__init__
    assert compiled is not standing_in and compiled.__qualname__.endswith("Base.__init__")
    assert compiled.__code__.co_varnames[:3] == ("self", "name", "count")
    Base("z")
    assert Base.__init__ is compiled  # compiled once
    with pytest.raises(TypeError, match="name"):
        Base()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Base("a", 1, 2)  # type: ignore[call-arg]


def test_a_frozen_record_stores_its_fields_where_a_frozen_dataclass_does():
    """A frozen record writes its fields straight into ``__dict__`` (``records._stored_in_dict``)
    only where ``object.__setattr__``, which a frozen dataclass calls, would store them there: a
    base with ``__slots__`` keeps them in its slots, and a property a base declares is called."""
    class Slotted:
        __slots__ = ("name",)

    class Named:
        @property
        def name(self) -> str:
            return "from the property"

        @name.setter
        def name(self, value: str) -> None:
            object.__setattr__(self, "_set", value)

    for base in (Slotted, Named, object):
        dc, rec = (decorate(frozen=True)(type("Thing", (base,), {"__annotations__": {"name": "str"}}))
                   for decorate in (dataclasses.dataclass, records.record_type))
        d, r = dc("given"), rec("given")
        assert r.name == d.name
        assert getattr(r, "__dict__", None) == getattr(d, "__dict__", None)
        with pytest.raises(AttributeError):  # FrozenInstanceError, both
            r.name = "again"
