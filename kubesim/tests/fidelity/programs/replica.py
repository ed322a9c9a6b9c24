"""A replica for kubesim's pod-world test: it serves its own pod name on 0.0.0.0:8080, then
reports (one line each, on standard output) what a pod in a cluster sees: a second listener on
its port, its service-account files, the Service variables, the Service name resolved and the
other replica reached through the Service, and each new content of its mounted Secret."""

import os
import socket
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ME = os.environ["POD_NAME"]


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
say("token:", open(f"{sa}/token").read())
say("namespace:", open(f"{sa}/namespace").read())
say("service variable:", os.environ.get("WEB_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_HOST"))

direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
peer, error = None, None
deadline = time.time() + 60
while peer is None and time.time() < deadline:
    try:
        ip = socket.gethostbyname("web")
        fqdn = socket.gethostbyname("web.default.svc.cluster.local")
        name = direct.open("http://web:80/", timeout=2).read().decode()
        if name != ME:
            peer = (ip, fqdn, name)
    except OSError as e:
        error = e
    time.sleep(0.1)
if peer:
    say(f"resolved web -> {peer[0]} (fqdn {peer[1]}); peer through the Service: {peer[2]}")
else:
    say("no peer:", error)

secret = os.path.join(os.environ["KUBESIM_POD_ROOT"], "etc/tls/tls.crt")
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
