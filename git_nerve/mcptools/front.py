"""`git nerve mcp`'s quick answers to ``initialize`` and ``tools/list``, given while the MCP SDK is still loading.

Importing the SDK (pydantic models for every protocol version, anyio, starlette) takes most of a second;
an agent CLI waits for the ``initialize`` answer before it goes on. So the server stands between the
CLI and the SDK on stdin/stdout (file descriptors 0 and 1 become pipes the SDK reads and writes):

* every line the CLI sends is passed on to the SDK, in order, ``initialize`` included, so the SDK's
  session is exactly as if it had been alone;
* an ``initialize`` whose answer is known (the SDK's own answer to the same request, recorded by an
  earlier start of this git-nerve and this SDK in ``<git-common-dir>/nerve/mcp-initialize.json``) is
  answered at once from that record, and the SDK's own answer to it is dropped when it comes; if the two
  differ, the record is rewritten and one line goes to stderr;
* so is a ``tools/list`` (its first page: no cursor) for the protocol version the ``initialize`` asked for:
  the tool list the SDK itself answered last time (issue 37: an agent CLI's first tool call waited for the
  SDK's import, 1.6 s); the record's key is this git-nerve's version, the mcptools modules' files and the
  SDK's (size and modification time), so a changed package is never answered from an old record;
* any other line the SDK writes is passed on to the CLI as it is;
* the end of the CLI's input reaches the SDK only once the SDK answered every request passed to it (or the
  CLI cancelled it): the SDK cancels the requests still running at the end of its input, so a client that
  writes its last request and closes stdin, as the MCP stdio transport's shutdown allows, lost the answer and,
  for a tool such as ``done``, the news of what the tool did.

A first start (no record yet) waits for the SDK like before, and records its answer. Standard library only.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

RECORD = "mcp-initialize.json"


def _key() -> str:
    """What the recorded answers depend on: this git-nerve's server module and the installed SDK (their files'
    size and modification time: an upgrade changes them), without importing the SDK."""
    from importlib.util import find_spec

    here = os.path.dirname(os.path.abspath(__file__))
    parts = [os.path.join(here, name) for name in ("server.py", "tools.py", "names.py")]
    for name in ("mcp", "mcp_types"):
        spec = find_spec(name)
        parts.append(spec.origin if spec is not None and spec.origin else name)
    stamps = []
    for p in parts:
        try:
            st = os.stat(p)
            stamps.append(f"{p}:{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            stamps.append(p)
    from .. import __version__

    return f"{__version__}|" + "|".join(stamps)


class Front:
    """The pumps between the CLI (the real stdin/stdout) and the SDK (pipes on fds 0 and 1)."""

    def __init__(self, record: Path):
        self.record = record
        self.key = _key()
        self.known, self.tools = self._load()  # per protocol version: the SDK's initialize and tools/list results
        self.version = ""  # the protocol version the client's initialize asked for
        # request id (JSON) -> (what was asked, requested version, our result or None: the SDK's is recorded)
        self.answered: dict[str, tuple[str, str, dict | None]] = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.running: set[str] = set()  # ids (JSON) of the requests passed to the SDK and not answered yet
        self.settled = threading.Condition()
        self.out = os.fdopen(os.dup(1), "wb", buffering=0)  # the CLI's stdout
        self.cli_in = os.fdopen(os.dup(0), "rb", buffering=0)  # the CLI's stdin
        sdk_in_r, self.sdk_in = os.pipe()
        self.sdk_out, sdk_out_w = os.pipe()
        os.dup2(sdk_in_r, 0)
        os.dup2(sdk_out_w, 1)
        os.close(sdk_in_r)
        os.close(sdk_out_w)
        self.threads = [threading.Thread(target=self._from_cli, name="mcp-front-in", daemon=True),
                        threading.Thread(target=self._from_sdk, name="mcp-front-out", daemon=True)]
        for t in self.threads:
            t.start()

    def _load(self) -> tuple[dict, dict]:
        try:
            data = json.loads(self.record.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}, {}
        if not isinstance(data, dict) or data.get("key") != self.key:
            return {}, {}
        answers, tools = data.get("answers", {}), data.get("tools", {})
        return (answers if isinstance(answers, dict) else {}), (tools if isinstance(tools, dict) else {})

    def _write(self, line: bytes) -> None:
        with self.lock:
            self.out.write(line)

    def _from_cli(self) -> None:
        """CLI -> SDK, answering a known ``initialize`` on the way."""
        try:
            for line in _lines(self.cli_in):
                msg = _parse(line)
                self._track(msg)
                self._maybe_answer(msg)
                _write_all(self.sdk_in, line)
            self._wait_for_answers()
        except OSError:
            pass
        finally:
            os.close(self.sdk_in)  # the SDK sees the CLI's end of input

    def _track(self, msg: dict | None) -> None:
        """Count a request on its way to the SDK; a cancelled one is no longer waited for."""
        if not msg or not isinstance(msg.get("method"), str):
            return
        with self.settled:
            if "id" in msg:
                self.running.add(json.dumps(msg["id"]))
            elif msg["method"] == "notifications/cancelled" and isinstance(msg.get("params"), dict):
                self.running.discard(json.dumps(msg["params"].get("requestId")))
                self.settled.notify_all()

    def _answered(self, msg: dict) -> None:
        with self.settled:
            self.running.discard(json.dumps(msg["id"]))
            self.settled.notify_all()

    def _wait_for_answers(self, limit: float = 300.0) -> None:
        """At the CLI's end of input: until the SDK answered what it was asked (a tool hung past ``limit``
        seconds, or the SDK gone, ends the wait: the SDK then cancels what still runs, as it would have)."""
        import time

        deadline = time.monotonic() + limit
        with self.settled:
            while self.running and not self.stopping.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self.settled.wait(min(left, 0.5))

    def _maybe_answer(self, msg: dict | None) -> None:
        if not msg or msg.get("method") not in ("initialize", "tools/list") or "id" not in msg:
            return
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        if msg["method"] == "initialize":
            self.version = str(params.get("protocolVersion", ""))
            asked, result = "initialize", self.known.get(self.version)
        elif params.get("cursor") is None:
            asked, result = "tools/list", self.tools.get(self.version)
        else:
            return  # a later page: the SDK's
        self.answered[json.dumps(msg["id"])] = (asked, self.version, result)  # None: the SDK's answer is recorded
        if result is not None:
            self._write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}, separators=(",", ":"))
                        .encode("utf-8") + b"\n")

    def _from_sdk(self) -> None:
        """SDK -> CLI, less the SDK's answers to the ``initialize`` already answered."""
        for line in _lines(_Drained(self.sdk_out, self.stopping)):
            if self._already_answered(line):
                continue
            try:
                self._write(line)
            except OSError:
                return

    def _already_answered(self, line: bytes) -> bool:
        msg = _parse(line)
        if not msg or "id" not in msg or "method" in msg:
            return False
        self._answered(msg)
        got = self.answered.pop(json.dumps(msg["id"]), None)
        if got is None:
            return False
        asked, version, ours = got
        theirs = msg.get("result")
        if isinstance(theirs, dict) and theirs != ours and not (asked == "tools/list" and theirs.get("nextCursor")):
            (self.known if asked == "initialize" else self.tools)[version] = theirs
            self._save()
            if ours is not None:
                sys.stderr.write(f"git-nerve mcp: the recorded {asked} answer was out of date; recorded anew\n")
        return ours is not None

    def _save(self) -> None:
        from ..fs import replace_file

        try:
            replace_file(self.record, json.dumps({"key": self.key, "answers": self.known, "tools": self.tools},
                                                 indent=1))
        except OSError:
            pass  # only a slower start next time

    def close(self) -> None:
        """After the SDK's server returned (all it wrote is in the pipe): pass the rest on, then stop.

        (The SDK keeps a private duplicate of fd 1 open for good, so the pipe never reports its end.)"""
        self.stopping.set()
        self.threads[1].join(timeout=10)


