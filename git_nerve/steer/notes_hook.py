"""`git nerve notes`: the person's notes handed to a running agent at its next safe point.

Two callers:

* an agent CLI's own hook (``git nerve notes --hook claude|gemini|qwen|copilot|codex|opencode``, opencode's
  from the plugin its adapter writes): the
  CLI runs it after every tool call with its hook JSON on stdin (Gemini CLI, Qwen Code, Copilot CLI
  and Codex also before each call: once stopped, :func:`refusal` refuses it, or ends Gemini CLI; Codex's
  also takes the notes, :data:`NOTES_BEFORE`). We find the task from the
  hook's ``cwd`` (the worktree's ``.worker-ctx.json``), deliver the notes its
  agents have not read yet (recorded with the CLI's process id, found by
  walking up from our parent past shells) and print what the CLI injects into
  the model's next request. A ``stop`` queued for the task (or one the run
  already drained) answers ``continue: false`` instead, so the CLI ends the
  agent cleanly before the runner's kill. Never fails the agent's tool call:
  any error is one line on stderr and exit 0 with nothing injected.
* a person, or an agent without hooks (``git nerve notes [--json]``): the
  same delivery, printed.

Hot path: standard library and the bus only (entry.py calls :func:`main` without click).
"""

from __future__ import annotations

import json
import os
import sys

from ..proctable import process

#: the hook formats we speak: CLI name -> reader recorded with the delivery. These are also the adapters whose
#: runs get notes mid-run (README "Notes delivered while an agent works"); Qwen Code (a Gemini CLI fork that took
#: Claude Code's hook protocol), Codex (the same protocol) and opencode's plugin (written to speak it) read the
#: same answer as Claude Code; Gemini CLI (0.61.0) names its events AfterTool/BeforeTool and reads the same fields.
READERS = {"claude": "claude-code (hook)", "gemini": "gemini-cli (hook)", "qwen": "qwen-code (hook)",
           "copilot": "copilot-cli (hook)", "codex": "codex-cli (hook)", "opencode": "opencode (plugin)"}
#: the events before a tool call (Claude Code's name, Gemini CLI's): a stop refuses it, no notes are taken there
BEFORE_EVENTS = ("PreToolUse", "BeforeTool")

#: names of the processes between the CLI and us (the shell its hook runs through)
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ash", "busybox", "env", "timeout", "nice", "git", "git-nerve"})

def agent_pid(start: int | None = None) -> int | None:
    """The agent CLI's process: our parent, or the first ancestor that is not a shell (or `git`, for `git nerve`)."""
    pid = start if start is not None else os.getppid()
    for _ in range(8):
        if pid <= 1:
            return None
        info = process(pid)  # only names whom a delivery is recorded for (never decides what to keep or remove)
        if info is None:
            return pid if pid > 1 else None
        if info.name not in _SHELLS:
            return pid
        pid = info.ppid
    return None


def _task_of(cwd: str):
    from ..context import read
    from ..paths import discover

    paths = discover(cwd)
    ctx = read(paths.git_dir)
    if ctx is None:
        return paths, None
    return paths, ctx.task_id


def pending_stop(bus, task_id: str, git_dir) -> str | None:
    """The reason to end the agent now: a stop the run drained (its file), or one still queued for the task."""
    from ..paths import stop_request_path

    try:
        text = stop_request_path(git_dir).read_text(encoding="utf-8").strip()
        if text:
            return text
    except OSError:
        pass
    from ..bus import steer, workers
    from .drain import task_consumer

    conn = bus.conn
    w = workers.get(conn, task_id)
    after = steer.cursor(conn, task_consumer(task_id))
    for m in steer.for_task_after(conn, task_id, after, all_since=w.assigned_at if w else None):
        if m.kind == "stop":
            return f'stopped by queued message: "{m.text}"'
    return None


