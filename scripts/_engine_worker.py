"""Worker of scripts/engine-tables: imports ONE engine version's real CLI parser and uses it.

Run by scripts/engine-tables in a child process per engine version, never by the plugin:

    python _engine_worker.py ENGINE VERSION SOURCE_DIR REQUEST.json  > RESULT.json

SOURCE_DIR holds the engine's package unpacked from its released wheel. Its heavy dependencies
(torch, transformers, triton, ...) are not installed: a meta-path finder placed LAST answers every
import no other finder can with a permissive stub module, so the engine's own Python code (the
argparse definitions) runs for real while what it imports from elsewhere is inert.

The request names the argvs to parse; the result holds the parser's option table and, for every
argv, what the real parser made of it: the value of --kv-cache-dtype, no flag, or the error
message argparse would print before exiting with status 2; where the parser lists no choices for
the flag (vLLM 0.33+), the value it let through is run through the real check the engine applies
at start (``start_check`` in the table: what it accepts and its message; outcome ``start``).
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
    FlexibleArgumentParser = _flexible_parser_class()
    top = FlexibleArgumentParser(prog="vllm", description="vLLM CLI")
    subparsers = top.add_subparsers(required=False, dest="subparser")
    serve = ServeSubcommand().subparser_init(subparsers)
    return top, serve


def _flexible_parser_class():
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        from vllm.utils import FlexibleArgumentParser
    return FlexibleArgumentParser


def vllm_api_server_parser():
    """`python -m vllm.entrypoints.openai.api_server`'s own parser, built as its ``__main__`` does:
    a FlexibleArgumentParser given to the release's ``make_arg_parser`` (no `serve` subcommand)."""
    make_arg_parser = _imported_by("vllm.entrypoints.openai.api_server", "make_arg_parser")
    if make_arg_parser is None:
        return None
    return make_arg_parser(_flexible_parser_class()(description="vLLM OpenAI-Compatible RESTful API server."))


