"""Where objects come from: the live cluster (paged, retried, every request within its timeout),
its offline twin for `-f` manifests, kubeconfig and connection flags, and names checked before
they reach a request path. The one place that talks to a cluster.
"""