def collect(cwd: str, *, reader: str, via: str, pid: int | None) -> dict:
    """What a caller in ``cwd`` is handed: ``{"task", "stop", "notes": [...], "text"}`` (bus writes included)."""
    from ..bus import steer
    from ..bus.connection import Bus
    from . import delivery, pending

    paths, task_id = _task_of(cwd)
    if task_id is None:
        return {"task": None, "stop": None, "notes": [], "text": ""}
    from ..bus.spool import box_spool

    # the sh gate's marker (steer.pending): cleared before the bus is read; inside an agent's box it cannot be
    # (read-only): it stays, and the box's spool says which notes were handed over
    gate = via == "hook" and box_spool() is None
    if gate:
        pending.clear(paths.nerve_dir, task_id)
    try:
        bus = Bus(paths.bus_path, create=False)
        try:
            delivery.settle(bus, task_id)  # notes delivered earlier that a commit since has acted on
            notes = delivery.deliver(bus, task_id, reader=reader, via=via, pid=pid)
            stop = pending_stop(bus, task_id, paths.git_dir)
            if stop:
                delivery.stop_delivered(bus, task_id, reader=reader, via=via, pid=pid)
            unsettled = gate and any(d.acted_at is None for d in steer.deliveries_for(bus.conn, task_id))
        finally:
            bus.close()
    except BaseException:
        if gate:
            pending.mark(paths.nerve_dir, [task_id])  # try again at the next tool call
        raise
    if gate and (stop or unsettled):  # still something for the next call: the stop again, the settling commit
        pending.mark(paths.nerve_dir, [task_id])
    from .. import clock
    from ..text import clean

    return {
        "task": task_id,
        "stop": stop,
        "notes": [{"id": m.id, "ts": clock.iso(m.ts), "text": clean(m.text)} for m in notes],
        "text": delivery.for_agent(notes),
    }


def claude_answer(event: str, got: dict) -> dict | None:
    """Claude Code's hook output (2.1.330), which Qwen Code (0.24.4) and Gemini CLI (0.61.0, ``AfterTool``) read
    too: a stop ends the agent (``continue: false``; Qwen Code only turns that tool's result into an error, and its
    ``PreToolUse`` then refuses the next calls: :func:`refusal`); notes become ``additionalContext`` beside the
    tool's result."""
    if got["stop"]:
        return {"continue": False, "stopReason": f"git-nerve: {got['stop']}",
                "systemMessage": f"git-nerve: this task was stopped ({got['stop']})"}
    if not got["text"]:
        return None
    if event in ("PostToolUse", "UserPromptSubmit", "SessionStart", "PostToolUseFailure", "PreToolUse", "AfterTool"):
        return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": got["text"]}}
    return None


#: adapters that take notes and stops mid-run: the hook formats above, and git-nerve's own agent (its loop drains)
MID_RUN = frozenset({*READERS, "nerve_agent"})
#: hook formats whose ``PreToolUse`` also hands notes over (as ``additionalContext``, in the model's next request):
#: Codex 0.169 runs no ``PostToolUse`` after an edit (its ``apply_patch``), so a note would wait a tool call more
NOTES_BEFORE = frozenset({"codex"})
#: of those, the ones that end themselves at a stop (opencode: its plugin aborts the session; Gemini CLI: a hook's
#: ``continue: false`` ends its headless run; Copilot CLI's, Qwen Code's and Codex's hooks can only refuse the next
#: tool calls: the runner ends them at its tick)
STOPS_ITSELF = frozenset({"claude", "gemini", "nerve_agent", "opencode"})


def copilot_answer(got: dict) -> dict | None:
    """GitHub Copilot CLI's ``postToolUse`` output (1.0.102): the notes, appended to the tool's result
    (its hooks cannot end the agent: a stop is refused tool by tool, :func:`refusal`)."""
    if got["stop"]:
        return {"additionalContext": f"git-nerve: this task was stopped ({got['stop']}). Run no more tools: "
                                     "end your turn now."}
    return {"additionalContext": got["text"]} if got["text"] else None


