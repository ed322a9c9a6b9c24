"""A program for kubesim's in-cluster test, run inside a pod: the Python `kubernetes` client with
`load_incluster_config()` (the service-account token and `ca.crt` at their real path, the
`KUBERNETES_SERVICE_*` variables) lists the pods labelled `app=witness` in its namespace and
prints them, then tries to list Secrets and prints the answer."""

import json

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

config.load_incluster_config()
core = client.CoreV1Api()
namespace = open("/var/run/secrets/kubernetes.io/serviceaccount/namespace").read()
print("server:", client.Configuration.get_default_copy().host, "namespace:", namespace)
pods = core.list_namespaced_pod(namespace, label_selector="app=witness")
print("pods:", " ".join(p.metadata.name for p in pods.items))
try:
    core.list_namespaced_secret(namespace)
    print("secrets: allowed")
except ApiException as e:
    print("secrets:", e.status, json.loads(e.body)["message"])
