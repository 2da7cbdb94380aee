"""The in-cluster configuration (``_sources/incluster``): read as client-go reads it in a Pod, from a
service account directory the test provides (``KUBECTL_KVDTYPE_SERVICE_ACCOUNT_DIR``), and served by
the direct transport on the real kube-apiserver, as kubectl given the same server, token, CA and
namespace sees it."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from kubectl_kvdtype._kits.status import KvdtypeError
from kubectl_kvdtype._sources import incluster
from kubectl_kvdtype._sources.connection import ConnectionOptions
from kubectl_kvdtype._sources.kubeconfig import direct_settings, resolve


def _account(directory: Path, token: str = "tok\n", ca: str = "", namespace: str = "team-a") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "token").write_text(token)
    (directory / "ca.crt").write_text(ca)
    (directory / "namespace").write_text(namespace)
    return directory


def _environ(directory: Path, **extra: str) -> dict:
    return {"HOME": str(directory / "no-home"), "KUBECTL_KVDTYPE_SERVICE_ACCOUNT_DIR": str(directory),
            "KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443", **extra}


def test_the_service_account_is_read_as_client_go_reads_it(tmp_path):
    from fakekube import TEST_CA_PEM

    folder = _account(tmp_path / "sa", ca=TEST_CA_PEM)
    account = incluster.service_account(_environ(folder))
    assert (account.server, account.token, account.ca_file, account.namespace) == \
        ("https://10.0.0.1:443", "tok", str(folder / "ca.crt"), "team-a")
    assert incluster.service_account(_environ(folder, KUBERNETES_SERVICE_HOST="fd00::1")).server == "https://[fd00::1]:443"
    assert incluster.service_account(_environ(folder, POD_NAMESPACE="other")).namespace == "other"
    (folder / "ca.crt").write_text("not a certificate")
    (folder / "namespace").unlink()
    account = incluster.service_account(_environ(folder))
    assert (account.ca_file, account.namespace) == (None, "default")  # the system's CAs, as client-go goes on
    with pytest.raises(KvdtypeError, match="KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined"):
        incluster.service_account(_environ(folder, KUBERNETES_SERVICE_PORT=""))
    (folder / "token").unlink()
    with pytest.raises(KvdtypeError, match=f"open {folder / 'token'}: no such file or directory"):
        incluster.service_account(_environ(folder))


def test_with_no_kubeconfig_the_service_account_goes_direct_and_the_flags_still_replace_it(tmp_path):
    folder = _account(tmp_path / "sa")
    resolved = resolve(ConnectionOptions(), _environ(folder))
    settings = direct_settings(resolved)
    assert resolved.in_cluster and resolved.namespace == "team-a" and settings is not None
    assert (settings.host, settings.authorization, settings.ca_file) == ("https://10.0.0.1:443", "Bearer tok", None)
    flagged = direct_settings(resolve(ConnectionOptions(token="other", impersonate="alice"), _environ(folder)))
    assert flagged is not None and flagged.authorization == "Bearer other"


def test_the_real_server_takes_the_service_account_as_kubectl_takes_its_settings(real, tmp_path):
    from _support import imported_by

    real.apply([{"apiVersion": "worker.gpustack.ai/v1", "kind": "KVCachePoolBinding",
                 "metadata": {"name": "chat"},
                 "spec": {"poolRef": {"name": "shared-dram"}, "domain": {"name": "chat", "blockSize": 64,
                                                                         "dtype": "fp8_e4m3"}}}])
    token = json.loads(real.kubeconfig(user="reader").read_text())["users"][0]["user"]["token"]
    folder = _account(tmp_path / "sa", token=token + "\n", ca=real.plane.ca_pem, namespace=real.namespace)
    where = urlsplit(real.plane.url)
    env = {k: v for k, v in real.env(user="reader").items() if k != "KUBECONFIG"}
    env.update(HOME=str(tmp_path / "empty-home"), KUBECTL_KVDTYPE_SERVICE_ACCOUNT_DIR=str(folder),
               KUBERNETES_SERVICE_HOST=str(where.hostname), KUBERNETES_SERVICE_PORT=str(where.port))
    result, modules = imported_by(["check", "-o", "json"], env)
    assert result.returncode in (0, 1), result.stderr
    names = [item["name"] for item in json.loads(result.stdout)["items"]]
    (tmp_path / "none").write_text("")  # kubectl with nothing but the flags
    oracle = real.kubectl("get", "kvcpb", "-o", "name", "--server", real.plane.url, "--token", token,
                          "--certificate-authority", str(folder / "ca.crt"), "-n", real.namespace,
                          "--kubeconfig", str(tmp_path / "none"))
    assert oracle.returncode == 0, oracle.stderr
    assert names == [line.rpartition("/")[2] for line in oracle.stdout.split()] == ["chat"]
    assert "urllib3" not in modules and "kubernetes" not in modules  # the direct transport