def refusal(cli_name: str, cwd: str, pid: int | None = None) -> dict | None:
    """A ``preToolUse`` answer (Copilot CLI, Qwen Code: their hooks cannot end the agent): once the task is
    stopped every tool call is refused, so nothing more is written before the runner ends the process; Gemini
    CLI's ``BeforeTool`` ends the run instead, before the tool runs. Notes are handed over after a call, never
    here."""
    from ..bus.connection import Bus
    from . import delivery

    paths, task_id = _task_of(cwd)
    if task_id is None:
        return None
    bus = Bus(paths.bus_path, create=False)
    try:
        stop = pending_stop(bus, task_id, paths.git_dir)
        if stop:  # the acknowledgement, once per stop: the refusal is what reached the agent
            delivery.stop_delivered(bus, task_id, reader=READERS[cli_name], via="hook",
                                    pid=pid if pid is not None else agent_pid())
    finally:
        bus.close()
    if not stop:
        return None
    reason = f"git-nerve: this task was stopped ({stop}): no more tool calls; end your turn now"
    if cli_name == "copilot":
        return {"permissionDecision": "deny", "permissionDecisionReason": reason}
    if cli_name == "gemini":  # its continue: false ends the headless run; the tool does not run
        return {"continue": False, "stopReason": reason}
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                   "permissionDecisionReason": reason}}


def hook(cli_name: str, stdin_text: str, *, cwd: str | None = None, pid: int | None = None) -> str:
    """The stdout of ``git nerve notes --hook CLI`` for this hook input ("" when nothing is injected)."""
    if cli_name not in READERS:
        raise ValueError(f"unknown hook format {cli_name!r} (known: {', '.join(sorted(READERS))})")
    data = json.loads(stdin_text) if stdin_text.strip() else {}
    if not isinstance(data, dict):
        raise ValueError("the hook input is not a JSON object")
    event = str(data.get("hook_event_name") or "PostToolUse")
    where = data.get("cwd") if isinstance(data.get("cwd"), str) and os.path.isdir(data["cwd"]) else (cwd or os.getcwd())
    if event in BEFORE_EVENTS or (cli_name == "copilot" and "toolArgs" in data and "toolResult" not in data):
        answer = refusal(cli_name, where, pid)  # before the call (Copilot CLI's camelCase input names no event)
        if answer is None and cli_name in NOTES_BEFORE:
            got = collect(where, reader=READERS[cli_name], via="hook", pid=pid if pid is not None else agent_pid())
            answer = refusal(cli_name, where, pid) if got["stop"] else claude_answer(event, got)
        return json.dumps(answer) if answer else ""
    got = collect(where, reader=READERS[cli_name], via="hook", pid=pid if pid is not None else agent_pid())
    answer = copilot_answer(got) if cli_name == "copilot" else claude_answer(event, got)
    return json.dumps(answer) if answer else ""


def main(argv: list[str]) -> int:
    """`git nerve notes --hook CLI` without click: exit 0 always, errors are one line on stderr."""
    cli_name = argv[argv.index("--hook") + 1] if "--hook" in argv and argv.index("--hook") + 1 < len(argv) else ""
    if not cli_name:
        for a in argv:
            if a.startswith("--hook="):
                cli_name = a.split("=", 1)[1]
    try:
        out = hook(cli_name, sys.stdin.read())
    except Exception as exc:  # never fail the agent's tool call
        msg = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"  # a BusError says "bus error: ..."
        sys.stderr.write(f"git-nerve notes: nothing delivered ({' '.join(str(msg).split())[:300]})\n")
        return 0
    if out:
        sys.stdout.write(out + "\n")
    return 0


__all__ = ["MID_RUN", "READERS", "STOPS_ITSELF", "agent_pid", "claude_answer", "collect", "copilot_answer", "hook",
           "main", "pending_stop", "refusal"]
