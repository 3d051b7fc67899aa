"""Shared plumbing of the console tests and bench: the real `git nerve console` as a subprocess,
and its server-sent events read with the standard library."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit


class Console:
    """`git nerve console --json` started in ``cwd``; ``url``, ``port``, ``token`` once it listens.

    The console script itself (`git-nerve`, which `git nerve` runs), so that Ctrl-C (SIGINT) reaches
    the server and its exit status is the server's (git dies of the signal it forwards)."""

    def __init__(self, cwd: Path, *, env: dict | None = None):
        self.proc = subprocess.Popen(["git-nerve", "console", "--json"], cwd=cwd, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env or dict(os.environ))
        lines = []
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError(f"git nerve console ended: {''.join(lines)}{self.proc.stderr.read()}")
            lines.append(line)
            if line.strip() == "}":
                break
        info = json.loads("".join(lines))
        self.url, self.port, self.token = info["url"], info["port"], info["token"]

    def request(self, method: str, path: str, *, body: object = None, headers: dict | None = None,
                token: bool = True) -> tuple[int, str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        hdrs = {"X-Nerve-Token": self.token} if token else {}
        hdrs.update(headers or {})
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        text = resp.read().decode()
        conn.close()
        return resp.status, text

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()
        return self.proc.returncode


class Events:
    """The console's event stream, read line by line (each event's data parsed as JSON)."""

    def __init__(self, url: str, *, timeout: float = 30):
        parts = urlsplit(url)
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
        self.conn.request("GET", f"/api/events?{parts.query}")
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200, self.resp.status
        assert self.resp.getheader("content-type", "").startswith("text/event-stream")

    def next(self) -> dict:
        """The next state event (blocks; the connection's timeout bounds the wait)."""
        data = []
        while True:
            line = self.resp.fp.readline()
            if not line:
                raise EOFError("the event stream ended")
            line = line.decode().rstrip("\r\n")
            if line.startswith("data:"):
                data.append(line[5:].lstrip())
            elif line == "" and data:
                return json.loads("\n".join(data))

    def until(self, predicate, *, within: float = 20) -> dict:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            state = self.next()
            if predicate(state):
                return state
        raise AssertionError(f"no event matched within {within}s")

    def close(self) -> None:
        self.conn.close()


def worker_row(state: dict, task_id: str) -> dict | None:
    return next((w for w in state["workers"] if w["task_id"] == task_id), None)
