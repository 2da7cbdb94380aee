"""What an ``-o`` format is: its row's shape (``Format``) and what every writer is handed (``Rendering``).

A row says everything the rest of the plugin needs to know of a format, so that nothing outside
``_output`` asks a format's name: what it is called and its help, its writers, who takes it, and
how a run treats it (``tabular``, ``machine_readable``, ``locates``, ``context_encoder``,
``fleet_warning``). The rows themselves are ``FORMATS`` in ``_output/render.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional, Sequence

from kubectl_kvdtype._kits.records import record_type

if TYPE_CHECKING:
    from kubectl_kvdtype._kits.report import FleetReport, Locate, Report


@record_type(frozen=True)
class Rendering:
    """How a report is written beyond its format: what every writer may read."""

    no_headers: bool = False
    all_namespaces: bool = True
    color: bool = False
    #: The subcommand that made the report (JUnit's testsuite, SARIF's rules).
    command: str = ""
    #: With ``Format.locates`` and ``-f``: where each finding's object is in the files (None: no file lines).
    locate: Optional["Locate"] = None


#: ``Format.takes``: every subcommand, or the subcommands that judge objects (``_cli/registry.judging``).
EVERY = "every"
JUDGING = "judging"


@record_type(frozen=True)
class Format:
    """One ``-o`` format."""

    name: str
    #: What ``-o`` help says of it after its name (empty: the name alone says it).
    help: str
    #: The report as text.
    writer: Callable[["Report", Rendering], str]
    #: A fleet run (``--contexts``) as one document; None: a fleet run never takes it.
    fleet_writer: Optional[Callable[["FleetReport", Rendering], str]] = None
    #: ``EVERY``, ``JUDGING`` or one subcommand's name.
    takes: str = EVERY
    #: A flag of that subcommand (its dest, and as typed) without which the format is refused.
    needs: Optional[tuple[str, str]] = None
    #: The usage error's reason when refused (after ``-o NAME``).
    why: str = ""
    #: A table for a person to read: an empty result is said on stderr ("No objects found", as
    #: kubectl says "No resources found"), since an empty table shows nothing.
    tabular: bool = False
    #: Read by a program (a CI job, a GitOps pipe), not a person: the warning findings of a write's
    #: plan are said on stderr too, one line each, where a person running the pipe sees them.
    machine_readable: bool = True
    #: Writes a report's manifests alone when it has any (``Report.manifests``: a stream of objects for
    #: a GitOps source), so that a run asking only for them needs nothing of a cluster.
    manifests: bool = False
    #: The writer points at files and lines: with ``-f`` the run finds where each finding's object
    #: is in the files (a second parse, paid for this format only) and hands it over as ``Rendering.locate``.
    locates: bool = False
    #: A fleet run keeps each context's report as this text as soon as it is judged (its objects
    #: freed then, not when the whole fleet is written); the fleet writer embeds the text.
    context_encoder: Optional[Callable[[dict], str]] = None
    #: What to warn of a fleet document of this many contexts (None: nothing to say).
    fleet_warning: Optional[Callable[[int], Optional[str]]] = None

    def taken_by(self, command: Optional[str], judging: Sequence[str], given: Callable[[str], bool]) -> bool:
        """Whether ``command`` (None: not named yet) takes this format, ``given`` saying which flags were."""
        if self.takes == JUDGING and command is not None and command not in judging:
            return False
        if self.takes not in (EVERY, JUDGING) and command != self.takes:
            return False
        return self.needs is None or given(self.needs[0])

    def users(self, judging: Sequence[str]) -> str:
        """Who takes it, as a usage error and ``-o`` help say it: ``check, find-flags`` or ``find-flags --fix``."""
        if self.takes == EVERY:
            return "every subcommand"
        names = ", ".join(judging) if self.takes == JUDGING else self.takes
        return f"{names} {self.needs[1]}" if self.needs else names