class _Drained:
    """A pipe read until it is empty once ``stopping`` is set."""

    def __init__(self, fd: int, stopping: threading.Event):
        self.fd, self.stopping = fd, stopping

    def read(self, n: int) -> bytes:
        import select

        while True:
            stop = self.stopping.is_set()  # read before looking: what was written before it is in the pipe
            ready, _, _ = select.select([self.fd], [], [], 0.05)
            if ready:
                return os.read(self.fd, n)
            if stop:
                return b""


def _lines(stream):
    buf = b""
    while True:
        chunk = stream.read(65536)
        if not chunk:
            break
        buf += chunk
        *whole, buf = buf.split(b"\n")
        for line in whole:
            yield line + b"\n"
    if buf:
        yield buf


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _parse(line: bytes) -> dict | None:
    try:
        msg = json.loads(line)
    except ValueError:
        return None
    return msg if isinstance(msg, dict) else None


def start(common_dir: Path) -> Front | None:
    """Stand between the CLI and the SDK (None where that cannot be done: no POSIX pipes, closed stdio)."""
    if os.name != "posix" or os.environ.get("NERVE_MCP_NO_FRONT"):
        return None
    try:
        os.fstat(0)
        os.fstat(1)
    except OSError:
        return None
    return Front(Path(common_dir) / "nerve" / RECORD)


def serve(binding) -> None:
    """`git nerve mcp`: the front first, then the SDK loads and serves ``binding`` (a :class:`.tools.Binding`)."""
    front = start(binding.paths.common_dir)
    try:
        from . import server  # the SDK loads only now, while the front already answers

        server.serve(binding)
    finally:
        if front is not None:
            front.close()
