"""Worker of scripts/engine-tables: imports ONE engine version's real CLI parser and uses it.

Run by scripts/engine-tables in a child process per engine version, never by the plugin:

    python _engine_worker.py ENGINE VERSION SOURCE_DIR REQUEST.json  > RESULT.json

SOURCE_DIR holds the engine's package unpacked from its released wheel. Its heavy dependencies
(torch, transformers, triton, ...) are not installed: a meta-path finder placed LAST answers every
import no other finder can with a permissive stub module, so the engine's own Python code (the
argparse definitions) runs for real while what it imports from elsewhere is inert.

The request names the argvs to parse; the result holds the parser's option table and, for every
argv, what the real parser made of it: the value of --kv-cache-dtype, no flag, or the error
message argparse would print before exiting with status 2.
"""

from __future__ import annotations

import abc
import argparse
import importlib.abc
import importlib.machinery
import io
import json
import os
import sys
import types
import warnings

DEST = "kv_cache_dtype"


# --- Permissive stubs for the engines' heavy dependencies ---------------------------------------

#: Attributes a stub does NOT have: code probes ``hasattr(torch, "npu")`` to pick a device.
_ABSENT = frozenset({"npu", "hpu", "musa", "mlu"})
#: Dunder attributes that engines read off a stubbed class (not Python protocols): answered.
_STUB_DUNDERS = frozenset({"__class_validators__"})


class _StubMeta(abc.ABCMeta):
    """A class that answers any attribute, call, index or arithmetic with another stub."""

    def __getattr__(cls, name):
        if (name.startswith("__") and name.endswith("__") and name not in _STUB_DUNDERS) or name in _ABSENT:
            raise AttributeError(name)
        return _stub_class(f"{cls.__name__}.{name}")

    def __call__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs and (callable(args[0]) and not isinstance(args[0], _StubMeta)):
            return args[0]  # used as a decorator: @torch.compile, @triton.jit
        return _stub_class(cls.__name__ + "()")

    def __getitem__(cls, item):
        return cls

    def __setitem__(cls, item, value):
        pass

    def __delitem__(cls, item):
        pass

    def register(cls, *args, **kwargs):  # ABCMeta.register, and registries (CONFIG_MAPPING.register)
        if len(args) == 1 and not kwargs and isinstance(args[0], type) and not isinstance(cls, _StubMeta):
            return super().register(args[0])
        return args[-1] if args else cls

    def __iter__(cls):
        return iter(())

    def __len__(cls):
        return 0

    def __bool__(cls):
        return False

    def __int__(cls):
        return 0

    def __index__(cls):
        return 0

    def __float__(cls):
        return 0.0

    def __contains__(cls, item):
        return False

    def __enter__(cls):
        return cls

    def __exit__(cls, *exc):
        return False

    def __eq__(cls, other):
        return isinstance(other, _StubMeta)  # ``schema == other_schema`` between two stubs

    def __ne__(cls, other):
        return not isinstance(other, _StubMeta)

    __hash__ = type.__hash__

    def __lt__(cls, other):
        return False

    __le__ = __gt__ = __ge__ = __lt__

    def __add__(cls, other):
        return cls

    __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = __add__
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __rpow__ = __matmul__ = __add__
    __lshift__ = __rshift__ = __add__
    __neg__ = __pos__ = __invert__ = __abs__ = lambda cls: cls

    def __str__(cls):
        return cls.__name__

    def __fspath__(cls):
        return "/nonexistent"


def _stub_class(name: str) -> type:
    return _StubMeta(name, (), {"__module__": "stub", "__init_subclass__": classmethod(_accept_anything),
                                "__get_pydantic_core_schema__": classmethod(_any_schema)})


def _any_schema(cls, source, handler):
    """A stub used as a field type of an engine's pydantic model validates anything."""
    from pydantic_core import core_schema

    return core_schema.any_schema()


