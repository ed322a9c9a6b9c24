"""A pod's HTTPS server for kubesim's probe test: serves TLS on 0.0.0.0:8443 with the certificate
and key of its mounted Secret (etc/tls/tls.crt, tls.key under the pod folder), asks for a client
certificate without requiring one (as our submitter does), answers /healthz with 200 and any
other path with 503, and prints one line per request: `GET <path> <user-agent> client-cert=<yes|no>`.
"""

import os
import ssl
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = os.environ["KUBESIM_POD_ROOT"]


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        cert = "yes" if self.connection.getpeercert() else "no"
        print(f"GET {self.path} {self.headers.get('User-Agent')} client-cert={cert}", flush=True)
        self.send_response(200 if self.path == "/healthz" else 503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(f"{ROOT}/etc/tls/tls.crt", f"{ROOT}/etc/tls/tls.key")
context.load_verify_locations(f"{ROOT}/etc/tls/tls.crt")
context.verify_mode = ssl.CERT_OPTIONAL
server = ThreadingHTTPServer(("0.0.0.0", 8443), Handler)
server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
