"""The command line: ``main``, which owns the process's end (the subcommands are ``_cli.registry``'s).

``run`` parses, hands a ``Context`` to one subcommand, renders its ``Report`` and turns every
outcome (findings, usage errors, cluster failures, Ctrl-C) into an ``ExitStatus``.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import os
import sys
from typing import TYPE_CHECKING, Callable, NoReturn, Optional, Sequence

from kubectl_kvdtype._cli.registry import COMMANDS, DEBUG_VARIABLE, PROG, VERSION, build_parser, judging
from kubectl_kvdtype._commands.flags import (
    DEFAULT_PARALLEL,
    check_header_flags,
    check_refused,
    fleet_requested,
    normalize_booleans,
    secrets_in,
)
from kubectl_kvdtype._kits import codes as _codes
from kubectl_kvdtype._kits import settings as _settings
from kubectl_kvdtype._kits import signals as _signals
from kubectl_kvdtype._kits.display import cut_words, shown
from kubectl_kvdtype._kits.env import Environment
from kubectl_kvdtype._kits.secrets import redact
from kubectl_kvdtype._kits.status import (
    OUT_OF_MEMORY,
    SIGNAL_STATUS,
    ExitStatus,
    KvdtypeError,
    Signalled,
    UsageError,
)
from kubectl_kvdtype._output.render import FORMATS, format_named, render, render_fleet
from kubectl_kvdtype._sources.connection import CONNECTION_FLAGS, ConnectionFlag

# What only a run past the parse uses (the Context, the name rules, the progress line), or a bug
# (traceback), is imported where it is used: --version and --help end in the parse, and pay for none.
if TYPE_CHECKING:
    from kubectl_kvdtype._commands.command import Context
    from kubectl_kvdtype._kits import progress as _progress
    from kubectl_kvdtype._kits.report import Finding, Place, Report
    from kubectl_kvdtype._output.format import Format

__all__ = ["COMMANDS", "PROG", "VERSION", "build_parser", "main", "parse", "run"]


def parse(argv: Sequence[str], formats: Sequence[Format] = FORMATS,
          connection: Sequence[ConnectionFlag] = CONNECTION_FLAGS) -> argparse.Namespace:
    """The options of one run (``formats``: the table ``-o`` takes its values from; ``connection``:
    the connection flags' table)."""
    parser = build_parser(lazy=True, formats=formats, connection=connection)  # imports only the subcommand named
    options, unknown = parser.parse_known_args(normalize_booleans(argv, connection))
    options.argv = list(argv)  # how a value was attached (verify's --wait=X) is not in the Namespace
    if not getattr(options, "command", None):
        raise UsageError(f"name a subcommand: {', '.join(c.name for c in COMMANDS)} (see '{PROG} --help')")
    if unknown:  # argparse would blame the top-level parser; the subcommand's --help lists its flags
        raise UsageError(_with_help_hint(f"unrecognized arguments: {' '.join(unknown)}", options))
    try:
        _validate(options, formats, connection)
    except UsageError as error:
        raise UsageError(_with_help_hint(error.message, options)) from None
    return options


def _validate(options: argparse.Namespace, formats: Sequence[Format] = FORMATS,
              connection: Sequence[ConnectionFlag] = CONNECTION_FLAGS) -> None:
    known = _codes.known()
    unknown = [code for code in options.ignore if code not in known]
    if unknown:
        raise UsageError(f"--ignore {unknown[0]}: no such finding code (known: {', '.join(known)})")
    form = format_named(options.output, formats)
    if not form.taken_by(options.command, judging(), lambda dest: bool(getattr(options, dest, False))):
        raise UsageError(f"-o {form.name} {form.why}: use it with {form.users(judging())}")
    if options.all_namespaces and options.namespace:
        raise UsageError("-n/--namespace and -A/--all-namespaces cannot be used together")
    _validate_names(options)
    check_header_flags(options, connection)
    check_refused(options, connection)
    if fleet_requested(options):
        from kubectl_kvdtype._cli import fleet as _fleet  # a fleet run's alone

        _fleet.validate(options)
    _partners(options)


def _partners(options: argparse.Namespace) -> None:
    """Flags that mean nothing without their partner are refused, not ignored; then the defaults
    that wait for the partner are set."""
    if getattr(options, "parallel", None) is not None and not fleet_requested(options):
        raise UsageError("--parallel needs --contexts or --all-contexts: it is how many contexts of a fleet are "
                         "judged at once")
    if hasattr(options, "parallel") and options.parallel is None:
        options.parallel = DEFAULT_PARALLEL


#: The command-line values that name an object (the attribute, what kubectl calls it, its kind):
#: each must be a name the API server accepts before it reaches a request path or a printed command.
_NAMED = (("namespace", "namespace", "Namespace"), ("system_namespace", "namespace", "Namespace"),
          ("binding", "KVCachePoolBinding name", "KVCachePoolBinding"),
          ("deployment", "ModelDeployment name", "ModelDeployment"))


def _validate_names(options: argparse.Namespace) -> None:
    from kubectl_kvdtype._sources import names as _names

    for attribute, what, kind in _NAMED:
        _names.check_flag(what, getattr(options, attribute, None), _names.rule_of(kind))


def run(argv: Sequence[str], env: Optional[Environment] = None, formats: Sequence[Format] = FORMATS) -> int:
    """Parse, run one subcommand, print its report; return the exit status (never raises). A test
    hands in ``formats`` with a throwaway row; the run treats it as its row says."""
    env = env or Environment()
    if argv and argv[0] == "__complete":  # the shell scripts and kubectl_complete-kvdtype ask this
        from kubectl_kvdtype._cli.complete import complete

        return complete(argv[1:], env)
    ticker = _ticker(env)
    options: Optional[argparse.Namespace] = None
    try:
        options = parse(argv, formats)
        from kubectl_kvdtype._commands.command import CommonOptions, Context

        _settings.check(env.environ)  # a bad value of the plugin's own settings: one sentence, exit 2
        if getattr(options, "warnings_as_errors", None) is not None:  # a run that may reach a server
            from kubectl_kvdtype._sources import server_warnings

            server_warnings.forget()  # each warning shown once per run (a test's runs share a process)
        _extra_engine_tables(env)
        if fleet_requested(options):
            return _warned_end(env, options, _run_fleet(options, env, ticker, formats), argv)
        context = Context(options=options, common=CommonOptions.of(options), env=env)
        report = judge(context)
        if ticker:
            ticker.stop()
        if report.text is not None:  # a text result (completion): verbatim, and no cluster asked
            _write(env, render(report, options.output, formats=formats))
            return int(ExitStatus.OK)
        form = format_named(options.output, formats)
        locate = _locator(context, report) if form.locates else None
        for warning in report.warnings:
            env.warn(warning)
        if not report.items and form.tabular:
            env.progress(report.empty_message)
        _write(env, render(report, options.output, no_headers=options.no_headers,
                           all_namespaces=context.namespace is None if form.tabular else True,  # only tables ask
                           color=env.color, command=options.command,
                           locate=locate, formats=formats))
        return _warned_end(env, options, int(report.exit_status(options.exit_zero)), argv)
    except SystemExit as exit_:  # argparse after --help and --version
        return int(exit_.code or 0) if isinstance(exit_.code, int) else int(ExitStatus.USAGE)
    except KvdtypeError as error:
        message = _with_help_hint(error.message, options) if error.status == ExitStatus.USAGE else error.message
        return _fail(env, message, error.status, ticker, argv)
    except Signalled as signalled:  # SIGTERM/SIGHUP in a write's block but outside its steps: nothing half done
        if ticker:
            ticker.stop()
        return int(signalled.status)
    except KeyboardInterrupt:
        return _fail(env, "interrupted", ExitStatus.INTERRUPTED, ticker, argv)
    except BrokenPipeError:  # `kubectl kvdtype check | head`: quiet, as kubectl is, but not a success
        _silence_stdout()
        return int(ExitStatus.INCOMPLETE)
    except _OutputError as error:  # stdout is a full disk, a closed file...
        _silence_stdout()
        return _fail(env, f"cannot write the result to standard output: {error.reason}", ExitStatus.INCOMPLETE,
                     ticker, argv)
    except MemoryError:  # an input bigger than the memory this process may use (ulimit -v): not a bug
        return _fail(env, OUT_OF_MEMORY, ExitStatus.INCOMPLETE, ticker, argv)
    except Exception as error:  # noqa: BLE001 - a bug: say so in one line, exit "could not complete"
        return _fail(env, internal_error(error, env, argv), ExitStatus.INCOMPLETE, ticker, argv)
    finally:
        if ticker:
            ticker.stop()


def _ticker(env: Environment) -> Optional[_progress.Ticker]:
    """The progress line, started: on a terminal only."""
    if not env.stderr_isatty:
        return None
    from kubectl_kvdtype._kits import progress as _progress

    return _progress.Ticker(env.stderr, _progress.delay(env.environ)).start()


def judge(context: Context) -> Report:
    """Run the subcommand on ``context``: its report, annotated, the --ignore'd findings dropped
    (what a fleet run does for each of its contexts too)."""
    report = context.options.handler.run(context)
    context.annotate(report)
    if report.text is None:
        report.ignore(set(context.common.ignore))
    return report


def internal_error(error: Exception, env: Environment, argv: Sequence[str] = ()) -> str:
    """A bug, in one line (its traceback too with the debug variable set, credentials redacted)."""
    if _settings.value_or_default(env.environ, _settings.DEBUG):
        import traceback

        trace = redact(traceback.format_exc(), secrets_in(argv)).rstrip()
        print("\n".join(shown(line) for line in trace.split("\n")), file=env.stderr)  # a cluster's string in it too
    what = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return f"internal error: {what}; please report it with {DEBUG_VARIABLE}=1 output"


def _run_fleet(options: argparse.Namespace, env: Environment, ticker: Optional[_progress.Ticker],
               formats: Sequence[Format]) -> int:
    """--contexts/--all-contexts: every context judged, one document for the fleet (``_cli.fleet``)."""
    from kubectl_kvdtype._cli import fleet as _fleet

    fleet = _fleet.run(options, env, judge, internal_error)
    if ticker:
        ticker.stop()
    form = format_named(options.output, formats)
    for member in fleet.members:
        for warning in member.report.warnings if member.report else []:
            env.warn(f"[{member.context}] {warning}")
        if member.report is not None and not member.report.items and form.tabular:
            env.progress(f"[{member.context}] {member.report.empty_message}")
    caveat = form.fleet_warning(len(fleet.members)) if form.fleet_warning else None
    if caveat:
        env.warn(caveat)
    _write(env, render_fleet(fleet, options.output, no_headers=options.no_headers,
                             all_namespaces=options.all_namespaces, color=env.color, formats=formats))
    return int(fleet.exit_status())
#: Names an extra recorded engine table file (scripts/engine-tables --only ENGINE==VERSION --out FILE).
ENGINE_TABLES_VARIABLE = _settings.ENGINE_TABLES.name


def _extra_engine_tables(env: Environment) -> None:
    """Add the engine tables $KUBECTL_KVDTYPE_ENGINE_TABLES names (an engine release newer than the data)."""
    path = _settings.value(env.environ, _settings.ENGINE_TABLES)
    if not path:
        return
    from kubectl_kvdtype._engines import parsers as _parsers

    try:
        _parsers.add_tables(path)
    except ValueError as error:
        raise UsageError(f"{ENGINE_TABLES_VARIABLE}: {error}") from None


def _locator(context: Context, report: Report) -> Optional[Callable[[Finding], Optional[Place]]]:
    """-o sarif with -f: where each finding's object is in the files. The files are parsed again,
    keeping positions, only here: the ordinary -f read keeps none, and stays as fast."""
    if not context.offline:
        return None  # a cluster's objects have no file
    from kubectl_kvdtype._sources.manifests import ManifestSource
    from kubectl_kvdtype._sources.positions import Locator

    source = context.source
    if not isinstance(source, ManifestSource):
        return None
    locator = Locator(source)
    for finding in report.findings:  # now, so that a file that cannot be read again is said with the warnings
        locator.locate(finding)
    report.warnings += locator.warnings
    return locator.locate


class _OutputError(Exception):
    """Writing the result to stdout failed for a reason other than a closed pipe."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


#: A result is handed to stdout a slice of this many characters at a time: the stream encodes
#: what it is given in one piece, so a whole 10 MB report was held twice, as text and as bytes.
WRITE_SLICE = 1 << 20


def _write(env: Environment, text: str) -> None:
    if env.stdout is None:  # started with stdout closed (`>&-`): Python leaves sys.stdout None
        raise _OutputError("it is closed")
    try:
        for start in range(0, len(text), WRITE_SLICE):
            env.stdout.write(text[start:start + WRITE_SLICE])
        env.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as error:
        raise _OutputError(error.strerror or str(error)) from None


def _warned_end(env: Environment, options: argparse.Namespace, status: int, argv: Sequence[str]) -> int:
    """With --warnings-as-errors, a run the server warned ends with exit 3 in kubectl's sentence,
    once its result is written (a warning met before another request ended it there already)."""
    if not getattr(options, "warnings_as_errors", False):
        return status
    from kubectl_kvdtype._sources import server_warnings

    if not server_warnings.count():
        return status
    return max(status, _fail(env, server_warnings.received(), ExitStatus.INCOMPLETE, None, argv))


def _fail(env: Environment, message: str, status: ExitStatus, ticker: Optional[_progress.Ticker],
          argv: Sequence[str]) -> int:
    if ticker:
        ticker.stop()
    message = redact(message, secrets_in(argv))  # a token or password typed is never echoed
    message = shown(message)  # one line whatever was typed or answered: a newline in an argument escaped
    # And a 100 kB value typed is not echoed whole: a usage error's values are cut short, any
    # other message's only past the longest path a file system has (a resume command stays whole).
    message = cut_words(message) if status == ExitStatus.USAGE else cut_words(message, _LONGEST_PATH)
    try:
        print(f"error: {message}", file=env.stderr)
    except (OSError, ValueError):
        pass  # stderr itself is gone: the exit status still tells
    return int(status)


#: PATH_MAX on Linux: no word of a message that is a real path is longer.
_LONGEST_PATH = 4096


def _with_help_hint(message: str, options: Optional[argparse.Namespace]) -> str:
    """A usage error found after parsing points to the subcommand's own --help, as argparse's do."""
    if "--help" in message or options is None:
        return message
    words = [PROG, getattr(options, "command", None), getattr(options, "escape_action", None)]
    return f"{message} (see '{' '.join(w for w in words if w)} --help')"


def _silence_stdout() -> None:
    """What is left in stdout's buffer goes nowhere: the interpreter's last flush stays quiet."""
    try:
        fileno = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # closed, or not a file (a test's stream)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fileno)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The console script ``kubectl-kvdtype``."""
    # A short-lived process holding tens of thousands of parsed objects: the cyclic garbage
    # collector would rescan them all again and again while nothing forms cycles (plain JSON),
    # costing ~30% of a 10,000-deployment run. Reference counting still frees everything.
    gc.disable()
    _restore_frozen_environment()
    _tolerant_streams()
    if argv is None and os.path.basename(sys.argv[0]).startswith("kubectl_complete-"):
        from kubectl_kvdtype._cli.complete import complete

        return complete(sys.argv[1:])  # the binary linked as kubectl_complete-kvdtype (krew installs)
    if argv is None:
        _signals.install()  # SIGTERM and SIGHUP end a read at once, a write in progress as Ctrl-C does
    status = run(sys.argv[1:] if argv is None else argv)
    if argv is None and (status in (ExitStatus.INTERRUPTED, *SIGNAL_STATUS.values()) or not _exit_hooks()):
        # Ctrl-C: parallel LISTs may still be waiting on a silent server, and the interpreter's
        # shutdown would join their threads; Ctrl-C means now. Any other end: with no exit hook to
        # run, the interpreter's shutdown is only teardown (every module, every object the run
        # kept, freed one by one), which grows with the cluster; the result is written and flushed
        # already, and every thread of ours is a daemon.
        _end_now(status)
    if argv is None:
        # An exit hook is registered (the kubernetes client's removal of the key files it wrote
        # for an exec credential, a coverage tool's): the interpreter ends the process and runs it.
        # Its exit runs one full collection over every object still alive (modules, classes, what
        # the run kept): with the collector off all run, nothing it could free was made, and that
        # pass was the largest part of a small run's exit. Frozen objects are left out of it.
        gc.freeze()
    return status


def _exit_hooks() -> bool:
    """Whether anything registered an exit hook (atexit): when unsure (a Python without the
    count), yes."""
    count = getattr(atexit, "_ncallbacks", None)
    return count is None or count() > 0


def _end_now(status: int) -> NoReturn:
    """End the process now with ``status``: what the streams hold is flushed first."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # closed, or None (started with `>&-`)
            pass
    os._exit(status)


def _tolerant_streams() -> None:
    """Text that the terminal's encoding cannot carry (PYTHONIOENCODING=ascii, a C locale) is
    written with backslash escapes instead of failing; JSON and YAML escape it themselves."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
        except (AttributeError, ValueError):
            pass


#: The loader search paths a PyInstaller bootloader may point at its own libraries (Linux, AIX,
#: macOS), each saved as NAME_ORIG when the user had set it.
_LOADER_PATHS = ("LD_LIBRARY_PATH", "LIBPATH", "DYLD_LIBRARY_PATH")


def _restore_frozen_environment() -> None:
    """In the PyInstaller binary, give child processes (exec credential plugins such as aws,
    gke-gcloud-auth-plugin, kubelogin) the user's environment: the bootloader (onefile and
    one-folder alike) may prepend its library directory (the onefile's unpack directory, the
    one-folder's _internal) to the loader's search path, saving the user's value in NAME_ORIG, and
    sets its own _PYI_* variables. A search path without NAME_ORIG keeps the user's entries, only
    the bundle's are dropped, so a bootloader that leaves one alone changes nothing. This process is
    not affected: its libraries are loaded already."""
    if not getattr(sys, "frozen", False):
        return
    bundle = os.path.realpath(getattr(sys, "_MEIPASS", os.path.dirname(sys.executable)))
    for name in _LOADER_PATHS:
        original = os.environ.pop(name + "_ORIG", None)
        if original is not None:
            os.environ[name] = original
        elif name in os.environ:
            kept = [entry for entry in os.environ[name].split(os.pathsep)
                    if entry and os.path.realpath(entry) != bundle]
            if kept:
                os.environ[name] = os.pathsep.join(kept)
            else:
                del os.environ[name]
    for name in [n for n in os.environ if n.startswith("_PYI_") or n == "_MEIPASS2"]:
        del os.environ[name]
