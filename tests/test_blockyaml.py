"""The block-YAML reader gives exactly what the YAML reader gives, or leaves the text to it.

``_blockyaml.loads_block_mapping`` reads a kubeconfig without importing PyYAML. For every text it
reads, its mapping must be the YAML reader's (``_yamlread.load_all``, PyYAML's safe loader), compared
as ``repr`` (key order, ``True`` against ``1``); for every other text it must say None, never a
different answer. Checked on the kubeconfigs kubectl and the clusters' tools write (which it must
read itself, or it saves nothing), on the YAML reader's own test texts, on documents PyYAML's dumper
writes from generated data, and on text made of YAML's punctuation at random.
"""

from __future__ import annotations

import string

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _support import imported_by, kvdtype, seed, with_kubeconfig
from kubectl_kvdtype._kits.blockyaml import loads_block_mapping
from kubectl_kvdtype._sources import yamlread as _yamlread
from test_yamlread import PLAIN, TEXTS


def yaml_reader(text: str) -> str:
    """The YAML reader's one mapping of ``text`` as comparable text, or why it is no such thing."""
    try:
        documents = _yamlread.load_all(text)
    except Exception as error:  # noqa: BLE001 - an error: the block reader must say None
        return f"error: {type(error).__name__}"
    if len(documents) != 1 or not isinstance(documents[0], dict):
        return f"not one mapping: {documents!r}"
    return repr(documents[0])


def agrees(text: str) -> bool:
    """Whether the block reader read ``text`` (and, if it did, read it as the YAML reader does)."""
    read = loads_block_mapping(text)
    if read is not None:
        assert repr(read) == yaml_reader(text), text
    return read is not None


KIND = """apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t
    server: https://127.0.0.1:34567
  name: kind-kind
contexts:
- context:
    cluster: kind-kind
    user: kind-kind
  name: kind-kind
current-context: kind-kind
kind: Config
preferences: {}
users:
- name: kind-kind
  user:
    client-certificate-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t
    client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQ==
"""

EKS = """apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: LS0tLS1CRUdJTg==
    server: https://ABCDEF.gr7.us-west-2.eks.amazonaws.com
  name: arn:aws:eks:us-west-2:123456789012:cluster/prod
contexts:
- context:
    cluster: arn:aws:eks:us-west-2:123456789012:cluster/prod
    namespace: team-a
    user: arn:aws:eks:us-west-2:123456789012:cluster/prod
  name: prod
current-context: prod
kind: Config
preferences: {}
users:
- name: arn:aws:eks:us-west-2:123456789012:cluster/prod
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      args:
      - --region
      - us-west-2
      - eks
      - get-token
      - --cluster-name
      - prod
      command: aws
      env:
      - name: AWS_PROFILE
        value: prod
      interactiveMode: IfAvailable
      provideClusterInfo: false
"""

MINIKUBE = """apiVersion: v1
clusters:
- cluster:
    certificate-authority: /home/me/.minikube/ca.crt
    extensions:
    - extension:
        last-update: Mon, 01 Jan 2024 10:00:00 UTC
        provider: minikube.sigs.k8s.io
        version: v1.32.0
      name: cluster_info
    server: https://192.168.49.2:8443
  name: minikube
contexts:
- context:
    cluster: minikube
    namespace: default
    user: minikube
  name: minikube
current-context: minikube
kind: Config
preferences: {}
users:
- name: minikube
  user:
    client-certificate: /home/me/.minikube/profiles/minikube/client.crt
    client-key: /home/me/.minikube/profiles/minikube/client.key
"""

HAND_WRITTEN = """# written by hand
---
apiVersion: v1
kind: Config
current-context: 'dev'   # quoted
clusters:
  - name: "dev"
    cluster:
      server: https://dev.example:6443
      insecure-skip-tls-verify: true

contexts:
  - name: dev
    context: {cluster: dev, user: me}
users:
  - name: me
    user:
      token: abc.def
"""

#: GKE's install hint is one plain scalar over two lines: left to the YAML reader.
GKE = """apiVersion: v1
users:
- name: gke_project_zone_cluster
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: gke-gcloud-auth-plugin
      installHint: Install gke-gcloud-auth-plugin for use with kubectl by following
        https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl#install_plugin
      provideClusterInfo: true
"""


@pytest.mark.parametrize("text", [KIND, EKS, MINIKUBE], ids=["kind", "eks", "minikube"])
def test_the_kubeconfigs_the_clusters_tools_write_are_read_without_pyyaml(text):
    assert agrees(text)


