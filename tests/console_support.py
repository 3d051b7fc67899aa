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


PLAYWRIGHT = "1.65.2"


def artifacts(tmp_path: Path) -> Path:
    """Where the screenshots go: ``$NERVE_ARTIFACTS`` (the real environment's), else the test's tmp dir; printed."""
    from realtools import REAL_ENV

    given = REAL_ENV.get("NERVE_ARTIFACTS")
    where = Path(given) if given else tmp_path / "screenshots"
    where.mkdir(parents=True, exist_ok=True)
    print(f"console screenshots: {where}")
    return where


class Browser:
    """tests/browser_driver.py under Playwright's own Python: one JSON command per call."""

    def __init__(self, python: Path, chromium: Path):
        env = {**os.environ, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1"}
        self.proc = subprocess.Popen([str(python), str(Path(__file__).with_name("browser_driver.py")), str(chromium)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    @classmethod
    def start(cls) -> "Browser":
        """Debian's Chromium and the pinned Playwright (installed once, cached; never a downloaded browser)."""
        from realtools import apt_tool, pip_tool

        chromium = apt_tool("chromium", "chromium")
        apt_tool("chromium-driver", "chromedriver")
        playwright = pip_tool("playwright", PLAYWRIGHT, "playwright")
        return cls(playwright.parent / "python", chromium)

    def __call__(self, op: str, **args):
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"the browser driver ended during {op} {args}")
        answer = json.loads(line)
        if not answer["ok"]:
            raise AssertionError(f"{op} {args}: {answer['error']}")
        return answer["value"]

    def problems(self, *allowed: tuple[str, ...]) -> list[str]:
        """Script errors and refused requests so far, but those containing every part of one of ``allowed``."""
        return [p for p in self("problems") if not any(all(a in p for a in allow) for allow in allowed)]

    def overflow(self) -> dict:
        """How far the page is wider than the window (0: nothing cut off, no sideways scrolling)."""
        return self("eval", js="({page: document.documentElement.scrollWidth - document.documentElement.clientWidth,"
                               " body: document.body.scrollWidth - document.body.clientWidth,"
                               " right: Math.max(...[...document.querySelectorAll('section')].map("
                               "s => Math.ceil(s.getBoundingClientRect().right))) - document.documentElement.clientWidth})")

    def open_task(self, task: str, view: str = "thread") -> set[str]:
        """Go to a task by its URL; once its detail is shown, the action buttons it offers."""
        self("eval", js=f"location.hash = '#/task/{task}/{view}'")
        self("wait_fn", js=f"document.querySelector('#task-id').textContent === '{task}' && "
                           "document.querySelector('#task-head [data-testid=task-state]') !== null && "
                           f"document.querySelector('tr.worker[data-task=\"{task}\"]') !== null")
        return set(self("eval", js="[...document.querySelectorAll('#actions button')].map(x => x.dataset.testid.slice(4))"))

    def rows(self) -> set[str]:
        """The tasks the workers table shows."""
        return set(self("eval", js="[...document.querySelectorAll('tr.worker')].map(r => r.dataset.task)"))

    def close(self) -> None:
        try:
            self("quit")
        except (AssertionError, BrokenPipeError, OSError):
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def wait_until(predicate, what: str, within: float = 60) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def worktree_of(work: Path, task_id: str, gw=None) -> Path:
    """The worktree of ``task_id`` from `git worker status --json`: in process through the tests' ``gw`` fixture when
    given, else a real subprocess."""
    if gw is not None:
        rows = json.loads(gw("status --json", work).out)
    else:
        rows = json.loads(subprocess.run(["git", "worker", "status", "--json"], cwd=work, check=True,
                                         capture_output=True, text=True).stdout)
    return Path(next(r for r in rows if r["task_id"] == task_id)["worktree"])


def post_action(c: Console, action: str, body: dict):
    """A review action through the console's API: (status, its JSON answer)."""
    status, text = c.request("POST", f"/api/{action}", body=body)
    return status, json.loads(text)


def states(work: Path) -> dict[str, str]:
    rows = json.loads(subprocess.run(["git", "worker", "status", "--json"], cwd=work, check=True, capture_output=True,
                                     text=True).stdout)
    return {r["task_id"]: r["state"] for r in rows}


def flagged_pair(work: Path, gw) -> None:
    """a1 and b2 spawned, each with a commit changing line 2 of src/app.py its own way, and the radar refreshed: it
    flags each one's line as the other's too."""
    from fixtures.repos.build import commit_file

    for t in ("a1", "b2"):
        assert gw(f"spawn {t}", work).code == 0
    commit_file(worktree_of(work, "a1", gw), "src/app.py", "def greet(name):\n    return f'A {name}'\n")
    commit_file(worktree_of(work, "b2", gw), "src/app.py", "def greet(name):\n    return f'B {name}'\n")
    assert gw("conflicts --refresh", work).code in (0, 1)


def review_setup(work: Path, gw) -> Path:
    """t1 (IN_REVIEW): a new file, a changed line t2 also changes (the radar flags it), a binary file; t2 WORKING.
    A merge check in nerve.toml; t1's worktree."""
    from conftest import git
    from fixtures.repos.build import commit_file

    commit_file(work, "nerve.toml", '[run]\ntest_command = "test -f feature.txt"\n', "nerve.toml: the merge check")
    subprocess.run(["git", "nerve", "trust"], cwd=work, check=True, capture_output=True)  # the person's own check
    git(work, "push", "-q", "origin", "main")
    for task, desc in (("t1", "add the feature"), ("t2", "change the greeting")):
        assert gw(["spawn", task, "-d", desc], work).code == 0
    wt1, wt2 = worktree_of(work, "t1"), worktree_of(work, "t2")
    for wt in (wt1, wt2):
        assert gw("start", wt).code == 0
    commit_file(wt1, "feature.txt", "def feature():\n    return 42\n", "t1: add the feature")
    commit_file(wt1, "src/app.py", "def greet(name):\n    return f'hey {name}'\n", "t1: greet with hey")
    (wt1 / "logo.bin").write_bytes(bytes(range(256)) * 4)
    git(wt1, "add", "logo.bin")
    git(wt1, "commit", "-q", "-m", "t1: a logo")
    commit_file(wt2, "src/app.py", "def greet(name):\n    return f'yo {name}'\n", "t2: greet with yo")
    assert gw("done", wt1).code == 0
    assert gw("conflicts --refresh", work).code in (0, 1)
    return wt1
