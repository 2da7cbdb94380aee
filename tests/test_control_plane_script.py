"""scripts/control-plane: the wrapper go.mod it writes from an upstream one, the pins that must
agree, what counts as cached, and a build that fails (or is cut short) leaving nothing that looks
cached, with a stand-in `go` on PATH (the real builds are .ci/run's, and the real tier's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from _controlplane import _script

script = _script()

KUBERNETES_GO_MOD = """module k8s.io/kubernetes

go 1.26.0

require (
\tgo.etcd.io/etcd/client/v3 v3.7.0
\tk8s.io/api v0.0.0
\tk8s.io/apimachinery v0.0.0 // indirect
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/apimachinery => ./staging/src/k8s.io/apimachinery // a comment
\tgithub.com/elsewhere/x => github.com/fork/x v1.2.3
)

replace k8s.io/kms => ./staging/src/k8s.io/kms
"""


def test_the_wrapper_replaces_each_local_sibling_with_its_published_version():
    apiserver = script.BY_NAME["kube-apiserver"]
    assert script.local_replacements(KUBERNETES_GO_MOD) == ["k8s.io/api", "k8s.io/apimachinery", "k8s.io/kms"]
    wrapper = script.wrapper_go_mod(apiserver, KUBERNETES_GO_MOD)
    minor_patch = script.KUBERNETES.lstrip("v").split(".", 1)[1]
    assert f"\tk8s.io/api => k8s.io/api v0.{minor_patch}\n" in wrapper
    assert f"\tk8s.io/kms => k8s.io/kms v0.{minor_patch}\n" in wrapper
    assert "github.com/fork/x" not in wrapper  # a replace by another module is upstream's own business
    assert f"require k8s.io/kubernetes {script.KUBERNETES}\n" in wrapper
    assert "tool k8s.io/kubernetes/cmd/kube-apiserver\n" in wrapper and "\ngo 1.26.0\n" in wrapper


def test_a_module_without_replaces_or_the_tool_directive_still_gets_a_wrapper():
    krew = script.BY_NAME["krew"]
    wrapper = script.wrapper_go_mod(krew, "module sigs.k8s.io/krew\n\ngo 1.17\n")
    assert "replace" not in wrapper and "\ngo 1.24\n" in wrapper  # the tool directive's Go at least


def test_kube_apiservers_version_ldflags_name_the_release():
    flags = script.BY_NAME["kube-apiserver"].ldflags
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        assert f"-X {package}.gitVersion={script.KUBERNETES}" in flags
        assert f"-X {package}.gitMinor={script.KUBERNETES.split('.')[1]}" in flags


def test_the_etcd_pin_must_be_what_kubernetes_requires():
    apiserver = script.BY_NAME["kube-apiserver"]
    agreeing = KUBERNETES_GO_MOD.replace("v3.7.0", script.ETCD)
    assert script.disagreement(apiserver, agreeing) is None
    why = script.disagreement(apiserver, agreeing.replace(script.ETCD, "v3.9.9"))
    assert why and "v3.9.9" in why and script.ETCD in why


def _cache_entry(root: Path, binary, recipe: dict, with_binary: bool = True) -> None:
    directory = script.directory(binary, root)
    directory.mkdir(parents=True)
    (directory / "build.json").write_text(json.dumps({"recipe": recipe}))
    if with_binary:
        (directory / binary.name).write_bytes(b"\x7fELF")


@pytest.mark.parametrize("case", ["same recipe", "other ldflags", "no binary", "no stamp"])
def test_cached_means_this_recipes_binary(tmp_path, case):
    etcd = script.BY_NAME["etcd"]
    recipe = etcd.recipe()
    if case == "other ldflags":
        recipe = dict(recipe, ldflags=["-s"])
    if case == "no stamp":
        script.directory(etcd, tmp_path).mkdir(parents=True)
        (script.directory(etcd, tmp_path) / etcd.name).write_bytes(b"\x7fELF")
    else:
        _cache_entry(tmp_path, etcd, recipe, with_binary=case != "no binary")
    assert script.cached(etcd, tmp_path) is (case == "same recipe")


def test_the_cache_is_outside_the_checkout_and_follows_xdg():
    assert script.cache_root({"XDG_CACHE_HOME": "/x"}) == Path("/x/kubectl-kvdtype/control-plane")
    assert script.cache_root({script.CACHE_VARIABLE: "/y", "XDG_CACHE_HOME": "/x"}) == Path("/y")
    assert script.ROOT not in script.cache_root({}).parents


#: A stand-in for `go`: `mod download -json` names the go.mod it was given, `build` writes half a
#: binary and fails unless GO_BUILD_SUCCEEDS is set.
FAKE_GO = """#!/bin/sh
case "$1 $2" in
  "mod download") printf '{"GoMod": "%s"}' "$FAKE_UPSTREAM" ;;
  "mod tidy") : > go.sum ;;
  "env GOVERSION") echo go1.26.0 ;;
  build*)
    while [ "$1" != "-o" ]; do shift; done
    printf 'half a binary' > "$2"
    [ -n "$GO_BUILD_SUCCEEDS" ] || { echo "signal: killed" >&2; exit 1; } ;;
