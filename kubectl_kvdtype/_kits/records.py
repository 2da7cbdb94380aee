"""Typed records: value classes declared like dataclasses, at a fraction of their cost to define.

Why not ``dataclasses``: it compiles five or six functions from generated source for every class
(``__init__``, ``__repr__``, ``__eq__``, ``__hash__``, and a frozen class's ``__setattr__`` and
``__delattr__``), and its module imports ``inspect``. A live run defines dozens of records before
it sends a request, so that was a large share of a small run's time. ``record_type`` compiles one
function a class, the ``__init__`` (so building a record is as fast as building a dataclass), at
the class's first construction, and makes the others from closures over the fields.

What it does is the part of ``dataclasses`` this package uses, with the same meaning:
``@record_type`` / ``@record_type(frozen=True, order=True)``, ``field(default=, default_factory=, repr=,
compare=)``, ``ClassVar`` annotations skipped, fields inherited from record bases, a method the
class defines kept, ``__post_init__`` called, ``__match_args__``; and ``fields``, ``replace`` and
``asdict``. A frozen record refuses assignment with ``FrozenInstanceError``. mypy reads ``record_type``
as a dataclass transform (PEP 681), so the fields and ``__init__`` are type-checked as before.
"""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Optional, TypeVar, overload

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_: object) -> Callable[[Any], Any]:
        """At run time, PEP 681's marker does nothing (and 3.10's typing has none)."""
        return lambda decorated: decorated

__all__ = ["Field", "FrozenInstanceError", "asdict", "field", "fields", "record_type", "replace"]

_T = TypeVar("_T")
#: What ``order=True`` adds: each compares the compared fields' values as a tuple does.
_ORDER = ("__lt__", "__le__", "__gt__", "__ge__")


class _Missing:
    """No default: a field without one is a required argument."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class FrozenInstanceError(AttributeError):
    """Assignment to a field of a frozen record (as ``dataclasses.FrozenInstanceError``)."""


class Field:
    """One field of a record: its name, its default or default factory, and whether it is shown
    in ``repr`` and compared by ``==``, ``hash`` and ordering."""

    __slots__ = ("name", "default", "default_factory", "repr", "compare")

    def __init__(self, default: Any = MISSING, default_factory: Any = MISSING, repr: bool = True,
                 compare: bool = True) -> None:
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("a field cannot have both a default and a default_factory")
        self.name = ""
        self.default, self.default_factory = default, default_factory
        self.repr, self.compare = repr, compare

    def __repr__(self) -> str:
        return f"Field(name={self.name!r}, default={self.default!r}, default_factory={self.default_factory!r})"


def field(*, default: Any = MISSING, default_factory: Any = MISSING, repr: bool = True,
          compare: bool = True) -> Any:
    """A field's options, as the value of its annotation in the class body."""
    return Field(default, default_factory, repr, compare)


@overload
def record_type(cls: type[_T], /) -> type[_T]: ...


@overload
def record_type(*, frozen: bool = False, order: bool = False) -> Callable[[type[_T]], type[_T]]: ...


@dataclass_transform(field_specifiers=(field, Field))
def record_type(cls: Optional[type[_T]] = None, /, *, frozen: bool = False, order: bool = False) -> Any:
    """Make ``cls`` a record: ``__init__``, ``__repr__``, ``__eq__`` (and ``__hash__`` when frozen,
    ``None`` otherwise, as dataclasses do), ordering when ``order``, read-only when ``frozen``."""
    def make(cls: type[_T]) -> type[_T]:
        return _make(cls, frozen, order)
    return make if cls is None else make(cls)


def _make(cls: type[_T], frozen: bool, order: bool) -> type[_T]:
    own = _own_fields(cls)
    inherited = {f.name: f for base in reversed(cls.__mro__[1:]) for f in getattr(base, "__record_fields__", ())}
    every = tuple({**inherited, **{f.name: f for f in own}}.values())
    cls.__record_fields__ = every  # type: ignore[attr-defined]
    compared = tuple(f.name for f in every if f.compare)
    key = _key(compared)
    methods: dict[str, Any] = {
        "__init__": _init(cls, every, frozen),
        "__repr__": _repr(tuple(f.name for f in every if f.repr)),
        "__eq__": _eq(key),
        "__match_args__": tuple(f.name for f in every),
    }
    if order:
        methods.update({name: _compare(key, name) for name in _ORDER})
    for name, method in methods.items():  # the fresh functions, named for tracebacks
        if callable(method):
            method.__name__, method.__qualname__ = name, f"{cls.__qualname__}.{name}"
    if frozen:
        methods.update(__setattr__=_refuse_setattr, __delattr__=_refuse_delattr)
    for name, method in methods.items():
        if name not in cls.__dict__:
            setattr(cls, name, method)
    _set_hash(cls, key, frozen)
    return cls


def _own_fields(cls: type) -> list[Field]:
    """The fields the class body declares, in order: annotated names that are not ``ClassVar``.
    A ``field()`` value becomes its default (or nothing) on the class, as dataclasses leave it."""
    found = []
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if _is_classvar(annotation):
            continue
        value = cls.__dict__.get(name, MISSING)
        declared = value if isinstance(value, Field) else Field(default=value)
        declared.name = name
        if isinstance(value, Field):
            if declared.default is MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, declared.default)
        found.append(declared)
    return found


def _is_classvar(annotation: object) -> bool:
    if isinstance(annotation, str):  # ``from __future__ import annotations``
        return annotation.partition("[")[0].strip() in ("ClassVar", "typing.ClassVar")
    return annotation is ClassVar or getattr(annotation, "__origin__", None) is ClassVar


