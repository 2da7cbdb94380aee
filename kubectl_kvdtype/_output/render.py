"""The one place that turns a ``Report`` into text: ``FORMATS``, the one table of the ``-o``
formats, and ``render``, which hands a report to its format's writer.

Each row (``Format``, ``_output/format.py``) names its writers in their own modules of ``_output``
(``tables``, ``documents``, ``junit``, ``sarif``, ``patch``), which say nothing of who takes them,
and says how a run treats the format (``tabular``, ``machine_readable``, ``locates``...), so that
nothing outside ``_output`` asks a format's name. The ``-o`` help and choices (``_commands/flags``),
the check of which subcommand takes which format (``_cli/main``), completion (``_cli/complete``)
and the man page derive from the rows.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any, Optional, Sequence

from kubectl_kvdtype._kits.records import record_type
from kubectl_kvdtype._output.format import JUDGING, Format, Rendering

if TYPE_CHECKING:
    from kubectl_kvdtype._kits.report import FleetReport, Locate, Report


def render(report: Report, output: str, *, no_headers: bool = False, all_namespaces: bool = True,
           color: bool = False, command: str = "", locate: Optional["Locate"] = None,
           formats: Optional[Sequence[Format]] = None) -> str:
    """The report as the text printed on stdout (the result, and only the result), by ``output``'s
    writer in ``formats`` (default ``FORMATS``).

    ``command`` names the subcommand that made it (JUnit's testsuite, SARIF's rules); ``locate``, for a
    format that ``locates``, says where each finding's object is in the ``-f`` files (``_sources/positions``;
    None: no file lines).
    """
    if report.text is not None:
        return report.text
    rendering = Rendering(no_headers=no_headers, all_namespaces=all_namespaces, color=color, command=command,
                          locate=locate)
    return format_named(output, formats).writer(report, rendering)


def render_fleet(fleet: FleetReport, output: str, *, no_headers: bool = False, all_namespaces: bool = True,
                 color: bool = False, formats: Optional[Sequence[Format]] = None) -> str:
    """A fleet run (``FleetReport``) as the text printed on stdout: one document for json, yaml,
    junit and sarif; tables with a CONTEXT column first, a line per context, then the fleet's."""
    writer = format_named(output, formats).fleet_writer
    if writer is None:
        raise ValueError(f"-o {output} has no form for a fleet run")
    return writer(fleet, Rendering(no_headers=no_headers, all_namespaces=all_namespaces, color=color))


def format_named(name: str, formats: Optional[Sequence[Format]] = None) -> Format:
    """The row of ``formats`` (default ``FORMATS``) called ``name``."""
    return next(f for f in (FORMATS if formats is None else formats) if f.name == name)


@record_type(frozen=True)
class Lazily:
    """``function`` of ``_output/<module>.py``, imported when it is first called: a run pays only
    for the writer of the format it asked for (ElementTree, PyYAML...), and ``--help`` for none.
    The rows name their writers' modules this way, so the modules of ``_output`` that write are
    the ones the rows name."""

    module: str
    function: str

    def __call__(self, *args: Any) -> Any:
        return getattr(import_module(f"kubectl_kvdtype._output.{self.module}"), self.function)(*args)


#: Every ``-o`` format, in the order ``-o`` help and completion list them; the first is the default.
FORMATS: tuple[Format, ...] = (
    Format("table", "", Lazily("tables", "write_table"), Lazily("tables", "write_fleet_table"),
           tabular=True, machine_readable=False),
    Format("wide", "", Lazily("tables", "write_wide"), Lazily("tables", "write_fleet_wide"),
           tabular=True, machine_readable=False),
    Format("json", "", Lazily("documents", "write_json"), Lazily("documents", "write_fleet_json"),
           context_encoder=Lazily("documents", "json_lines")),
    Format("yaml", "", Lazily("documents", "write_yaml"), Lazily("documents", "write_fleet_yaml"), manifests=True),
    Format("junit", "JUnit XML for CI test reports", Lazily("junit", "write_junit"),
           Lazily("junit", "write_fleet_junit"), takes=JUDGING, why="reports what a judging subcommand judged"),
    Format("sarif", "SARIF 2.1.0; with -f, file and line", Lazily("sarif", "write_sarif"),
           Lazily("sarif", "write_fleet_sarif"), takes=JUDGING, why="reports what a judging subcommand judged",
           locates=True, fleet_warning=Lazily("sarif", "fleet_warning")),
    Format("patch", "the JSON patches", Lazily("patch", "write_patch"), takes="find-flags", needs=("fix", "--fix"),
           why="prints the JSON patches that find-flags --fix plans"),
)