esac
"""


def _build_with_fake_go(tmp_path: Path, succeeds: bool, names: tuple[str, ...] = ("etcd",)
                        ) -> subprocess.CompletedProcess:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (bindir / "go").write_text(FAKE_GO)
    (bindir / "go").chmod(0o755)
    upstream = tmp_path / "upstream.mod"
    upstream.write_text("module go.etcd.io/etcd/server/v3\n\ngo 1.26\n\nreplace go.etcd.io/etcd/api/v3 => ../api\n")
    env = dict(os.environ, PATH=os.pathsep.join([str(bindir), os.environ["PATH"]]), FAKE_UPSTREAM=str(upstream),
               **{script.CACHE_VARIABLE: str(tmp_path / "cache")})
    env.pop("GO_BUILD_SUCCEEDS", None)
    if succeeds:
        env["GO_BUILD_SUCCEEDS"] = "1"
    return subprocess.run([sys.executable, str(script.ROOT / "scripts" / "control-plane"), "build", *names],
                          env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.e2e  # runs the script, and a stand-in go
def test_a_failed_build_leaves_nothing_that_looks_cached_and_a_good_one_is_found_next_time(tmp_path):
    etcd = script.BY_NAME["etcd"]
    cache = tmp_path / "cache"
    failed = _build_with_fake_go(tmp_path, succeeds=False)
    assert failed.returncode == 1 and failed.stderr.startswith(f"error: building etcd {etcd.version}: `go build")
    assert "signal: killed" in failed.stderr and "Traceback" not in failed.stderr
    assert sorted(p.name for p in cache.iterdir()) == [".etcd.lock"]  # no half binary, no temporary directory
    built = _build_with_fake_go(tmp_path, succeeds=True)
    assert built.returncode == 0, built.stderr
    assert f"etcd {etcd.version}: built in " in built.stdout
    assert built.stdout.splitlines()[-1].startswith("control plane binaries: built in ")
    wrapper = (script.directory(etcd, cache) / "src" / "go.mod").read_text()
    assert f"go.etcd.io/etcd/api/v3 => go.etcd.io/etcd/api/v3 {etcd.version}" in wrapper
    assert script.cached(etcd, cache)
    again = _build_with_fake_go(tmp_path, succeeds=False)  # a failing go is not even asked
    assert again.returncode == 0 and again.stdout.splitlines()[-1] == "control plane binaries: cached (etcd)"


@pytest.mark.e2e  # runs the script, and a stand-in go
def test_a_bare_build_leaves_the_on_demand_binaries_to_whoever_names_them(tmp_path):
    """.ci/run's bare `build` never builds toxiproxy (the benchmark's, no CI test's); naming it does."""
    cache = tmp_path / "cache"
    bare = _build_with_fake_go(tmp_path, succeeds=True, names=())
    assert bare.returncode == 0, bare.stderr
    on_demand = [b for b in script.BINARIES if b.on_demand]
    assert on_demand and "toxiproxy" in {b.name for b in on_demand}
    for binary in script.BINARIES:
        assert script.cached(binary, cache) is (not binary.on_demand), binary.name
    named = _build_with_fake_go(tmp_path, succeeds=True, names=("toxiproxy",))
    assert named.returncode == 0, named.stderr
    assert script.cached(script.BY_NAME["toxiproxy"], cache)
    assert named.stdout.splitlines()[-1].startswith("control plane binaries: built in ")


@pytest.mark.e2e  # starts a stand-in kube-apiserver (/bin/true)
@pytest.mark.parametrize("server_defaults", [False, True])
def test_the_tests_list_serving_and_compaction_settings_unless_server_defaults(tmp_path, server_defaults):
    """The tests' kube-apiserver reads continue pages from etcd and compacts only when asked (the
    compaction tests need both); ``server_defaults`` (start --server-defaults, the benchmark's)
    leaves both to kube-apiserver."""
    from _controlplane import ControlPlane

    plane = ControlPlane(tmp_path, {"kube-apiserver": Path("/bin/true"), "etcd": Path("/bin/true")},
                         server_defaults=server_defaults)
    plane.etcd_url = "http://127.0.0.1:1"
    try:
        plane._start_apiserver()
        argv = plane._processes[-1][1].args
    finally:
        plane.stop()
    tests_settings = ["--etcd-compaction-interval", "0", "--feature-gates", "ListFromCacheSnapshot=false"]
    assert [setting for setting in tests_settings if setting in argv] == ([] if server_defaults else tests_settings)
    assert "--etcd-servers" in argv and "--secure-port" in argv