def _imported_by(module: str, name: str, depth: int = 3):
    """The function ``name`` that ``module`` (run as ``__main__``) imports, following the ``main``
    it imports from elsewhere (releases moved the api_server's code between modules)."""
    import ast
    import importlib
    import importlib.util

    for _ in range(depth):
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            return None
        with open(spec.origin, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
        imports = {alias.name: importlib.util.resolve_name("." * node.level + (node.module or ""), spec.parent)
                   for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
        if name in imports:
            found = getattr(importlib.import_module(imports[name]), name, None)
            return found if isinstance(found, types.FunctionType) else None
        if "main" not in imports:
            return None
        module = imports["main"]
    return None


def sglang_parser():
    """`sglang serve` / `python -m sglang.launch_server`: prepare_server_args' parser."""
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return parser, parser


def sglang_serve_steps():
    """The real pre-processing of `sglang serve` (sglang.cli.serve), in the order it applies them;
    the names are what the plugin's reader implements (kubectl_kvdtype/_engines/rewrites.py, REWRITES)."""
    try:
        import sglang.cli.serve as serve
    except ImportError:
        return None
    steps = []
    for name, function in (("sglang_model_type", "_extract_model_type_override"),
                           ("sglang_positional_model", "_normalize_positional_model_path")):
        if hasattr(serve, function):
            steps.append((name, getattr(serve, function)))
    return steps


def _sglang_cli_argv(args: list[str]) -> list[str]:
    """What sglang's top-level CLI (sglang.cli.main) hands `serve` as its extra argv: run for real."""
    import sglang.cli.main as main
    import sglang.cli.serve as serve

    captured: list = []
    real, argv = serve.serve, sys.argv
    serve.serve = lambda _args, extra: captured.append(list(extra))
    sys.argv = ["sglang", "serve", *args]
    try:
        main.main()
    finally:
        serve.serve, sys.argv = real, argv
    return captured[0]


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


#: A value no release accepts: the start check's message for it, with it replaced, is the template.
_SENTINEL = "kvdtype-sentinel-value"
#: Where a stored start check's message holds the refused value (as Python's repr shows it).
VALUE_SLOT = "{value!r}"


def vllm_start_check():
    """The check vLLM runs on the flag's value at engine start, where its parser lists no choices.

    ``EngineArgs.create_engine_config`` hands the value (``auto`` resolved from the model's
    quantization config, any other unchanged) to ``CacheConfig(cache_dtype=...)``, whose pydantic
    validator (``_validate_cache_dtype``) raises for a value it does not know. That validator is
    run here, for real: a function returning None (accepted) or the message the engine ends with
    (``ValueError: Invalid kv_cache_dtype: ...``); and the names it may know, from the module."""
    from vllm.config import cache

    def check(value: str):
        try:
            cache.CacheConfig(cache_dtype=value)
        except Exception as exc:  # noqa: BLE001 - pydantic's ValidationError wrapping the engine's own error
            errors = exc.errors() if hasattr(exc, "errors") else []
            inner = errors[0].get("ctx", {}).get("error") if errors else None
            raised = inner if isinstance(inner, BaseException) else exc
            return f"{type(raised).__name__}: {raised}"
        return None

    import typing

    names = list(getattr(cache, "KV_CACHE_DTYPES", ())) + [str(a) for a in typing.get_args(cache.CacheDType)]
    return check, list(dict.fromkeys(names))


def start_check(check, names: list[str]) -> dict:
    """What the engine-start check accepts (each name it may know, run through it) and its message
    for a refused value, as a template (:data:`VALUE_SLOT` where the value goes)."""
    message = check(_SENTINEL)
    if message is None or repr(_SENTINEL) not in message:
        raise RuntimeError(f"the engine-start check does not refuse an unknown value as expected: {message!r}")
    return {"accepted": [name for name in names if check(name) is None],
            "message": message.replace(repr(_SENTINEL), VALUE_SLOT)}


class Entries:
    """Every entry point of one engine version: its parser, its real pre-processing and, where the
    parser lists no choices for the flag, the real check the engine runs on its value at start."""

    def __init__(self, engine: str) -> None:
        self.engine = engine
        self.check, self.known = None, []
        if engine == "vLLM":
            self.top, self.serve = vllm_parser()
            self.api_server = vllm_api_server_parser()
            self.steps = None
            if _flag_choices(self.serve) is None:
                self.check, self.known = vllm_start_check()
        else:
            self.top, self.serve = sglang_parser()
            self.api_server = None
            self.steps = sglang_serve_steps()
            if _flag_choices(self.serve) is None:
                raise RuntimeError("SGLang's parser lists no choices for the flag, and no start check is known")

    def names(self) -> list[str]:
        if self.engine == "vLLM":
            return ["vllm serve"] + (["api_server"] if self.api_server is not None else [])
        return ["launch_server"] + (["sglang serve"] if self.steps is not None else [])

    def parsers(self) -> list:
        return [p for p in (self.top, self.serve, self.api_server) if p is not None]

    def parse(self, entry: str, args: list[str]):
        if entry == "vllm serve":
            return self.top.parse_args(["serve", *args])
        if entry == "api_server":
            return self.api_server.parse_args(args)
        if entry == "sglang serve":
            argv = _sglang_cli_argv(args)
            for _name, step in self.steps:
                result = step(argv)
                argv = result[-1] if _name == "sglang_model_type" else result[0]
            return self.serve.parse_args(argv)
        return self.serve.parse_args(args)


def run(entries: Entries, item) -> dict:
    """What the real entry point makes of an item: its own arguments (a list: the engine's default
    entry point) or ``{"entry": name, "args": [...]}``."""
    entry, argv = (item["entry"], item["args"]) if isinstance(item, dict) else (entries.names()[0], item)
    if entry == "none":  # the shell line started no engine
        return {"outcome": "absent"}
    if entry not in entries.names():
        return {"outcome": "crashed", "error": f"no entry point {entry}"}
    for parser in entries.parsers():
        parser.error = _raise
        parser.exit = lambda status=0, message=None: _raise(f"exit {status}: {message}")
    err = io.StringIO()
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = err
    try:
        namespace = entries.parse(entry, argv)
        # The parser let the value through; the engine ends at start with this message (None: runs).
        refused = entries.check(str(getattr(namespace, DEST))) \
            if entries.check is not None and hasattr(namespace, DEST) else None
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
    if refused is not None:
        return {"outcome": "start", "error": refused, "value": str(getattr(namespace, DEST))}
    return {"outcome": "value", "value": str(getattr(namespace, DEST))}


def _flag_choices(parser):
    """The flag's choices in a parser, or None when it lists none."""
    action = next((a for a in parser._actions if a.dest == DEST), None)
    return None if action is None or action.choices is None else list(action.choices)


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
        entries = Entries(engine)
    finally:
        sys.stdout = stdout
    with open(request, encoding="utf-8") as handle:
        argvs = json.load(handle)
    table = describe(entries.serve)
    if entries.top is not entries.serve:
        table["top"] = describe(entries.top)
    table["entry_points"] = entry_points(entries, table)
    if entries.check is not None:
        sys.stdout = quiet  # the engine's logger writes to stdout, which carries the result
        try:
            table["start_check"] = start_check(entries.check, entries.known)
        finally:
            sys.stdout = stdout
    for parser in entries.parsers():
        _mark_absence(parser)
    results = [run(entries, item) for item in argvs]
    json.dump({"engine": engine, "version": version, "python": sys.version.split()[0], "table": table,
               "results": results}, sys.stdout)
    return 0


def entry_points(entries: Entries, table: dict) -> dict:
    """Per entry point, what differs from the shared option table: its words before the engine's
    own arguments, the parser it starts at, its pre-processing steps, and any setting of its own
    parser that differs (its ``prog``; its whole action list only if the options differ)."""
    points: dict = {}
    for name in entries.names():
        if name == "vllm serve":
            points[name] = {"parser": "top", "words": ["serve"], "steps": ["flexible"]}
        elif name == "api_server":
            points[name] = {"parser": "own", "steps": ["flexible"]}
            points[name].update(_difference(table, describe(entries.api_server)))
        elif name == "sglang serve":
            points[name] = {"parser": "own", "steps": [step for step, _ in entries.steps]}
        else:
            points[name] = {"parser": "own", "steps": []}
    return points


def _difference(base: dict, own: dict) -> dict:
    """An entry point's own parser as its difference from the shared table: settings that differ
    (not ``prog``, which no error message prints), options it lacks, options it adds."""
    difference = {k: v for k, v in own.items() if k not in ("actions", "prog") and base.get(k) != v}
    base_actions = {a["dest"]: a for a in base["actions"]}
    own_actions = {a["dest"]: a for a in own["actions"]}
    without = [dest for dest in base_actions if dest not in own_actions]
    added = [a for dest, a in own_actions.items() if base_actions.get(dest) != a]
    if without:
        difference["without"] = without
    if added:
        difference["with"] = added
    return difference


if __name__ == "__main__":
    sys.exit(main())
