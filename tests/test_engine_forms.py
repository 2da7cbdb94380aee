"""Copies of the flag the engine reads in forms of its own: one entry ``--kv-cache-dtype=fp8 x`` (argparse
splits at ``=`` before it looks for a space) and vLLM's dotted options (``--kv-cache-dtype.x fp8``, which its
own rewriting turns into the flag with the JSON value ``{"x": "fp8"}``), docs/engines.md, "How each engine
reads the flag".

No expectation here is written by hand: the corpus holds what each engine's REAL parser made of generated
argvs (tests/data/engine_corpus.json, recorded by scripts/engine-tables), and the value a subcommand must
report is what the recorded parser of that release gives.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Optional

import pytest

from _support import in_process, kvdtype, report, seed
from kubectl_kvdtype._engines import argv as _argv
from kubectl_kvdtype._engines import parsers as _parsers
from kubectl_kvdtype._engines import rewrites as _rewrites
from kubectl_kvdtype._engines import verdicts as _verdicts
from test_engine_corpus import CASES, CORPUS, WORDS, _sections
from test_verdicts import SETTING_ON, binding, deployment, replica

pytestmark = pytest.mark.version_sensitive  # argparse and the argv reader (test_tiers.py)

_INVALID = re.compile(r"argument --kv-cache-dtype: invalid choice: (.*) \(choose from ")
#: The words each engine's argvs in the corpus are read after (its default entry point).
_ENTRY = {"vLLM": WORDS["vllm serve"], "SGLang": WORDS["launch_server"]}


def _value_read(row: list) -> Optional[str]:
    """The value the real parser read for the flag in a corpus row, as Python's repr shows it: the
    one it ran with, the one its start check refused, or the one its choices refused; None when it
    read none (no flag, or a failure about something else)."""
    if row[0] == "v":
        return repr(row[1])
    if row[0] == "s":
        return repr(row[2])
    refused = _INVALID.match(CORPUS["errors"][row[1]]) if row[0] == "f" else None
    return refused.group(1) if refused else None


@pytest.mark.parametrize("engine,version", CASES)
def test_every_copy_the_real_parser_read_is_located(engine: str, version: str) -> None:
    """Wherever a release's real parser read a value for the flag, ``find_dtype_flags`` (what find-flags
    reports and verify and preflight name) has a copy the engine reads holding that value."""
    data = CORPUS["engines"][engine]
    missed = []
    for argv, row in zip(data["argvs"], _sections(engine, version)[0], strict=True):
        value = _value_read(row)
        if value is None or "--model" in argv:  # --model moves the model in front (not a copy of the flag)
            continue
        found = _verdicts.find_dtype_flags([*_ENTRY[engine], *argv], engine, version)
        if not any(o.read and repr(o.value) == value for o in found):
            missed.append((argv, value, [(o.token, o.value, o.read) for o in found]))
    assert missed == [], f"{len(missed)} copies the engine reads are not located; first: {missed[:3]}"


def _has_the_forms(argv: list) -> tuple[bool, bool]:
    spaced = any(a.startswith("--") and "=" in a and " " in a.partition("=")[2] and " " not in a.partition("=")[0]
                 for a in argv)
    return spaced, any(a.startswith("--kv") and "." in a.partition("=")[0] for a in argv)


def test_the_corpus_records_both_forms_read_at_every_vllm_release() -> None:
    """The property above covers both forms at every recorded vLLM release: the real parser read a
    value from each form there."""
    data = CORPUS["engines"]["vLLM"]
    for version in _parsers.recorded_versions("vLLM"):
        read = [argv for argv, row in zip(data["argvs"], _sections("vLLM", version)[0], strict=True)
                if _value_read(row) is not None]
        assert any(_has_the_forms(a)[0] for a in read) and any(_has_the_forms(a)[1] for a in read), version


# --- A role carrying either form, through find-flags, verify and preflight ----------------------

FORMS = {"spaced": ["--kv-cache-dtype=fp8 x"], "dotted": ["--kv-cache-dtype.x", "fp8"]}
#: One release per recorded vLLM table whose entry points read the forms (the dotted one: a
#: rewriting step that reads dotted options); every table reads the spaced one.
VERSIONS = [v for v in _parsers._distinct_tables("vLLM") if _parsers.steps("vLLM", v) & _rewrites.DOTTED_STEPS]


def _name(version: str, form: str) -> str:
    return f"v{version.replace('.', '-')}-{form}"


def _expected(version: str, form: str) -> tuple[str, _parsers.Reading]:
    """(the value the recorded parser of ``version`` reads from the form, its whole reading) of the
    argv the upgrade renders: the Binding's fp8, then the role's form."""
    reading = _argv.read_engine_args("vLLM", version, ["Qwen/Qwen3-8B", "--kv-cache-dtype", "fp8", *FORMS[form]])
    assert reading.state == _parsers.FAILED, reading  # fp8 x and {"x": "fp8"} are no cache dtype anywhere
    refused = _INVALID.match(reading.error)
    return (repr(reading.value) if reading.at_start else refused.group(1) if refused else ""), reading


@pytest.fixture(scope="module")
def forms_manifest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    objects: list[dict] = [SETTING_ON, binding("forms", "b", "fp8")]
    for version in VERSIONS:
        for form, args in FORMS.items():
            objects.append(deployment("forms", _name(version, form), "b", "vLLM", version, list(args)))
            objects.append(replica("forms", _name(version, form), 0, ["--kv-cache-dtype", "fp8", *args]))
    path = tmp_path_factory.mktemp("forms") / "forms.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}), encoding="utf-8")
    return path


def _run(*args: str) -> dict:
    status, out, err = in_process([*args, "-o", "json"])
    assert status == 1 and out, err  # every role fails: each subcommand reports an error
    return json.loads(out)


def test_find_flags_finds_the_form_with_the_value_its_release_reads(forms_manifest: Path) -> None:
    findings = {f["object"]["name"]: f for f in _run("find-flags", "-f", str(forms_manifest))["findings"]
                if f["code"] == "role-flag"}
    for version in VERSIONS:
        for form, args in FORMS.items():
            value, reading = _expected(version, form)
            finding = findings[_name(version, form)]
            assert [(o["token"], o["read"], repr(o["value"])) for o in finding["occurrences"]] == \
                [(args[0], True, value)], (version, form)
            assert reading.error in finding["message"] and "does not read as the flag" not in finding["message"]


def test_verify_judges_the_replica_with_the_engines_own_failure(forms_manifest: Path) -> None:
    document = _run("verify", "-n", "forms", "-f", str(forms_manifest))
    items = {item["deployment"]: item for item in document["items"]}
    findings = {f["deployment"]: f for f in document["findings"] if f["code"] == "replica-dtype-rejected"}
    for version in VERSIONS:
        for form, args in FORMS.items():
            value, reading = _expected(version, form)
            name = _name(version, form)
            assert items[name]["verdict"] == "rejected"
            assert [repr(o["value"]) for o in items[name]["occurrences"]] == ["'fp8'", value]
            # The failure in the engine's words, on the form's own entry (command: vllm serve MODEL, then the argv).
            assert reading.error in findings[name]["message"]
            assert f"{' '.join(args)} at command[5]" in findings[name]["message"], findings[name]["message"]


def test_preflight_predicts_the_failure_and_deletes_the_form_as_written(forms_manifest: Path) -> None:
    document = _run("preflight", "-f", str(forms_manifest))
    outcomes = {p["name"]: p for p in document["predictions"]}
    todo = {item["object"]["name"]: item for item in document["items"] if item.get("action") == "remove-flag"}
    for version in VERSIONS:
        for form, args in FORMS.items():
            name = _name(version, form)
            assert outcomes[name]["outcome"] == "fails", outcomes[name]
            deleted = " and ".join(f"extraArgs[{i}] {a!r}" for i, a in enumerate(args))
            assert deleted in todo[name]["what"], todo[name]


@pytest.mark.parametrize("version", VERSIONS)
def test_an_entry_a_dotted_option_takes_as_its_value_is_no_copy(version: str) -> None:
    """vLLM's rewriting takes the entry after a dotted option as its value, whatever it is: the flag
    there is no copy, as its recorded parser reads no value for it."""
    argv = ["Qwen/Qwen3-8B", "--max-model-len.x", "--kv-cache-dtype", "fp8"]
    reading = _argv.read_engine_args("vLLM", version, argv)
    assert reading.value is None and "--kv-cache-dtype:" not in reading.error, reading
    assert _verdicts.find_dtype_flags([*_ENTRY["vLLM"], *argv], "vLLM", version) == []


@pytest.mark.e2e  # through the real kubectl, against the fake API server
def test_a_live_cluster_holding_the_forms_is_judged_as_its_manifests_are(fake, kube_env, forms_manifest: Path) -> None:
    """The same objects on a cluster: find-flags, verify and preflight find and judge each form as
    they do offline (the same findings, word for word)."""
    seed(fake, json.loads(forms_manifest.read_text())["items"])
    for command in (["find-flags"], ["verify"], ["preflight"]):
        live = kvdtype(kube_env, *command, "-n", "forms", "-o", "json")
        offline = _run(*command, "-n", "forms", "-f", str(forms_manifest))
        assert live.returncode == 1, live.stderr
        assert [(f["code"], f["object"], f["message"]) for f in report(live)["findings"]] == \
            [(f["code"], f["object"], f["message"]) for f in offline["findings"]], command
        assert any(f["code"] in ("role-flag", "replica-dtype-rejected") for f in offline["findings"])