def _init(cls: type, every: tuple[Field, ...], frozen: bool) -> Callable[..., None]:
    """The ``__init__``: its source is built now (a field order that no signature allows fails
    at the class, as with dataclasses), and compiled at the class's first construction. A run
    imports dozens of record classes and builds few of them; compiling each one's ``__init__``
    up front was most of their cost to define."""
    source, namespace = _init_source(cls, every, frozen)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        exec(source, namespace)  # noqa: S102 - the source is built from identifiers only
        compiled = namespace["__init__"]
        compiled.__qualname__ = f"{cls.__qualname__}.__init__"
        if cls.__dict__.get("__init__") is __init__:  # not a method the class later set itself
            type.__setattr__(cls, "__init__", compiled)
        compiled(self, *args, **kwargs)
    return __init__


def _init_source(cls: type, every: tuple[Field, ...], frozen: bool) -> tuple[str, dict[str, Any]]:
    """The ``__init__``'s source, a signature of the fields, each stored as dataclasses store it,
    and the names it refers to."""
    namespace: dict[str, Any] = {"__MISSING": MISSING, "__setattr": object.__setattr__}
    params, body, defaulted = [], [], False
    straight = frozen and _stored_in_dict(cls, every)
    if straight:  # a frozen record's fields written into its __dict__: half the cost of object.__setattr__ each
        body.append(" __fields = self.__dict__")
    for f in every:
        if f.default is not MISSING:
            namespace[f"__default_{f.name}"] = f.default
            params.append(f"{f.name}=__default_{f.name}")
        elif f.default_factory is not MISSING:
            namespace[f"__factory_{f.name}"] = f.default_factory
            params.append(f"{f.name}=__MISSING")
            body.append(f" if {f.name} is __MISSING: {f.name} = __factory_{f.name}()")
        elif defaulted:
            raise TypeError(f"{cls.__qualname__}: non-default field {f.name!r} follows a field with a default")
        else:
            params.append(f.name)
        defaulted = defaulted or params[-1] != f.name
        if straight:
            body.append(f" __fields[{f.name!r}] = {f.name}")
        else:
            body.append(f" __setattr(self, {f.name!r}, {f.name})" if frozen else f" self.{f.name} = {f.name}")
    if hasattr(cls, "__post_init__"):
        body.append(" self.__post_init__()")
    source = f"def __init__(self{''.join(', ' + p for p in params)}):\n" + ("\n".join(body) or " pass") + "\n"
    return source, namespace


def _stored_in_dict(cls: type, every: tuple[Field, ...]) -> bool:
    """Whether ``object.__setattr__`` would store each field in the instance's ``__dict__``: no
    class of the record's declares ``__slots__``, and no field's name is a data descriptor (a
    property) on it, which ``object.__setattr__`` would call instead."""
    if any("__slots__" in vars(klass) for klass in cls.__mro__[:-1]):
        return False
    return not any(hasattr(type(getattr(cls, f.name, None)), "__set__") for f in every)


def _key(names: tuple[str, ...]) -> Callable[[Any], Any]:
    """The compared fields' values of a record, for ``==``, ``hash`` and ordering."""
    if not names:
        return lambda record: ()
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda record: (one(record),)
    return attrgetter(*names)


def _repr(names: tuple[str, ...]) -> Callable[[Any], str]:
    def __repr__(self: Any) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{type(self).__qualname__}({shown})"
    return __repr__


def _eq(key: Callable[[Any], Any]) -> Callable[[Any, Any], Any]:
    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented
    return __eq__


def _compare(key: Callable[[Any], Any], name: str) -> Callable[[Any, Any], Any]:
    def compare(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return getattr(key(self), name)(key(other))
        return NotImplemented
    compare.__name__ = name
    return compare


def _set_hash(cls: type, key: Callable[[Any], Any], frozen: bool) -> None:
    """dataclasses' rule for ``eq=True``: a frozen record hashes its compared fields, a mutable one
    is unhashable; a ``__hash__`` the class body defines is kept."""
    explicit = cls.__dict__.get("__hash__", MISSING)
    if explicit is not MISSING and explicit is not None:
        return
    def __hash__(self: Any) -> int:
        return hash(key(self))
    __hash__.__qualname__ = f"{cls.__qualname__}.__hash__"
    cls.__hash__ = __hash__ if frozen else None  # type: ignore[assignment,method-assign]


def _refuse_setattr(self: Any, name: str, value: object) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _refuse_delattr(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def fields(record_or_class: Any) -> tuple[Field, ...]:
    """A record's fields, in order (as ``dataclasses.fields``)."""
    cls = record_or_class if isinstance(record_or_class, type) else type(record_or_class)
    found: Optional[tuple[Field, ...]] = getattr(cls, "__record_fields__", None)
    if found is None:
        raise TypeError(f"{cls.__qualname__} is not a record")
    return found


def replace(obj: _T, /, **changes: Any) -> _T:
    """A copy of the record ``obj`` with ``changes`` (as ``dataclasses.replace``)."""
    values = {f.name: getattr(obj, f.name) for f in fields(obj)}
    return type(obj)(**{**values, **changes})


def asdict(obj: Any) -> Any:
    """A record as a dict, records, lists, tuples and dicts within it converted too (as
    ``dataclasses.asdict``; other values are shared, not deep-copied)."""
    if hasattr(type(obj), "__record_fields__"):
        return {f.name: asdict(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, (list, tuple)):
        return type(obj)(asdict(item) for item in obj)
    if isinstance(obj, dict):
        return {asdict(k): asdict(v) for k, v in obj.items()}
    return obj
