"""kubectl's connection flags (--server, --token, --cluster, --user, TLS, client certificates,
impersonation, basic auth, --cache-dir) through real kubectl against the fake API server.

Each test runs the plugin as ``kubectl kvdtype ...`` and, as the oracle, kubectl itself with the same
flags over the same fake: the requests must carry the same server, credentials and headers, and a
combination kubectl refuses is refused with kubectl's own sentence (exit 2 here, 1 for kubectl).
"""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Optional

import pytest

from _oidc import FRESH_EXP, identity_provider, jwt, oidc_user
from _support import (
    EXAMPLES,
    PLUGIN,
    assert_one_clean_line,
    cluster_of,
    documents,
    kubeconfig,
    seed,
    user_of,
    with_kubeconfig,
)
from conftest import kubectl_path, run_kubectl
from fakekube import TEST_CLIENT_CA_PEM, TEST_CLIENT_CERT_PEM, TEST_CLIENT_KEY_PEM, FakeKube

DEAD = "https://127.0.0.1:9"  # nothing listens there: only a flag can make a run reach the fake
TOKEN = "fake-token"


def plugin(env: dict, *args: str, cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
    """``kubectl kvdtype ARGS``: kubectl dispatches the plugin, which parses the flags itself."""
    return subprocess.run([kubectl_path(), "kvdtype", *args], env=env, cwd=cwd, text=True,
                          capture_output=True, timeout=60)


def oracle(env: dict, *flags: str, cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
    """kubectl itself, with the same flags, reading the same kind of objects."""
    return subprocess.run([kubectl_path(), *flags, "get", "modeldeployments.worker.gpustack.ai", "-A", "-o", "name"],
                          env=env, cwd=cwd, text=True, capture_output=True, timeout=60)


def both(fake: FakeKube, env: dict, *flags: str, cwd: Optional[Path] = None, after: bool = True):
    """(plugin result, its requests, kubectl result, its requests). ``after``: the flags follow the
    subcommand (``kubectl kvdtype check FLAGS``); else they come before it."""
    fake.clear_log()
    args = ("check", "-A", *flags) if after else (*flags, "check", "-A")
    mine = plugin(env, *args, cwd=cwd)
    my_requests = list(fake.requests)
    fake.clear_log()
    theirs = oracle(env, *flags, cwd=cwd)
    return mine, my_requests, theirs, list(fake.requests)


def served(records) -> list:
    """Requests that needed authentication (everything but /version and health)."""
    return [r for r in records if r.path not in ("/version", "/healthz", "/livez", "/readyz")]


def refused_alike(mine: subprocess.CompletedProcess, theirs: subprocess.CompletedProcess, sentence: str,
                  status: int = 2) -> None:
    assert theirs.returncode == 1 and sentence in theirs.stderr, theirs.stderr
    assert mine.returncode == status, mine.stderr
    assert_one_clean_line(mine.stderr)
    assert sentence in mine.stderr


# --- --server / -s ----------------------------------------------------------------------------

@pytest.mark.parametrize("spelling", ["--server", "-s", "--server="])
@pytest.mark.parametrize("after", [True, False], ids=["after-subcommand", "before-subcommand"])
def test_server_replaces_the_kubeconfig_server(fake, kube_env, tmp_path, spelling, after):
    env = with_kubeconfig(kube_env, kubeconfig(fake, tmp_path / "kc", lambda c: cluster_of(c).update(server=DEAD)))
    flags = [spelling + fake.url] if spelling.endswith("=") else [spelling, fake.url]
    mine, requests, theirs, their_requests = both(fake, env, *flags, after=after)
    assert theirs.returncode == 0, theirs.stderr
    assert mine.returncode == 0, mine.stderr
    assert served(requests) and served(their_requests)
    # Without the flag both go to the kubeconfig's (dead) server.
    mine, requests, theirs, _ = both(fake, env)
    assert mine.returncode == 3 and theirs.returncode == 1 and not requests
    assert "cannot reach the cluster at https://127.0.0.1:9" in mine.stderr


# --- --token ---------------------------------------------------------------------------------------

def test_token_replaces_the_kubeconfig_token_and_is_never_shown(fake, kube_env, tmp_path):
    env = with_kubeconfig(kube_env, kubeconfig(fake, tmp_path / "kc", lambda c: user_of(c).update(token="stale")))
    mine, requests, theirs, their_requests = both(fake, env, "--token", TOKEN)
    assert theirs.returncode == 0 and mine.returncode == 0, mine.stderr
    assert {r.headers.get("Authorization") for r in served(requests)} == {f"Bearer {TOKEN}"}
    assert {r.headers.get("Authorization") for r in served(their_requests)} == {f"Bearer {TOKEN}"}
    # A wrong token: refused by the server, and the token appears nowhere in what the user sees.
    secret = "s3cr3t-token-value"
    mine, requests, theirs, _ = both(fake, env, f"--token={secret}")
    assert theirs.returncode == 1 and mine.returncode == 3
    assert {r.headers.get("Authorization") for r in served(requests)} == {f"Bearer {secret}"}
    assert_one_clean_line(mine.stderr)
    assert "401" in mine.stderr and secret not in mine.stderr + mine.stdout
    for args in (["check", "--token", secret, "-o", "json"], ["--token", secret, "check", "--bogus"],
                 ["--t=" + secret, "check"]):  # a run, a usage error, an ambiguous abbreviation
        result = plugin(env, *args)
        assert result.returncode in (2, 3) and secret not in result.stdout + result.stderr, result.stderr


# --- --cluster and --user --------------------------------------------------------------------------

def _two_of_each(fake: FakeKube, path: Path) -> Path:
    """Context "fake" names cluster "dead" and user "stale"; "live" and "ci-bot" work."""
    def edit(config: dict) -> None:
        live, user = cluster_of(config), user_of(config)
        config["clusters"] = [{"name": "dead", "cluster": {**live, "server": DEAD}}, {"name": "live", "cluster": live}]
        config["users"] = [{"name": "stale", "user": {"token": "stale"}}, {"name": "ci-bot", "user": user}]
        config["contexts"][0]["context"].update(cluster="dead", user="stale")
    return kubeconfig(fake, path, edit)


def test_cluster_and_user_pick_other_kubeconfig_entries(fake, kube_env, tmp_path):
    env = with_kubeconfig(kube_env, _two_of_each(fake, tmp_path / "kc"))
    mine, _, theirs, _ = both(fake, env, "--user", "ci-bot")
    assert mine.returncode == 3 and theirs.returncode == 1  # still the dead cluster
    mine, requests, theirs, _ = both(fake, env, "--cluster", "live")
    assert mine.returncode == 3 and theirs.returncode == 1  # the live cluster, the stale user: 401
    assert {r.status for r in served(requests)} == {401}
    mine, requests, theirs, their_requests = both(fake, env, "--cluster", "live", "--user", "ci-bot")
    assert theirs.returncode == 0 and mine.returncode == 0, mine.stderr
    assert {r.headers.get("Authorization") for r in served(requests)} == {f"Bearer {TOKEN}"}
    assert {r.headers.get("Authorization") for r in served(their_requests)} == {f"Bearer {TOKEN}"}


@pytest.mark.parametrize("flags, sentence", [
    (["--user", "nobody"], 'auth info "nobody" does not exist'),
    (["--cluster", "nowhere"], 'no server found for cluster "nowhere"'),
])
def test_unknown_cluster_or_user_is_refused_like_kubectl(fake, kube_env, flags, sentence):
    """A bad kubeconfig choice, exit 3 as an unknown --context is, in kubectl's words."""
    mine, requests, theirs, _ = both(fake, kube_env, *flags)
    refused_alike(mine, theirs, sentence, status=3)
    assert not requests


# --- impersonation ---------------------------------------------------------------------------------

def test_as_group_repeated_and_as_uid_send_kubectls_impersonation_headers(fake, kube_env):
    fake.clear_log()
    mine = plugin(kube_env, "--as-group", "ops", "check", "-A", "--as", "alice", "--as-group=system:masters",
                  "--as-uid", "1001")
    requests = served(fake.requests)
    fake.clear_log()
    theirs = oracle(kube_env, "--as", "alice", "--as-group", "ops", "--as-group=system:masters", "--as-uid", "1001")
    their_requests = served(fake.requests)
    assert mine.returncode == 0 and theirs.returncode == 0, mine.stderr
    for records in (requests, their_requests):
        assert records
        for record in records:
            assert record.header_values("Impersonate-User") == ["alice"]
            assert record.header_values("Impersonate-Group") == ["ops", "system:masters"]
            assert record.header_values("Impersonate-Uid") == ["1001"]


def test_as_user_extra_sends_kubectls_extra_headers_byte_for_byte(fake, kube_env, tmp_path):
    """Keys that need encoding (a slash, a space, a per cent sign, capitals, none at all), a value
    holding ``=``, a key given twice, and the kubeconfig user's own extras merged key by key: the
    same ``Impersonate-Extra-*`` header lines as kubectl's, name and value."""
    env = with_kubeconfig(kube_env, kubeconfig(fake, tmp_path / "kc", lambda c: user_of(c).update(
        {"as": "alice", "as-user-extra": {"Site": ["x"], "team": ["k"]}})))
    flags = ("--as-user-extra", "team=a", "--as-user-extra", "team=b", "--as-user-extra", "a/b=c",
             "--as-user-extra", "x y=1", "--as-user-extra", "=z", "--as-user-extra", "k=v=w", "--as-user-extra", "%=p")
    mine, requests, theirs, their_requests = both(fake, env, *flags)
    assert mine.returncode == 0 and theirs.returncode == 0, (mine.stderr, theirs.stderr)

    def extras(records) -> set:
        return {frozenset((k, v) for k, v in record.header_lines if k.lower().startswith("impersonate-"))
                for record in served(records)}

    assert extras(requests) == extras(their_requests) == {frozenset({
        ("Impersonate-User", "alice"), ("Impersonate-Extra-Site", "x"), ("Impersonate-Extra-Team", "a"),
        ("Impersonate-Extra-Team", "b"), ("Impersonate-Extra-A%2fb", "c"), ("Impersonate-Extra-X%20y", "1"),
        ("Impersonate-Extra-", "z"), ("Impersonate-Extra-K", "v=w"), ("Impersonate-Extra-%25", "p")})}


@pytest.mark.parametrize("flags", [["--as-group", "ops"], ["--as-uid", "1001"], ["--as-user-extra", "team=a"]])
def test_groups_or_uid_without_as_are_refused_like_kubectl(fake, kube_env, flags):
    mine, requests, theirs, _ = both(fake, kube_env, *flags)
    refused_alike(mine, theirs, "requesting uid, groups or user-extra for fake-user without impersonating a user")
    assert not requests


# --- TLS: --certificate-authority, --insecure-skip-tls-verify, --tls-server-name ------------------

def _wrong_ca(fake: FakeKube, path: Path) -> Path:
    """The kubeconfig trusts a CA that did not sign the server's certificate."""
    return kubeconfig(fake, path, lambda c: cluster_of(c).update(
        {"certificate-authority-data": base64.b64encode(TEST_CLIENT_CA_PEM.encode()).decode()}))


def test_certificate_authority_replaces_the_kubeconfig_ca(fake, kube_env, tmp_path):
    env = with_kubeconfig(kube_env, _wrong_ca(fake, tmp_path / "kc"))
    mine, requests, theirs, _ = both(fake, env)
    assert mine.returncode == 3 and theirs.returncode == 1 and not requests
    assert "TLS failure" in mine.stderr and "certificate" in theirs.stderr
    (tmp_path / "ca.pem").write_text(fake.ca_pem)
    # A relative path, as kubectl reads it: from the working directory.
    mine, requests, theirs, their_requests = both(fake, env, "--certificate-authority", "ca.pem", cwd=tmp_path)
    assert theirs.returncode == 0 and mine.returncode == 0, mine.stderr
    assert served(requests) and served(their_requests)


@pytest.mark.parametrize("spelling", ["--insecure-skip-tls-verify", "--insecure-skip-tls-verify=true"])
def test_insecure_skip_tls_verify_skips_verification(fake, kube_env, tmp_path, spelling):
    env = with_kubeconfig(kube_env, _wrong_ca(fake, tmp_path / "kc"))
    mine, requests, theirs, their_requests = both(fake, env, spelling)
    assert theirs.returncode == 0 and mine.returncode == 0, mine.stderr
    assert served(requests) and served(their_requests)
    mine, _, theirs, _ = both(fake, env, "--insecure-skip-tls-verify=false")
    assert mine.returncode == 3 and theirs.returncode == 1  # false: the kubeconfig's CA again


def test_insecure_with_a_certificate_authority_is_refused_like_kubectl(fake, kube_env, tmp_path):
    (tmp_path / "ca.pem").write_text(fake.ca_pem)
    mine, requests, theirs, _ = both(fake, kube_env, "--insecure-skip-tls-verify",
                                     "--certificate-authority", str(tmp_path / "ca.pem"))
    refused_alike(mine, theirs, "specifying a root certificates file with the insecure flag is not allowed")
    assert not requests


def test_tls_server_name_is_the_name_asked_for_and_verified(fake, kube_env, tmp_path):
    mine, requests, theirs, their_requests = both(fake, kube_env, "--tls-server-name", "localhost")
    assert theirs.returncode == 0 and mine.returncode == 0, mine.stderr
    assert {r.sni for r in requests} == {"localhost"} == {r.sni for r in their_requests}
    mine, requests, theirs, _ = both(fake, kube_env, "--tls-server-name", "api.elsewhere.example")
    assert mine.returncode == 3 and theirs.returncode == 1 and not requests
    assert "TLS failure" in mine.stderr and "api.elsewhere.example" in theirs.stderr
    # kubectl's rule: --server drops the kubeconfig's tls-server-name.
    env = with_kubeconfig(kube_env, kubeconfig(fake, tmp_path / "kc", lambda c: cluster_of(c).update(
        {"tls-server-name": "api.elsewhere.example"})))
    assert both(fake, env)[0].returncode == 3
    mine, _, theirs, _ = both(fake, env, "--server", fake.url)
    assert mine.returncode == 0 and theirs.returncode == 0, mine.stderr


# --- client certificates -----------------------------------------------------------------------------

@pytest.fixture
def client_pair(tmp_path: Path) -> tuple[str, str]:
    (tmp_path / "client.pem").write_text(TEST_CLIENT_CERT_PEM)
    (tmp_path / "client-key.pem").write_text(TEST_CLIENT_KEY_PEM)
    return str(tmp_path / "client.pem"), str(tmp_path / "client-key.pem")


def test_client_certificate_and_key_are_presented(fake, kube_env, tmp_path, client_pair):
    env = with_kubeconfig(kube_env, kubeconfig(fake, tmp_path / "kc", lambda c: user_of(c).pop("token")))
    mine, requests, theirs, _ = both(fake, env)
    assert mine.returncode == 3 and theirs.returncode == 1  # no credentials: 401
    cert, key = client_pair
    mine, requests, theirs, their_requests = both(fake, env, "--client-certificate", cert, "--client-key", key)
    assert theirs.returncode == 0 and mine.returncode == 0, mine.stderr
    assert {r.client_cert for r in served(requests)} == {"ci-bot"} == {r.client_cert for r in served(their_requests)}
    assert all("Authorization" not in r.headers for r in requests)


def test_a_client_certificate_without_its_key_is_refused_like_kubectl(fake, kube_env, client_pair):
    mine, requests, theirs, _ = both(fake, kube_env, "--client-certificate", client_pair[0])
    refused_alike(mine, theirs, "client-key-data or client-key must be specified for fake-user "
                                "to use the clientCert authentication method.")
    assert not requests


# --- basic auth -----------------------------------------------------------------------------------------

def test_username_and_password_send_basic_auth(fake, kube_env, tmp_path):
    """The kubernetes client (37.x) still reads a kubeconfig user's username/password as basic
    auth, and kubectl 1.37 still has the flags: both send ``Authorization: Basic``."""
    fake.passwords = {"alice": "open-sesame"}
    env = with_kubeconfig(kube_env, kubeconfig(fake, tmp_path / "kc", lambda c: user_of(c).pop("token")))
    mine, requests, theirs, their_requests = both(fake, env, "--username", "alice", "--password", "open-sesame")
    assert theirs.returncode == 0 and mine.returncode == 0, mine.stderr
    expected = "Basic " + base64.b64encode(b"alice:open-sesame").decode()
    assert {r.headers.get("Authorization") for r in served(requests)} == {expected}
    assert {r.headers.get("Authorization") for r in served(their_requests)} == {expected}
    wrong = plugin(env, "check", "-A", "--username", "alice", "--password", "not-the-password")
    assert wrong.returncode == 3 and "not-the-password" not in wrong.stderr + wrong.stdout


def test_token_with_basic_auth_is_refused_like_kubectl(fake, kube_env):
    mine, requests, theirs, _ = both(fake, kube_env, "--token", TOKEN, "--username", "alice", "--password", "pw")
    refused_alike(mine, theirs, "more than one authentication method found for fake-user; "
                                "found [token basicAuth], only one is allowed")
    assert TOKEN not in mine.stderr and not requests


# --- --cache-dir, and how kubectl hands the flags over ------------------------------------------------

@pytest.mark.parametrize("after", [True, False])
def test_cache_dir_is_accepted_and_nothing_is_cached(fake, kube_env, tmp_path, after):
    """The plugin keeps no discovery or HTTP cache (kubectl would fill the directory)."""
    cache = tmp_path / "cache"
    fake.clear_log()
    args = ("check", "-A", "--cache-dir", str(cache)) if after else ("--cache-dir", str(cache), "check", "-A")
    mine = plugin(kube_env, *args)
    assert mine.returncode == 0, mine.stderr
    assert served(fake.requests) and not cache.exists()
    assert oracle(kube_env, "--cache-dir", str(cache)).returncode == 0 and cache.exists()


def test_kubectl_hands_the_flags_over_verbatim_and_refuses_them_before_the_plugin_name(fake, kube_env):
    # After the plugin's name every word is the plugin's (kubectl does not even read --token there) ...
    result = plugin(kube_env, "check", "-A", "--server", fake.url, "--token", TOKEN, "--insecure-skip-tls-verify")
    assert result.returncode == 0, result.stderr
    # ... and before it kubectl refuses: a global flag cannot reach a plugin that way.
    before = run_kubectl(["--token", TOKEN, "kvdtype", "check"], kube_env)
    assert before.returncode == 1 and "flags cannot be placed before plugin name: --token" in before.stderr


def test_no_kubeconfig_at_all_with_server_and_token(fake, kube_env, tmp_path):
    env = {k: v for k, v in kube_env.items() if k != "KUBECONFIG"}  # HOME is tmp_path: no ~/.kube/config
    (tmp_path / "ca.pem").write_text(fake.ca_pem)
    flags = ("--server", fake.url, "--token", TOKEN, "--certificate-authority", str(tmp_path / "ca.pem"))
    mine, requests, theirs, _ = both(fake, env, *flags)
    assert theirs.returncode == 0 and mine.returncode == 0, mine.stderr
    assert {r.headers.get("Authorization") for r in served(requests)} == {f"Bearer {TOKEN}"}


# --- no token in rebind's backups and journal ----------------------------------------------------------

def test_escape_rebind_backups_and_journal_carry_no_token(fake, kube_env, tmp_path):
    seed(fake, documents(EXAMPLES))
    secret = "rebind-s3cret-token"
    fake.token = secret
    env = with_kubeconfig(kube_env, kubeconfig(fake, tmp_path / "kc", lambda c: user_of(c).update(token="stale")))
    work = tmp_path / "work"
    work.mkdir()
    result = plugin(env, "escape", "rebind", "legacy", "-n", "team-a", "--dtype", "bfloat16", "--apply",
                    "--token", secret, cwd=work)
    assert result.returncode == 0, result.stderr
    written = [p for p in work.rglob("*") if p.is_file()]
    assert any(p.name == "journal.json" for p in written) and len(written) > 1
    for path in written:
        assert secret not in path.read_text(), path
    assert secret not in result.stdout + result.stderr


# --- completion ------------------------------------------------------------------------------------------

def _complete(env: dict, *words: str) -> tuple[list[str], str]:
    result = run_kubectl(["__complete", "kvdtype", *words], env)
    lines = result.stdout.splitlines()
    return [line.split("\t")[0] for line in lines[:-1]], lines[-1]


def test_completion_offers_the_flags_and_their_values(fake, kube_env, tmp_path):
    env = with_kubeconfig(kube_env, _two_of_each(fake, tmp_path / "kc"))
    assert _complete(env, "check", "--tok") == (["--token"], ":4")
    assert _complete(env, "--insecure-s") == (["--insecure-skip-tls-verify"], ":4")
    assert set(_complete(env, "check", "--as")[0]) == {"--as", "--as-group", "--as-uid", "--as-user-extra"}
    assert _complete(env, "check", "--cluster", "") == (["dead", "live"], ":4")
    assert _complete(env, "--user", "c") == (["ci-bot"], ":4")
    for flag in ("--certificate-authority", "--client-certificate", "--client-key", "--cache-dir"):
        assert _complete(env, "check", flag, "") == ([], ":0")  # the shell completes file names
    for flag in ("--token", "--server", "--password"):
        assert _complete(env, "check", flag, "") == ([], ":4")


def test_completed_names_are_read_with_the_connection_flags(fake, kube_env, tmp_path):
    seed(fake, documents(EXAMPLES))
    env = with_kubeconfig(kube_env, _two_of_each(fake, tmp_path / "kc"))
    assert _complete(env, "verify", "-n", "team-a", "") == ([], ":4")  # the dead cluster: nothing
    found, _ = _complete(env, "verify", "-n", "team-a", "--server", fake.url, "--token", TOKEN, "")
    team_a = sorted(o["metadata"]["name"] for o in documents(EXAMPLES)
                    if o.get("kind") == "ModelDeployment" and o["metadata"].get("namespace") == "team-a")
    assert found == team_a
    fake.clear_log()
    _complete(env, "verify", "-n", "team-a", "--cluster", "live", "--user", "ci-bot", "--as", "alice",
              "--as-group", "ops", "")
    assert {tuple(r.header_values("Impersonate-Group")) for r in served(fake.requests)} == {("ops",)}


def test_shell_scripts_complete_the_flags(kube_env, tmp_path):
    import shutil

    for shell, command in (("bash", None), ("zsh", "zsh"), ("fish", "fish")):
        if command and not shutil.which(command):
            continue
        script = tmp_path / f"kvdtype.{shell}"
        script.write_text(subprocess.run([PLUGIN, "completion", shell], env=kube_env, text=True,
                                         capture_output=True, timeout=60).stdout)
        if shell == "bash":
            program = (f"source {script}\nCOMP_LINE='kubectl-kvdtype check --insecure-s'; COMP_POINT=${{#COMP_LINE}}\n"
                       "_kubectl_kvdtype_complete\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n")
            argv = ["bash", "--norc", "--noprofile", "-c", program]
        elif shell == "zsh":
            program = (f"autoload -U compinit && compinit -u -D\nsource {script}\n"
                       "_describe() { print -l -- \"${(@P)${@[-1]}}\"; }\n"
                       "words=(kubectl-kvdtype check --insecure-s); CURRENT=3; _kubectl_kvdtype\n")
            argv = ["zsh", "-f", "-c", program]
        else:
            argv = ["fish", "--no-config", "-c", f"source {script}; complete -C 'kubectl-kvdtype check --insecure-s'"]
        result = subprocess.run(argv, env=kube_env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, (shell, result.stderr)
        assert "--insecure-skip-tls-verify" in result.stdout, (shell, result.stdout)


# --- OIDC auth provider: the refresh the client imports on first use -------------------------------

def test_oidc_auth_provider_refreshes_an_expired_id_token(kube_env, tmp_path):
    """An expired id-token is refreshed at the identity provider (its discovery document, then a
    refresh-token grant) and the new one is sent; the kubeconfig file is left as it was."""
    fresh = jwt({"iss": "test", "exp": FRESH_EXP})
    with identity_provider(fresh) as (issuer, grants), FakeKube(token=fresh) as fake:
        seed(fake, documents(EXAMPLES))
        path = kubeconfig(fake, tmp_path / "oidc", lambda config: config["users"][0].update(user=oidc_user(issuer)))
        before = path.read_bytes()
        # oauthlib refuses a plain-HTTP token endpoint unless told this is a test.
        env = dict(kube_env, KUBECONFIG=str(path), OAUTHLIB_INSECURE_TRANSPORT="1")
        result = plugin(env, "check", "-A", "-o", "json")
        assert result.returncode == 1, result.stderr  # the examples hold error findings
        assert len(json.loads(result.stdout)["items"]) == 8
        assert [(g.get("grant_type"), g.get("refresh_token")) for g in grants] == [(["refresh_token"], ["refresh-1"])]
        assert {r.headers.get("Authorization") for r in served(fake.requests)} == {f"Bearer {fresh}"}
        assert path.read_bytes() == before


def test_an_extras_key_beyond_latin_1_is_encoded_as_kubectl_encodes_it_and_a_value_is_checked(fake, kube_env):
    mine, requests, theirs, their_requests = both(fake, kube_env, "--as", "alice", "--as-user-extra", "ключ=v")
    assert mine.returncode == 0 and theirs.returncode == 0, (mine.stderr, theirs.stderr)
    for records in (requests, their_requests):
        assert served(records)[0].header_values("Impersonate-Extra-%d0%ba%d0%bb%d1%8e%d1%87") == ["v"]
    refused = plugin(kube_env, "check", "-A", "--as", "alice", "--as-user-extra", "k=a\nb")
    assert refused.returncode == 2 and "--as-user-extra holds a line break" in refused.stderr, refused.stderr
