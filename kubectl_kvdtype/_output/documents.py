"""``-o json`` and ``-o yaml``: a report as one document, the report contract (and, for a
subcommand that would create objects, ``-o yaml`` as the stream of their manifests)."""

from __future__ import annotations

import json
import re
from typing import Any

from kubectl_kvdtype._kits.report import FleetReport, Report, entries
from kubectl_kvdtype._output.format import Rendering


def write_json(report: Report, _how: Rendering) -> str:
    return to_json(report.to_dict())


def write_fleet_json(fleet: FleetReport, _how: Rendering) -> str:
    return _fleet_json(fleet)


def write_yaml(report: Report, _how: Rendering) -> str:
    import yaml  # only this output pays for it

    if report.manifests:
        return yaml.safe_dump_all(report.manifests, sort_keys=False, default_flow_style=False)
    return yaml.dump(report.to_dict(), Dumper=_plain_dumper(yaml), sort_keys=False, default_flow_style=False)


def write_fleet_yaml(fleet: FleetReport, _how: Rendering) -> str:
    import yaml

    return yaml.dump(fleet.to_dict(), Dumper=_plain_dumper(yaml), sort_keys=False, default_flow_style=False)


def _fleet_json(fleet: FleetReport) -> str:
    """The fleet as one document, its size decided as one report's is (``to_json``): indented
    throughout up to ``PRETTY_JSON_ENTRIES`` items and findings across every context, past it
    each entry on one line. A report kept as its JSON text (``FleetMember.encode``, one entry per
    line) is embedded as that text, or decoded again for the indented document (at most the
    threshold's entries, so the decoding is small where the indenting encoder is slow)."""
    document = fleet.to_dict()
    pairs = list(zip(fleet.members, document["contexts"], strict=True))
    total = sum(member.entries if member.encoded is not None else entries(entry.get("report") or {})
                for member, entry in pairs)
    if total <= PRETTY_JSON_ENTRIES:
        for member, entry in pairs:
            if member.encoded is not None:
                entry["report"] = json.loads(member.encoded)
        return json.dumps(document, indent=2) + "\n"
    contexts = []
    for member, entry in pairs:
        fields = [f"{json.dumps(key)}: {json.dumps(value)}" for key, value in entry.items() if key != "report"]
        if "report" in entry:  # JSON text holds no raw line break: re-indenting it is safe
            text = member.encoded if member.encoded is not None else json_lines(entry["report"])
            fields.append('"report": ' + text.rstrip("\n").replace("\n", "\n      "))
        contexts.append("    {\n      " + ",\n      ".join(fields) + "\n    }")
    head = "".join(f"  {json.dumps(key)}: {json.dumps(document[key])},\n" for key in ("kind", "command"))
    summary = json.dumps(document["summary"], indent=2).replace("\n", "\n  ")
    return "{\n" + head + '  "contexts": [\n' + ",\n".join(contexts) + f'\n  ],\n  "summary": {summary}\n}}\n'


#: Up to this many items and findings a JSON report is indented throughout, like kubectl's. Past
#: it, each item and finding is one line: Python's indenting encoder is pure Python and ~8x
#: slower than the C one, which dominated big reports. Both are the same JSON to a parser.
PRETTY_JSON_ENTRIES = 1000


#: One encoder for every entry: ``json.dumps`` with separators builds a new one per call. No
#: circular-reference check: a report is plain data built here, and the check tracks every
#: container of every entry (a cycle would still end the run, as a RecursionError).
_ENTRY_ENCODER = json.JSONEncoder(separators=(", ", ": "), check_circular=False)


def to_json(document: dict) -> str:
    """The JSON document: indented, or one entry per line (``json_lines``) when the report is large."""
    if entries(document) <= PRETTY_JSON_ENTRIES:
        return json.dumps(document, indent=2) + "\n"
    return json_lines(document)


def json_lines(document: dict) -> str:
    """The JSON document with each entry of its lists on one line, whatever its size: what a
    fleet keeps of each context's report (``Format.context_encoder``), since only the whole
    fleet's size says whether it is indented (``_fleet_json``).

    It is joined once from its pieces: joining each list and then the fields, as the text was
    built before, held three or four copies of a report's text at once (10 MB each for
    ``verify -A`` at 10,000 deployments)."""
    encode = _ENTRY_ENCODER.encode
    pieces = ["{"]
    for number, (key, value) in enumerate(document.items()):
        pieces += [",\n  " if number else "\n  ", json.dumps(key), ": "]
        if isinstance(value, list) and value:
            pieces.append("[\n    ")
            for position, entry in enumerate(value):
                if position:
                    pieces.append(",\n    ")
                pieces.append(encode(entry))
            pieces.append("\n  ]")
        else:
            pieces.append(encode(value))
    pieces.append("\n}\n")
    return "".join(pieces)


def _plain_dumper(yaml: Any) -> Any:
    """libyaml's emitter when PyYAML has it (the same text, several times faster on 10,000 items),
    never writing anchors and aliases: a report shares lists between an item and its finding (the
    occurrences), which a reader of ``-o yaml`` should see written out, as ``-o json`` has them."""
    base = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    dumper: Any = type("PlainDumper", (base,), {"ignore_aliases": lambda self, data: True})
    dumper.add_representer(str, _str_without_surrogates)
    return dumper


#: A lone surrogate; compiled (into ``re``'s cache) by the first YAML written, not at every start.
_SURROGATE = "[\ud800-\udfff]"


def _str_without_surrogates(dumper: Any, text: str) -> Any:
    """A string as YAML, a lone surrogate (``"\\ud800"`` in a JSON manifest: no UTF-8 can carry
    it, and libyaml's emitter fails on it) written as its backslash escape, as tables show it."""
    if re.search(_SURROGATE, text):
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return dumper.represent_str(text)


