"""The object readers of ``_sources.model`` written out for their own path (``namespace_of``,
``deployment_engine``, ...) give what the general ``dig`` reading gives, and ``managed_roles`` what
its two questions asked of the roles one by one give, for any JSON value where
an object, its metadata or its spec is expected: a hand-written manifest may hold anything there."""

from __future__ import annotations

from typing import Any, Optional

from hypothesis import given
from hypothesis import strategies as st

from kubectl_kvdtype._sources import model
from kubectl_kvdtype._sources.model import dig, text

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=6),
                     st.sampled_from(["vllm", "vLLM", "sglang", "team-a", "0.9.1", ""]))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                          st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                       max_leaves=8)
_KEYS = ("namespace", "name", "labels", "annotations", "kvCache", "engine", "engineVersion", "roles")
#: An object whose metadata and spec hold, under the keys the readers read, anything at all.
_MAPPINGS = st.dictionaries(st.sampled_from(_KEYS), st.one_of(_VALUES, st.dictionaries(
    st.sampled_from(["name", "version", "poolRef", "replicas", "command"]), _VALUES, max_size=3),
    st.lists(st.dictionaries(st.sampled_from(["name", "replicas", "command"]), _VALUES, max_size=3), max_size=3)),
    max_size=4)
_OBJECTS = st.one_of(_VALUES, st.fixed_dictionaries({}, optional={"metadata": st.one_of(_MAPPINGS, _VALUES),
                                                                  "spec": st.one_of(_MAPPINGS, _VALUES)}))


def _mapping(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _engine_by_dig(obj: Any) -> tuple[Optional[str], Optional[str]]:
    engine = dig(obj, "spec", "engine")
    if isinstance(engine, dict):
        declared, version = text(engine.get("name")), text(engine.get("version"))
    else:
        declared, version = text(engine), text(dig(obj, "spec", "engineVersion"))
    return declared, version


@given(_OBJECTS)
def test_each_written_out_reader_gives_what_dig_gives(obj):
    assert model.namespace_of(obj) == (text(dig(obj, "metadata", "namespace")) or "")
    assert model.name_of(obj) == (text(dig(obj, "metadata", "name")) or "")
    assert model.labels_of(obj) == _mapping(dig(obj, "metadata", "labels"))
    assert model.annotations_of(obj) == _mapping(dig(obj, "metadata", "annotations"))
    attached = isinstance(dig(obj, "spec", "kvCache"), dict)
    assert model.is_pool_attached(obj) is attached
    assert model.deployment_binding(obj) == ((text(dig(obj, "spec", "kvCache", "poolRef", "name")) or "")
                                             if attached else None)
    roles = dig(obj, "spec", "roles")
    assert model.roles_of(obj) == [r for r in (roles if isinstance(roles, list) else []) if isinstance(r, dict)]
    listed = model.roles_of(obj)
    assert model.managed_roles(obj) == (sum(model.role_replicas(r) for r in listed if not model.role_is_takeover(r)),
                                        bool(listed) and all(model.role_is_takeover(r) for r in listed))
    engine = model.deployment_engine(obj)
    assert (engine.declared, engine.version) == _engine_by_dig(obj)
    assert engine.name == (None if engine.declared is None else
                           model.deployment_engine({"spec": {"engine": engine.declared}}).name)


def test_one_engine_declaration_is_one_shared_record():
    first = model.deployment_engine({"spec": {"engine": {"name": "vllm", "version": "0.9.1"}}})
    again = model.deployment_engine({"spec": {"engine": {"name": "vllm", "version": "0.9.1"}}})
    assert first is again and first.name == "vLLM"
    assert model.deployment_engine({"spec": {"engine": "vllm", "engineVersion": "0.9.1"}}) is first
    assert model.deployment_engine({"spec": {"engine": {"name": " SGLang "}}}).name == "SGLang"
    assert model.deployment_engine({"spec": {"engine": {"name": "tgi"}}}).name is None
