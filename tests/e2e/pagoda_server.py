"""PagodaServer: one `pagoda serve` process for the end-to-end tests (server_e2e, openai_e2e,
neuron_server_e2e through server_e2e): started on free loopback ports, waited for until it
serves, stopped with SIGTERM. Offers its ports (gRPC, HTTP API, metrics), its log, curl
requests to the HTTP API and /metrics readings.
"""
import json
import os
import re
import signal
import subprocess
import tempfile
import time


class PagodaServer:
    """`pagoda serve` with `sets` (--set key=value), on free loopback ports. `cacert`: a CA
    certificate file for https (when server.tls is set)."""

    def __init__(self, pagoda, *sets, model=None, config=None, env=None, cacert=None):
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
        cmd = [pagoda, "serve", "--set", "server.listen_address=127.0.0.1:0",
               "--set", "server.metrics_address=127.0.0.1:0",
               "--set", "server.http_address=127.0.0.1:0"]
        if config:
            cmd += ["--config", config]
        if model:
            cmd += ["--model", model]
        for s in sets:
            cmd += ["--set", s]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.cacert = cacert
        self.grpc_port = self.http_port = self.metrics_port = None
        deadline = time.time() + 60
        while time.time() < deadline and self.grpc_port is None:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited: " + self.output())
            text = self.output()
            grpc = re.search(r"serving .* \(port (\d+)\)", text)  # logged last
            if grpc:
                self.grpc_port = int(grpc.group(1))
                http = re.search(r"HTTP API on (\w+)://.* \(port (\d+)\)", text)
                metrics = re.search(r"metrics on \w+://.* \(port (\d+)\)", text)
                self.scheme = http.group(1) if http else "http"
                self.http_port = int(http.group(2)) if http else None
                self.metrics_port = int(metrics.group(1)) if metrics else None
            time.sleep(0.05)
        if self.grpc_port is None:
            raise RuntimeError("server did not start: " + self.output())
        self.url = f"{self.scheme}://127.0.0.1:{self.http_port}"

    def output(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def terminate(self, timeout=30):
        """SIGTERM (SIGKILL after `timeout` s); the exit code (negative: the signal that
        ended it). The log stays readable until stop()."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def stop(self):
        self.terminate()
        if os.path.exists(self.log.name):
            os.unlink(self.log.name)

    def curl(self, path, body=None, headers=(), raw=None, port=None, with_headers=False):
        """(status, body bytes) of one request by curl to the HTTP API (or `port`); `body` is
        sent as JSON, `raw` as is. with_headers: (status, headers text, body)."""
        base = self.url if port is None else f"{self.scheme}://127.0.0.1:{port}"
        cmd = ["curl", "-sN", "-m", "60", "-o", "-", "-w", "\n%{http_code}", base + path]
        if self.cacert:
            cmd += ["--cacert", self.cacert]
        if with_headers:
            cmd += ["-D", "-"]
        for h in headers:
            cmd += ["-H", h]
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        if data is not None:
            cmd += ["-H", "Content-Type: application/json", "--data-binary", "@-"]
        out = subprocess.run(cmd, input=data.encode() if isinstance(data, str) else data,
                             capture_output=True, check=True).stdout
        text, _, status = out.rpartition(b"\n")
        if not with_headers:
            return int(status), text
        head, _, text = text.partition(b"\r\n\r\n")
        return int(status), head.decode(), text

    def json(self, path, body=None, headers=()):
        status, text = self.curl(path, body, headers)
        return status, json.loads(text)

    def metrics(self, headers=()):
        """The /metrics text of the metrics listener (the HTTP API's without one)."""
        status, text = self.curl("/metrics", headers=headers, port=self.metrics_port)
        if status != 200:
            raise RuntimeError(f"/metrics answered {status}: {text[:200]!r}")
        return text.decode()

    def metric(self, name, labels=None, headers=()):
        for line in self.metrics(headers).splitlines():
            if line.startswith("#"):
                continue
            key, value = line.rsplit(" ", 1)
            if key.split("{")[0] == name and (labels is None or labels in key):
                return float(value)
        raise KeyError(name)

    def wait_idle(self, timeout=10, headers=()):
        """True once nothing runs or waits (within `timeout` seconds)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if (self.metric("pagoda:num_requests_running", headers=headers) == 0 and
                    self.metric("pagoda:num_requests_waiting", headers=headers) == 0):
                return True
            time.sleep(0.02)
        return False
