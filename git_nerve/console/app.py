"""The console's server: Starlette routes behind :class:`~.security.Guard`, served by uvicorn
on 127.0.0.1, and the watcher that turns bus changes into server-sent events.

The watcher (one thread, one bus connection of its own) looks every
``interval`` seconds (0.25) at what can change: ``PRAGMA data_version`` (any
other connection's commit: heartbeats, state changes, rounds, tell, outbox),
the hook shims' spools (ingested at once, as every reader of the bus does)
and the radar's cache file. On a change it builds the summary again and, when
it differs, every open event stream gets it. Every ``refresh`` seconds it is
rebuilt anyway (staleness moves with the clock alone).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import re
import signal
import socket
import threading
import time
from importlib import resources
from typing import Any, Callable

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..bus import spool, watch
from ..bus.connection import Bus
from ..errors import NerveError
from ..paths import RepoPaths
from ..radar import cache as radar_cache
from ..shared.listen import console_open
from ..worker import lifecycle
from . import actions, review, state
from .security import Guard, new_token

#: seconds between two looks at the bus
INTERVAL = 0.25
#: seconds after which the summary is rebuilt even when nothing changed (staleness)
REFRESH = 5.0
#: seconds between two keep-alive comments on an idle event stream
KEEPALIVE = 15.0


def page() -> tuple[str, str]:
    """The page (one static HTML file with its script inline) and the CSP hash of that script."""
    html = resources.files(__package__).joinpath("page.html").read_text(encoding="utf-8")
    script = re.search(r"<script>(.*?)</script>", html, re.S)
    digest = hashlib.sha256((script.group(1) if script else "").encode()).digest()
    return html, "sha256-" + base64.b64encode(digest).decode()


class _Subscriber:
    __slots__ = ("loop", "event")

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.event = asyncio.Event()


class Watcher:
    """The bus, looked at every ``interval`` seconds; the latest summary as ``(seq, json)``."""

    def __init__(self, paths: RepoPaths, *, interval: float = INTERVAL, refresh: float = REFRESH):
        self.paths = paths
        self.interval = interval
        self.refresh = refresh
        self.repo = lifecycle.Repo(paths, Bus(paths.bus_path, create=False))
        self.commits = state.Commits()
        self._subs: set[_Subscriber] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._closing = False
        self._key: tuple | None = None
        self._built_at = 0.0
        self._body = ""
        self._needs: set[tuple[str, str]] = set()
        self.latest: tuple[int, str] = (0, "{}")
        self.errors = 0
        self._thread: threading.Thread | None = None
        self.poll()

    def _radar_mtime(self) -> int:
        try:
            return os.stat(radar_cache.path(self.paths.common_dir)).st_mtime_ns
        except OSError:
            return 0

    def _notify(self, data: dict) -> None:
        """A task whose attention became something (a `stuck` the clock made, too): the notification sender runs
        (issue 38), started only when what needs the person changed."""
        needs = {(r["task_id"], r.get("attention")) for r in data["workers"] if r.get("attention")}
        if needs - self._needs:
            from ..worker.notify import poke

            poke(self.paths.common_dir, dict(needs))
        self._needs = needs

    def poll(self) -> bool:
        """Look once; True when a new summary was published."""
        conn = self.repo.bus.conn
        try:
            ingested = spool.ingest(self.repo.bus, self.paths.common_dir)
        except Exception:  # noqa: BLE001 - the spool stays for the next look (or the next reader)
            ingested = 0
        steering = watch.steering_mark(conn)
        key = (watch.data_version(conn), self._radar_mtime(), steering)
        now = time.monotonic()
        if not ingested and key == self._key and now - self._built_at < self.refresh:
            return False
        self._key, self._built_at = key, now
        data = state.summary(self.repo, self.commits, steering=steering)
        at = data.pop("at")
        self._notify(data)
        body = json.dumps(data, ensure_ascii=False, default=str, separators=(",", ":"))
        if body == self._body:
            return False
        self._body = body
        with self._lock:
            seq = self.latest[0] + 1
            self.latest = (seq, body[:-1] + f',"seq":{seq},"at":{at}' + "}")
            subs = list(self._subs)
        for sub in subs:
            try:
                sub.loop.call_soon_threadsafe(sub.event.set)
            except RuntimeError:  # its loop is closed: the server is going away
                pass
        return True

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - a bad look (bus locked too long, ...) is retried at the next one
                self.errors += 1
            self._wake.wait(self.interval)
            self._wake.clear()

    def wake(self) -> None:
        """Look now (after an action of ours)."""
        self._wake.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="nerve-console-watcher", daemon=True)
        self._thread.start()

    def close_streams(self) -> None:
        """End every event stream (the server is shutting down: it waits for open responses)."""
        self._closing = True
        with self._lock:
            subs = list(self._subs)
        for sub in subs:
            try:
                sub.loop.call_soon_threadsafe(sub.event.set)
            except RuntimeError:
                pass

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self.close_streams()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.repo.close()

    @property
    def stopping(self) -> bool:
        return self._closing

    def subscribe(self, loop: asyncio.AbstractEventLoop) -> _Subscriber:
        sub = _Subscriber(loop)
        with self._lock:
            self._subs.add(sub)
        return sub

    def unsubscribe(self, sub: _Subscriber) -> None:
        with self._lock:
            self._subs.discard(sub)


_error = review.error


def _events(watcher: Watcher) -> Callable:
    async def events(request: Request) -> Response:
        sub = watcher.subscribe(asyncio.get_running_loop())

        async def stream():
            sent = -1
            try:
                yield "retry: 1000\n\n"
                while not watcher.stopping:
                    seq, body = watcher.latest
                    if seq != sent:
                        sent = seq
                        yield f"id: {seq}\nevent: state\ndata: {body}\n\n"
                        continue
                    sub.event.clear()
                    if watcher.latest[0] != sent:
                        continue
                    try:
                        await asyncio.wait_for(sub.event.wait(), KEEPALIVE)
                    except asyncio.TimeoutError:
                        yield ": keep-alive\n\n"
            finally:
                watcher.unsubscribe(sub)

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"x-accel-buffering": "no"})
    return events


def _act(paths: RepoPaths, watcher: Watcher) -> Callable:
    async def act(request: Request) -> Response:
        fn: Callable | None = actions.ACTIONS.get(request.path_params["action"])
        if fn is None:
            return JSONResponse({"error": f"unknown action {request.path_params['action']!r}"}, status_code=404)
        try:
            body = await request.json()
        except ValueError:
            return JSONResponse({"error": "the body is not JSON"}, status_code=400)
        if not isinstance(body, dict):
            return JSONResponse({"error": "the body must be a JSON object"}, status_code=400)
        try:
            result = await run_in_threadpool(fn, paths, body)
        except NerveError as exc:
            return _error(exc)
        finally:
            watcher.wake()
        return JSONResponse(result)
    return act


def build_app(paths: RepoPaths, watcher: Watcher, *, token: str, port: int) -> Guard:
    html, script_hash = page()

    async def index(request: Request) -> Response:
        return HTMLResponse(html)

    async def current(request: Request) -> Response:
        return Response(watcher.latest[1], media_type="application/json")

    def _detail(task_id: str) -> dict[str, Any]:
        with actions._open(paths) as repo:
            return state.task_detail(repo, task_id)

    async def task(request: Request) -> Response:
        try:
            return JSONResponse(await run_in_threadpool(_detail, request.path_params["task_id"]))
        except NerveError as exc:
            return _error(exc)

    app = Starlette(routes=[
        Route("/", index, methods=["GET"]),
        Route("/api/state", current, methods=["GET"]),
        *review.routes(paths),
        Route("/api/task/{task_id:path}", task, methods=["GET"]),
        Route("/api/events", _events(watcher), methods=["GET"]),
        Route("/api/{action}", _act(paths, watcher), methods=["POST"]),
    ])
    return Guard(app, token=token, port=port, script_hash=script_hash)


def bind(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1 (port 0: any free port)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    return sock


def serve(paths: RepoPaths, *, port: int = 0, on_ready: Callable[[str, int, str], None] | None = None,
          interval: float = INTERVAL) -> None:
    """Serve until interrupted. ``on_ready(url, port, token)`` once the socket listens."""
    import uvicorn

    sock = bind(port)
    port = sock.getsockname()[1]
    token = new_token()
    watcher = Watcher(paths, interval=interval)
    app = build_app(paths, watcher, token=token, port=port)
    config = uvicorn.Config(app, http="h11", ws="none", lifespan="off", loop="asyncio", log_level="warning",
                            access_log=False, server_header=False, timeout_graceful_shutdown=1)
    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:
            # Ctrl-C or SIGTERM: stop serving and return normally (exit 0); uvicorn would raise the
            # signal again once shut down, which ends the process by that signal
            if self.should_exit and sig == signal.SIGINT:
                self.force_exit = True
            else:
                self.should_exit = True
            watcher.close_streams()

    server = Server(config)
    watcher.start()
    try:
        with console_open(paths.common_dir):  # (PostgreSQL shared mode: this clone's listener stays meanwhile)
            if on_ready is not None:
                on_ready(f"http://127.0.0.1:{port}/?token={token}", port, token)
            server.run(sockets=[sock])
    finally:
        watcher.stop()
        sock.close()


__all__ = ["INTERVAL", "REFRESH", "Watcher", "bind", "build_app", "page", "serve"]
