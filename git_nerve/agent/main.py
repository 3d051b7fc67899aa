"""The agent loop (see :mod:`git_nerve.agent`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from . import tools

SYSTEM = (
    "You are a coding agent working in a git worktree. Use the tools to read and edit files, run the tests and "
    "commit with git. Paths are relative to the worktree. When you are done, answer with your final message."
)
READER = "nerve-agent"
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_STOPPED = 3


def say(text: str) -> None:
    sys.stderr.write(f"nerve-agent: {text}\n")
    sys.stderr.flush()


class ModelError(Exception):
    pass


def complete(base_url: str, key: str, body: dict, timeout: float) -> dict:
    url = base_url.rstrip("/") + ("/chat/completions" if base_url.rstrip("/").endswith("/v1") else "/v1/chat/completions")
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "Content-Type": "application/json", "Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:300].decode("utf-8", "replace")
        raise ModelError(f"model API error {exc.code}: {detail}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ModelError(f"cannot reach the model at {url}: {getattr(exc, 'reason', exc)}") from None


class Steering:
    """Notes and stops for this task on the git-nerve bus (absent outside a git-nerve repository)."""

    def __init__(self, workdir: Path, task_id: str | None):
        self.task_id = task_id
        self.workdir = workdir
        self.bus = None
        if not task_id:
            return
        try:
            from ..bus.connection import Bus
            from ..paths import discover

            self.bus = Bus(discover(workdir).bus_path)
        except Exception as exc:  # noqa: BLE001 - no bus: the agent runs unsteered
            say(f"no git-nerve bus here ({exc}); running without notes")
            self.bus = None

    def notes(self) -> tuple[str, list[int]]:
        if self.bus is None:
            return "", []
        from ..steer import delivery

        found = delivery.deliver(self.bus, self.task_id, reader=READER, via="hook", pid=os.getpid())
        return delivery.for_agent(found), [m.id for m in found]

    def acted(self, ids: list[int], how: str) -> None:
        if self.bus is not None and ids:
            from ..steer import delivery

            delivery.acted(self.bus, self.task_id, how=how, inbox_ids=ids)

    def stop_requested(self) -> bool:
        """The runner drained a stop for this task and asks the agent to end itself (its stop-request file)."""
        if self.bus is None:
            return False
        try:
            from ..paths import discover, stop_request_path

            return stop_request_path(discover(self.workdir).git_dir).exists()
        except Exception:  # noqa: BLE001 - cannot tell: the runner's kill after its grace still ends the run
            return False

    def stop_queued(self) -> bool:
        """A stop for this task that its run has not acted on yet (read only: the runner drains it)."""
        if self.bus is None:
            return False
        from ..bus import steer, workers
        from ..steer.drain import task_consumer

        conn = self.bus.conn
        w = workers.get(conn, self.task_id)
        after = steer.cursor(conn, task_consumer(self.task_id))
        pending = steer.for_task_after(conn, self.task_id, after, all_since=w.assigned_at if w else None)
        return any(m.kind == "stop" for m in pending)


def describe(call: dict) -> str:
    fn = call.get("function") or {}
    args = fn.get("arguments") or ""
    return f"{fn.get('name')}({args[:120]})"


def run(prompt: str, *, base_url: str, key: str, model: str, workdir: Path, test_command: str,
        max_steps: int, timeout: float) -> int:
    ws = tools.Workspace(workdir, test_command)
    steering = Steering(ws.root, os.environ.get("NERVE_TASK_ID"))
    messages: list[dict] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
    pending_ids: list[int] = []
    for step in range(max_steps):
        if steering.stop_requested():
            say("the run was stopped (git nerve tell ... stop): ending at this safe point, before the next step")
            return EXIT_STOPPED
        if steering.stop_queued():
            say("a stop is queued for this task: no further step")
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # the runner ends this process; it takes no step meanwhile
                time.sleep(0.2)
            return EXIT_STOPPED
        text, ids = steering.notes()
        if text:
            say(f"{len(ids)} note(s) from git nerve tell handed to the model")
            messages.append({"role": "user", "content": text})
            pending_ids += ids
        try:
            answer = complete(base_url, key, {"model": model, "messages": messages, "tools": tools.TOOLS}, timeout)
        except ModelError as exc:
            say(str(exc))
            return EXIT_FAILED
        choice = ((answer.get("choices") or [{}])[0]).get("message") or {}
        calls = choice.get("tool_calls") or []
        if pending_ids:
            how = "answered by the model: " + ("; ".join(describe(c) for c in calls) if calls
                                               else "final answer")
            steering.acted(pending_ids, how)
            pending_ids = []
        if not calls:
            sys.stdout.write((choice.get("content") or "") + "\n")
            sys.stdout.flush()
            return 0
        messages.append({"role": "assistant", "content": choice.get("content"), "tool_calls": calls})
        for c in calls:
            fn = c.get("function") or {}
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except ValueError:
                args = None
            say(f"step {step + 1}: {describe(c)}")
            result = tools.call(ws, str(fn.get("name")), args)
            messages.append({"role": "tool", "tool_call_id": c.get("id", ""), "content": result})
    say(f"gave up after {max_steps} steps")
    return EXIT_FAILED


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="git-nerve-agent", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL", ""),
                   help="the OpenAI-compatible endpoint (default: $OPENAI_BASE_URL)")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="the environment variable holding the key")
    p.add_argument("--model", default=os.environ.get("NERVE_AGENT_MODEL", "nerve-scripted"))
    p.add_argument("--test-command", default="", help="the repository's test command (allowed to run)")
    p.add_argument("--workdir", default=".", help="the worktree the agent is confined to (default: here)")
    p.add_argument("--max-steps", type=int, default=60)
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per model request")
    args = p.parse_args(argv)
    if not args.base_url:
        say("no model endpoint: pass --base-url or set OPENAI_BASE_URL")
        return EXIT_USAGE
    key = os.environ.get(args.api_key_env, "")
    if not key:
        say(f"no API key: set {args.api_key_env}")
        return EXIT_USAGE
    prompt = sys.stdin.read()
    if not prompt.strip():
        say("no task on standard input")
        return EXIT_USAGE
    return run(prompt, base_url=args.base_url, key=key, model=args.model, workdir=Path(args.workdir),
               test_command=args.test_command, max_steps=args.max_steps, timeout=args.timeout)



def cli() -> None:
    """The `git-nerve-agent` console script."""
    sys.exit(main())


if __name__ == "__main__":
    sys.exit(main())