def _accept_anything(cls, *args, **kwargs):
    """Stubs serve as base classes with keyword arguments (``class X(msgspec.Struct, frozen=True)``)."""


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if (name.startswith("__") and name.endswith("__")) or name in _ABSENT:
            raise AttributeError(name)
        value = _stub_class(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []  # a package, so that submodules import too
        module.__version__ = "99.0.0"
        module.__file__ = f"/nonexistent/{spec.name.replace('.', '/')}/__init__.py"
        return module

    def exec_module(self, module):
        pass


class StubFinder(importlib.abc.MetaPathFinder):
    """Last on sys.meta_path: every module nobody else finds becomes a stub."""

    def find_spec(self, fullname, path=None, target=None):
        top = fullname.split(".")[0]
        if top in sys.stdlib_module_names:
            return None  # a missing standard module is a platform probe (``_winapi``): keep failing
        if top in ("vllm", "sglang"):
            # The engine's Python code is real; what no finder finds is compiled-only (vllm._C),
            # left out of the unpacked wheel.
            return importlib.machinery.ModuleSpec(fullname, _StubLoader(), is_package=True)
        if "." in fullname and not isinstance(sys.modules.get(top), _StubModule):
            return None  # a missing part of a REAL package (``from regex import X`` mid-import)
        return importlib.machinery.ModuleSpec(fullname, _StubLoader(), is_package=True)


#: Engine subpackages that are runtime machinery only (kernels, op registries) and cannot run on
#: stubs: they are stubbed too. Nothing the CLI defines lives there.
_RUNTIME_ONLY = ("vllm.ir",)


class RuntimeOnlyFinder(importlib.abc.MetaPathFinder):
    """First on sys.meta_path: the engine's runtime-only subpackages become stubs."""

    def find_spec(self, fullname, path=None, target=None):
        if any(fullname == name or fullname.startswith(name + ".") for name in _RUNTIME_ONLY):
            return importlib.machinery.ModuleSpec(fullname, _StubLoader(), is_package=True)
        return None


# --- The engines' server parsers -------------------------------------------------------------------

class ParseFailure(Exception):
    pass


def _raise(message):
    raise ParseFailure(message)


def vllm_parser():
    """`vllm serve`'s parser: the subparser the `vllm` CLI builds for its `serve` subcommand."""
    import vllm.platforms
    from vllm.platforms.cpu import CpuPlatform

    # No GPU here: name a platform instead of letting vLLM probe for one. The options are the same
    # on every platform (they come from the config dataclasses); only some defaults differ.
    vllm.platforms._current_platform = CpuPlatform()
    from vllm.entrypoints.cli.serve import ServeSubcommand

    return _vllm_serve_parser(ServeSubcommand)


def _vllm_serve_parser(ServeSubcommand):
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        from vllm.utils import FlexibleArgumentParser
    top = FlexibleArgumentParser(prog="vllm", description="vLLM CLI")
    subparsers = top.add_subparsers(required=False, dest="subparser")
    serve = ServeSubcommand().subparser_init(subparsers)
    return top, serve


def sglang_parser():
    """`sglang serve` / `python -m sglang.launch_server`: prepare_server_args' parser."""
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return parser, parser


def describe(parser: argparse.ArgumentParser) -> dict:
    """The facts of a parser: its settings and every action (no code, no help text).

    ``options`` are every string the parser matches (vLLM's enable/disable pairs register hidden
    ``--no-*`` spellings too); ``shown`` is what its error messages print, when that differs.
    """
    registered: dict[int, list[str]] = {}
    for string, action in parser._option_string_actions.items():
        registered.setdefault(id(action), []).append(string)
    actions = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            actions.append({"options": [], "dest": action.dest, "action": "parsers",
                            "choices": list(action.choices)})
            continue
        entry = {"options": registered.get(id(action), []), "dest": action.dest, "action": _action_kind(action)}
        if list(action.option_strings) != entry["options"]:
            entry["shown"] = list(action.option_strings)
        if action.nargs is not None:
            entry["nargs"] = action.nargs
        if action.choices is not None:
            entry["choices"] = [str(c) for c in action.choices]
        if action.required:
            entry["required"] = True
        actions.append(entry)
    groups = [[a.dest for a in group._group_actions] for group in parser._mutually_exclusive_groups]
    table = {"prog": parser.prog, "allow_abbrev": parser.allow_abbrev, "prefix_chars": parser.prefix_chars,
             "actions": actions}
    if parser.fromfile_prefix_chars:
        table["fromfile_prefix_chars"] = parser.fromfile_prefix_chars
    if groups:
        table["mutually_exclusive"] = groups
    return table


_KINDS = {
    argparse._StoreAction: "store", argparse._StoreConstAction: "store_const",
    argparse._StoreTrueAction: "store_true", argparse._StoreFalseAction: "store_false",
    argparse._AppendAction: "append", argparse._AppendConstAction: "append_const",
    argparse._CountAction: "count", argparse._HelpAction: "help", argparse._VersionAction: "version",
    argparse.BooleanOptionalAction: "boolean_optional",
}
if hasattr(argparse, "_ExtendAction"):
    _KINDS[argparse._ExtendAction] = "extend"


def _action_kind(action) -> str:
    for cls in type(action).__mro__:
        if cls in _KINDS:
            return _KINDS[cls]
    return "store"  # engine-defined actions that take values like a store (their nargs says how many)


def run(top, serve, engine: str, argv: list[str]) -> dict:
    """What the real parser makes of ``argv`` (the engine's own arguments, after `serve`)."""
    full = (["serve"] + argv) if engine == "vLLM" else argv
    for parser in {id(top): top, id(serve): serve}.values():
        parser.error = _raise
        parser.exit = lambda status=0, message=None: _raise(f"exit {status}: {message}")
    err = io.StringIO()
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = err
    try:
        namespace = top.parse_args(full)
    except ParseFailure as failure:
        return {"outcome": "failed", "error": str(failure)}
    except SystemExit as exit_:
        return {"outcome": "failed", "error": f"exit {exit_.code}"}
    except Exception as exc:  # noqa: BLE001 - the engine's pre-processing raising: a crash, exit 1
        return {"outcome": "crashed", "error": f"{type(exc).__name__}: {exc}"}
    finally:
        sys.stdout, sys.stderr = stdout, stderr
    if not hasattr(namespace, DEST):
        return {"outcome": "absent"}
    return {"outcome": "value", "value": str(getattr(namespace, DEST))}


def _mark_absence(parser) -> None:
    """The flag's default becomes SUPPRESS, so a Namespace without the attribute means 'not given'."""
    for action in parser._actions:
        if action.dest == DEST:
            action.default = argparse.SUPPRESS
    parser._defaults.pop(DEST, None)


def _assume_installed() -> None:
    """``importlib.metadata.version("transformers")`` of a stubbed package: a version, not an error."""
    import importlib.metadata as metadata

    real = metadata.version

    def version(name):
        try:
            return real(name)
        except metadata.PackageNotFoundError:
            return "99.0.0"

    metadata.version = version


def main() -> int:
    _assume_installed()
    engine, version, source, request = sys.argv[1:5]
    sys.path.insert(0, source)
    sys.meta_path.append(StubFinder())
    sys.meta_path.insert(0, RuntimeOnlyFinder())
    warnings.simplefilter("ignore")
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    quiet = io.StringIO()
    stdout = sys.stdout
    sys.stdout = quiet
    try:
        top, serve = vllm_parser() if engine == "vLLM" else sglang_parser()
    finally:
        sys.stdout = stdout
    with open(request, encoding="utf-8") as handle:
        argvs = json.load(handle)
    table = describe(serve)
    if top is not serve:
        table["top"] = describe(top)
    _mark_absence(serve)
    results = [run(top, serve, engine, argv) for argv in argvs]
    json.dump({"engine": engine, "version": version, "python": sys.version.split()[0], "table": table,
               "results": results}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
