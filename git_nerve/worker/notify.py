"""Notifications (issue 38): tell the person when a task's attention (:mod:`.attention`) becomes non-null.

``[notify]`` in nerve.toml: ``command`` (an argv list, run without a shell, one JSON object on its stdin) and/or
``url`` (a webhook: the same JSON POSTed), ``coalesce`` (seconds, default 30), ``timeout`` (seconds per send,
default 10), ``console_url`` (the console's address, for each task's link; no token is ever sent) and
``stuck_after`` (:mod:`.attention`). Both ``command`` and ``url`` are committed settings that run a command /
send data out: each is used only once this user trusted it (git_nerve/trust); an untrusted one is skipped with
one line in the log.

The object: ``{"task", "attention", "state", "machine", "url", "summary", "text"}`` (``text``: the summary again,
what Slack-style incoming webhooks show); a burst (several within
``coalesce`` seconds of the last send) becomes one digest: ``{"task": null, "attention": "digest", ...,
"summary": "3 tasks need you: ...", "events": [each object]}``. One per task and attention: a task notified for
``review`` is notified again only once its attention was something else in between.

:func:`poke` never blocks a command: when ``[notify]`` names a channel it starts ``python -m
git_nerve.cli.notify_run`` detached (git_nerve/detach.py), which takes ``nerve/notify.lock`` (one sender at a
time; a poke meanwhile is seen by its rescans), computes every task's attention, sends what is new and logs to
``nerve/notify.log``. Poked after every state change (transitions.py), a `git worker run` that ends, a heartbeat
saying ``input:``, `git worker status` and the console's summaries (what makes ``stuck`` noticed).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

LOG = "notify.log"
SEEN = "notify-seen.json"
LOCK = "notify.lock"
COALESCE = 30.0
#: each attention in a notification's one-line summary
PHRASE = {"conflict": "has a conflict", "failed": "failed (or its agent run exited non-zero)",
          "input": "waits for your answer", "review": "waits for your review", "stuck": "seems stuck (no heartbeat or commit)"}
TIMEOUT = 10.0


def toplevel_of(common_dir: str | os.PathLike[str]) -> Path | None:
    """The main checkout of a repository whose git directory is ``common_dir`` (None: a bare one)."""
    common = Path(common_dir)
    return common.parent if common.name == ".git" else None


def config(toplevel) -> dict[str, Any] | None:
    """The ``[notify]`` table when it names a command or a url (None: nothing to send, or nerve.toml unreadable)."""
    from .. import nerve_toml

    if toplevel is None:
        return None
    try:
        table = (nerve_toml.read(toplevel) or {}).get("notify")
    except Exception:  # noqa: BLE001 - a bad nerve.toml never fails the command that pokes (spawn says what)
        return None
    if not isinstance(table, dict) or not (table.get("command") or table.get("url")):
        return None
    return table


def _seconds(table: dict, key: str, default: float) -> float:
    value = table.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else default


def poke(common_dir: str | os.PathLike[str], found: dict[str, str | None] | None = None) -> None:
    """Start the sender in the background when ``[notify]`` names a channel; never raises, never waits.
    ``found``: the attentions the caller computed; nothing starts when the sender already saw each of them."""
    try:
        top = toplevel_of(common_dir)
        if config(top) is None:
            return
        if found is not None:
            seen = _load(Path(common_dir) / "nerve" / SEEN).get("seen", {})
            if all(seen.get(t) == a for t, a in found.items() if a):
                return
        from .. import detach
        from ..git.cli import clean_env

        detach.start("git_nerve.cli.notify_run", ["--cwd", os.fspath(top)], cwd=top,
                     log=Path(common_dir) / "nerve" / LOG, env=clean_env())
    except Exception:  # noqa: BLE001 - a notification never fails the command
        pass


def _log(common_dir, line: str) -> None:
    from .. import clock

    with open(Path(common_dir) / "nerve" / LOG, "a", encoding="utf-8") as f:
        f.write(f"{clock.iso(clock.now())} {line}\n")


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def new_events(repo, table: dict, state: dict[str, Any], conflicts: set[str]) -> list[dict[str, Any]]:
    """What became non-null since the last look (``state["seen"]`` updated: a null resets a task); ``conflicts``:
    the tasks the radar flags (as `git worker status` marks them)."""
    import platform

    from .. import clock
    from ..bus import workers
    from . import attention

    now = clock.now()
    everyone = {w.task_id: w for w in workers.all_workers(repo.bus.conn)}
    found = attention.of_all(repo.bus.conn, everyone, conflicts, now=now,
                             stuck=attention.stuck_after(repo.paths.toplevel))
    seen = state.setdefault("seen", {})
    base = table.get("console_url") if isinstance(table.get("console_url"), str) else None
    out = []
    for task_id, value in found.items():
        if value is not None and seen.get(task_id) != value:
            w = everyone[task_id]
            line = (w.description.splitlines() or [""])[0][:120]
            asks = (w.heartbeat_status or "").split(":", 1)[-1].strip() if value == "input" else ""
            summary = f"{task_id} {PHRASE[value]}" + (f": {asks}" if asks else f": {line}" if line else "")
            out.append({"task": task_id, "attention": value, "state": w.state, "machine": platform.node(),
                        "url": f"{base.rstrip('/')}/#/task/{task_id}/diff" if base else None,
                        "summary": summary, "text": summary})
        seen[task_id] = value
    return out


def message(events: list[dict[str, Any]], table: dict) -> dict[str, Any]:
    """One event as it is, several as one digest."""
    if len(events) == 1:
        return events[0]
    base = table.get("console_url") if isinstance(table.get("console_url"), str) else None
    summary = f"{len(events)} tasks need you: " + ", ".join(f"{e['task']} {e['attention']}" for e in events)
    return {"task": None, "attention": "digest", "state": None, "machine": events[0]["machine"], "url": base,
            "summary": summary, "text": summary, "events": events}


def send(repo, table: dict, body: dict[str, Any]) -> None:
    """To each trusted channel, with a timeout; each outcome one line in the log."""
    from .. import trust

    common, top = repo.paths.common_dir, repo.paths.toplevel
    timeout = _seconds(table, "timeout", TIMEOUT)
    data = json.dumps(body, ensure_ascii=False).encode()
    verdict = trust.verdict(common, top)
    what = body["task"] or "digest"
    command, url = table.get("command"), table.get("url")
    if command:
        if not (isinstance(command, list) and command and all(isinstance(a, str) for a in command)):
            _log(common, f"{what}: [notify] command must be a list of strings (an argv, run without a shell); skipped")
        elif not verdict.allows(trust.NOTIFY_COMMAND, command):
            _log(common, f"{what}: {trust.skipped(trust.NOTIFY_COMMAND)}")
        else:
            _log(common, f"{what} {body['attention']}: command {_run(command, data, top, timeout)}")
    if url:
        if not (isinstance(url, str) and url.startswith(("http://", "https://"))):
            _log(common, f"{what}: [notify] url must be an http:// or https:// address; skipped")
        elif not verdict.allows(trust.NOTIFY_URL, url):
            _log(common, f"{what}: {trust.skipped(trust.NOTIFY_URL)}")
        else:
            _log(common, f"{what} {body['attention']}: url {_post(url, data, timeout)}")


def _run(argv: list[str], data: bytes, cwd, timeout: float) -> str:
    import subprocess

    from ..git.cli import clean_env

    try:
        proc = subprocess.run(argv, input=data, cwd=cwd, env=clean_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout:g}s"
    except OSError as exc:
        return f"could not run: {exc}"
    tail = proc.stdout.decode(errors="replace").strip().splitlines()[-1:] if proc.stdout else []
    return f"exited {proc.returncode}" + (f": {tail[0][:200]}" if tail else "")


def _post(url: str, data: bytes, timeout: float) -> str:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - http(s) only, checked above
            return f"answered {resp.status}"
    except urllib.error.HTTPError as exc:
        return f"answered {exc.code}"
    except (OSError, ValueError) as exc:
        return f"failed: {exc}"


def run(repo, conflicts) -> int:
    """The sender (``python -m git_nerve.cli.notify_run``, which opens ``repo``: the radar's marks are a feature's,
    read above this floor; ``conflicts(repo)``: the tasks it flags): one at a time; new attentions sent at once, a
    burst after a send coalesced into one digest."""
    from .. import fs, locks

    nerve = Path(repo.paths.common_dir) / "nerve"
    table = config(repo.paths.toplevel)
    held = locks.try_hold(nerve / "locks" / LOCK) if table is not None else None
    if held is None:
        return 0  # nothing to send, or a sender runs: its rescans see what this poke was about
    try:
        coalesce, path = _seconds(table, "coalesce", COALESCE), nerve / SEEN
        state, pending = _load(path), []
        while True:
            pending += new_events(repo, table, state, conflicts(repo))
            fs.replace_file(path, json.dumps(state).encode())
            if not pending:
                return 0
            wait = float(state.get("last_sent", 0)) + coalesce - time.time()
            if wait > 0:
                time.sleep(min(wait, 0.25))
                continue
            send(repo, table, message(pending, table))
            state["last_sent"], pending = time.time(), []
    finally:
        held.__exit__(None, None, None)
