"""The kubernetes client, imported plainly through its public API, for what remains its job: the
kubeconfigs the direct transport declines (auth providers such as oidc, proxies, an exec plugin
beside another credential: ``_sources.transport`` says which).

Nothing of it is entered around its ``__init__``, and none of its modules is patched: importing
``kubernetes`` runs its ``__init__`` (the dynamic client, watch, stream, and requests and oauthlib
for the OIDC refresh; the generated API classes and models stay unimported until named), a cost
measured in docs/development.md that only a run over the client's transport pays. It never runs an
exec credential plugin: ``client_transport.configure`` hands it the answer of one run by
``_sources.credentials``. What is used, each a public name of the client:
``kubernetes.client.Configuration``, ``kubernetes.client.ApiException``,
``kubernetes.client.rest.RESTClientObject``, ``kubernetes.config.ConfigException`` and
``kubernetes.config.load_kube_config_from_dict`` (setup.cfg's bounds are the versions tested with them).
"""

from __future__ import annotations

from kubernetes import client as _client
from kubernetes import config as _config
from kubernetes.client import rest as _rest

# Each name below is imported here for the client's transport (``X = ...``: the public names, one place).
Configuration = _client.Configuration
ApiException = _client.ApiException
RESTClientObject = _rest.RESTClientObject
ConfigException = _config.ConfigException
load_kube_config_from_dict = _config.load_kube_config_from_dict
