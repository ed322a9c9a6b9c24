"""A replica for kubesim's pod-world test: it serves its own pod name on 0.0.0.0:8080, then
reports (one line each, on standard output) what a pod in a cluster sees: a second listener on
its port, its service-account files and what its token says, the Service variables, the API
server through in-cluster config (its pods listed, Secrets refused), the Service name resolved
and the other replica reached through the Service, and each new content of its mounted Secret.

Environment: POD_NAME (required), SERVICE (the Service in front of the replicas, default `web`),
SELECTOR (the replicas' label selector, default `app=web`), SECRET_FILE (the mounted Secret's
file, relative to the pod folder, default `etc/tls/tls.crt`).
"""

import base64
import json
import os
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ME = os.environ["POD_NAME"]
SERVICE = os.environ.get("SERVICE", "web")
SELECTOR = os.environ.get("SELECTOR", "app=web")
SECRET_FILE = os.environ.get("SECRET_FILE", "etc/tls/tls.crt")


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = ME.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def say(*parts):
    print(*parts, flush=True)


server = ThreadingHTTPServer(("0.0.0.0", 8080), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
try:
    socket.create_server(("0.0.0.0", 8080)).close()
    say("second listener: allowed")
except OSError as e:
    say("second listener:", os.strerror(e.errno))

sa = "/var/run/secrets/kubernetes.io/serviceaccount"
token = open(f"{sa}/token").read()
namespace = open(f"{sa}/namespace").read()
claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
bound = claims["kubernetes.io"]
say(f"token: {claims['sub']} bound to pod {bound['pod']['name']} on {bound['node']['name']}")
say("namespace:", namespace)
service_host = SERVICE.upper().replace("-", "_") + "_SERVICE_HOST"
say("service variable:", os.environ.get(service_host), os.environ.get("KUBERNETES_SERVICE_HOST"))

# In-cluster config, as every client library does it: the kubernetes Service's variables, the
# token and the CA from the service-account volume.
api = f"https://{os.environ['KUBERNETES_SERVICE_HOST']}:{os.environ['KUBERNETES_SERVICE_PORT']}"
tls = ssl.create_default_context(cafile=f"{sa}/ca.crt")
in_cluster = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=tls))


def call(path):
    request = urllib.request.Request(api + path, headers={"Authorization": f"Bearer {token}"})
    try:
        with in_cluster.open(request, timeout=10) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)
    except OSError as e:
        return None, {"message": str(e)}


direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
peer, error = None, None
deadline = time.time() + 60
while peer is None and time.time() < deadline:
    try:
        ip = socket.gethostbyname(SERVICE)
        fqdn = socket.gethostbyname(f"{SERVICE}.{namespace}.svc.cluster.local")
        name = direct.open(f"http://{SERVICE}:80/", timeout=2).read().decode()
        if name != ME:
            peer = (ip, fqdn, name)
    except OSError as e:
        error = e
    time.sleep(0.1)
if peer:
    say(f"resolved {SERVICE} -> {peer[0]} (fqdn {peer[1]}); peer through the Service: {peer[2]}")
else:
    say("no peer:", error)

# Both replicas exist now (the peer answered): list them, and try what the Role does not allow.
selector = urllib.parse.quote(SELECTOR)
code, pods = call(f"/api/v1/namespaces/{namespace}/pods?labelSelector={selector}")
if code == 200:
    say("pods:", " ".join(sorted(p["metadata"]["name"] for p in pods["items"])))
else:
    say("pods refused:", code, pods.get("message"))
code, status = call(f"/api/v1/namespaces/{namespace}/secrets")
say("secrets:", code, status.get("message"))

secret = os.path.join(os.environ["KUBESIM_POD_ROOT"], SECRET_FILE)
seen = None
while True:
    try:
        with open(secret) as f:
            current = f.read()
    except OSError:
        current = None
    if current != seen:
        say("secret:", current)
        seen = current
    time.sleep(0.05)