@pytest.mark.parametrize("text", [HAND_WRITTEN, GKE], ids=["flow-mapping", "two-line-scalar"])
def test_what_it_is_not_sure_of_is_left_to_the_yaml_reader(text):
    assert not agrees(text)
    assert yaml_reader(text).startswith("{")  # valid YAML all the same


@pytest.mark.parametrize("text", TEXTS)
def test_the_yaml_readers_own_texts_are_read_alike_or_left(text):
    agrees(text)


@pytest.mark.parametrize("word", PLAIN)
def test_a_plain_scalar_is_read_as_yaml_1_1_reads_it_or_left(word):
    for text in (f"key: {word}\n", f"key:\n- {word}\n", f"{word}: value\n", f"a:\n  b: {word}  # note\n"):
        agrees(text)


_SAFE = st.text(string.ascii_letters + "-_./", min_size=1, max_size=12).filter(lambda s: s[0].isalpha())
_SCALARS = st.one_of(st.sampled_from(PLAIN), _SAFE, st.text(string.printable, max_size=20), st.booleans(),
                     st.none(), st.integers(), st.just({}), st.just([]))
_DATA = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.one_of(_SAFE, st.sampled_from(PLAIN)),
                                                                       inner, max_size=4)), max_leaves=25)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.dictionaries(_SAFE, _DATA, min_size=1, max_size=5), sort_keys=st.booleans(),
       width=st.sampled_from([20, 80, 10_000]))
def test_documents_pyyamls_dumper_writes_are_read_alike_or_left(data, sort_keys, width):
    agrees(yaml.safe_dump(data, default_flow_style=False, sort_keys=sort_keys, width=width))


_PLAIN_DATA = st.recursive(_SAFE, lambda inner: st.one_of(st.lists(inner, min_size=1, max_size=3),
                                                          st.dictionaries(_SAFE, inner, min_size=1, max_size=3)),
                           max_leaves=20)


@settings(max_examples=150, deadline=None)
@given(data=st.dictionaries(_SAFE, _PLAIN_DATA, min_size=1, max_size=5))
def test_block_yaml_of_plain_strings_is_read_by_the_block_reader_itself(data):
    """kubectl's shape (block style, plain strings, no line wrapped): read here, not left."""
    text = yaml.safe_dump(data, default_flow_style=False, width=10_000)
    if any(word in text for word in ("yes", "no", "on", "off", "true", "false", "null", "Yes", "No", "On", "Off",
                                     "True", "False", "Null", "YES", "NO", "ON", "OFF", "TRUE", "FALSE", "NULL")):
        agrees(text)  # a word YAML 1.1 reads otherwise may be quoted or left: either is right
        return
    assert agrees(text), text


_PIECES = ["- ", "-", "a: ", "b:", "key: ", "'q'", '"d"', "x", "yes", "1", "{}", "[]", "# c", " ", "  ", "\n",
           "\n  ", "\n- ", ": ", "---", "|", "&a ", "*a", "--flag"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=30))
def test_yamls_punctuation_at_random_is_read_alike_or_left(pieces):
    agrees("".join(pieces))


def test_nesting_past_the_limit_is_left_to_the_yaml_reader():
    deep = "".join(f"{'  ' * level}k{level}:\n" for level in range(6)) + f"{'  ' * 6}leaf: x\n"
    assert loads_block_mapping(deep, limit=10) is not None
    assert loads_block_mapping(deep, limit=5) is None


@pytest.mark.e2e  # a fresh Python process
def test_a_live_run_over_a_yaml_kubeconfig_reads_it_without_pyyaml(fake, kube_env, tmp_path):
    """The kubeconfig kubectl writes (YAML) costs a run no PyYAML, and is read as before."""
    from _support import EXAMPLES, documents, report

    seed(fake, documents(EXAMPLES))
    as_json = kvdtype(kube_env, "check", "-A", "-o", "json")
    config = yaml.safe_load(open(kube_env["KUBECONFIG"], encoding="utf-8"))
    written = tmp_path / "config"
    written.write_text(yaml.safe_dump(config, default_flow_style=False, width=10_000), encoding="utf-8")
    assert loads_block_mapping(written.read_text(encoding="utf-8")) == config
    result, modules = imported_by(["check", "-A", "-o", "json"], with_kubeconfig(kube_env, written))
    assert result.returncode == as_json.returncode == 1, result.stderr
    assert report(result)["items"] == report(as_json)["items"]
    assert {"yaml", "kubectl_kvdtype._sources.yamlread"} & modules == set()
