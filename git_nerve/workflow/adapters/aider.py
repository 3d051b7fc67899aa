"""Aider (PyPI ``aider-chat``): one message read from a private file (``--message-file``),
then aider exits.

* **Edit format** ``diff`` (SEARCH/REPLACE blocks), forced: for a model aider
  does not know it would pick ``whole``, which rewrites a file with the whole
  answer (it once overwrote README.md with the JSON result).
* **No blanket approval** (never ``--yes-always``): aider has no sandbox and
  no permission rules, only yes/no questions. The adapter starts aider through a
  small launcher (written to the run's private directory, run with aider's own
  Python) that answers every question by a fixed policy: *yes* to adding,
  creating or editing a file inside the worktree (outside ``.git``) and to
  putting the output of the adapter's own ``/run`` commands into the chat; *no*
  to everything else: shell commands the model suggests (also switched off:
  ``--no-suggest-shell-commands``), URLs to scrape (``--no-detect-urls``),
  installing playwright or pip packages, files outside the worktree. Nothing is
  ever asked of a person.
* **Commands a role needs**: aider cannot run a command on its own initiative
  here, so before the prompt aider runs (its own ``/run``, from a private
  ``--load`` file the adapter writes: fixed commands, never the agent's output)
  ``git nerve thread``, the repository's test command (coder, tester) and the
  diff against the task's base (reviewer); their output is in the chat.
* **Commits**: ``--auto-commits`` commits aider's edits on the task branch, with
  ``--git-commit-verify`` so the repository's hooks run; ``--test-cmd`` +
  ``--auto-test`` run the tests after every edit.
* aider exits 0 after an API failure: :func:`diagnose` reads its error lines.

The model is the user's own aider setup (``OPENAI_API_KEY``/``OPENAI_API_BASE``,
``~/.aider.conf.yml``); nerve.toml ``[adapters.aider] model`` adds ``--model``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil

from .base import AdapterSpawnFailed
from . import usage
from .command import PROMPT_FILE, CommandAdapter, Invocation, adapter_factory, extras, options, probe

#: The launcher: aider's own main() with its confirmation questions answered by the fixed policy.
LAUNCHER = r'''"""git-nerve's launcher for aider: every confirmation answered by a fixed policy (never a person)."""
import os
import sys

ROOT = os.path.realpath(os.environ["NERVE_AIDER_ROOT"])
#: Questions answered yes when their subject is a path inside the worktree (not .git).
FILE_QUESTIONS = (
    "Add file to the chat?",
    "Create new file?",
    "Allow edits to file that has not been added to the chat?",
)


def _inside(subject):
    if not subject or "\n" in subject:
        return False
    path = os.path.realpath(os.path.join(ROOT, subject))
    rel = os.path.relpath(path, ROOT)
    return not (rel == ".." or rel.startswith(".." + os.sep) or rel == ".git" or rel.startswith(".git" + os.sep))


def policy(question, subject):
    if question in FILE_QUESTIONS:
        return _inside(subject)
    # the output of the adapter's own /run commands (git nerve thread, the tests, the diff)
    if question.startswith("Add ") and question.endswith("tokens of command output to the chat?"):
        return True
    return False  # shell commands, URLs, installs, anything new: refused


def confirm_ask(self, question, default="y", subject=None, explicit_yes_required=False, group=None,
                allow_never=False):
    answer = policy(question, subject)
    self.tool_output(f"[git-nerve policy] {question} {subject or ''} -> {'yes' if answer else 'no'}")
    return answer


try:
    from aider import io as _aider_io  # noqa: E402
except ImportError:
    # never run aider without the policy: with its stdin closed it would answer every question with its default (yes)
    sys.stderr.write(f"git-nerve: aider's package is not importable by {sys.executable}: "
                     "cannot apply the confirmation policy; not running aider\n")
    sys.exit(2)

_aider_io.InputOutput.confirm_ask = confirm_ask


def _record_usage(log):
    """Every model response's own usage appended to ``log`` (issue 39): aider reports some of its requests in
    rounded `Tokens:` lines and others (a commit message from its weak model) nowhere."""
    import json

    from aider import llm

    llm.litellm._load_litellm()  # what aider's first request would do; the callers look `completion` up each time
    module = llm.litellm._lazy_module
    complete = module.completion

    def completion(*args, **kwargs):
        response = complete(*args, **kwargs)
        usage = getattr(response, "usage", None)  # a streamed reply has none (the adapter runs aider --no-stream)
        if usage is not None:
            details = getattr(usage, "prompt_tokens_details", None)
            entry = {"model": kwargs.get("model"), "prompt_tokens": getattr(usage, "prompt_tokens", None),
                     "completion_tokens": getattr(usage, "completion_tokens", None),
                     "cached_tokens": getattr(details, "cached_tokens", None)}
            try:
                with open(log, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(entry) + "\n")
            except OSError:
                pass
        return response

    module.completion = completion


if os.environ.get("NERVE_AIDER_USAGE"):
    _record_usage(os.environ["NERVE_AIDER_USAGE"])

from aider.main import main  # noqa: E402

sys.exit(main())
'''

#: aider's own options: plain output, nothing fetched, nothing written into the worktree but the edits.
OWN_FLAGS: tuple[tuple[str, str | None], ...] = (
    ("--edit-format", "diff"),
    ("--no-pretty", None),
    ("--no-stream", None),
    ("--no-fancy-input", None),
    ("--no-check-update", None),
    ("--no-show-release-notes", None),
    ("--no-analytics", None),
    ("--no-gitignore", None),
    ("--no-suggest-shell-commands", None),
    ("--no-detect-urls", None),
    ("--disable-playwright", None),
    ("--no-auto-lint", None),
    ("--auto-commits", None),
    ("--no-dirty-commits", None),
    ("--git-commit-verify", None),
    ("--no-attribute-author", None),
    ("--no-attribute-committer", None),
    ("--no-show-model-warnings", None),
    ("--no-restore-chat-history", None),
    ("--map-tokens", "0"),
    ("--encoding", "utf-8"),
)


def _negation(flag: str) -> str:
    return "--" + flag[5:] if flag.startswith("--no-") else "--no-" + flag[2:]


def _argv(a: CommandAdapter) -> list[str]:
    # extra_args override the adapter's flags, also by their negation (--no-auto-commits undoes --auto-commits)
    given = {x.split("=", 1)[0] for x in (a.extra_args or ()) if x.startswith("--")}
    own = [(f, v) for f, v in OWN_FLAGS if _negation(f) not in given]
    if a.model:
        own.insert(0, ("--model", a.model))
    return [a.binary, *options(own, a.extra_args), *extras(a), "--message-file", PROMPT_FILE]


def aider_python(binary: str) -> str | None:
    """The Python interpreter aider is installed in (from its script's ``#!`` line)."""
    path = shutil.which(binary)
    if path is None:
        return None
    try:
        with open(path, "rb") as fh:
            first = fh.readline().decode("utf-8", "replace").strip()
    except OSError:
        return None
    if not first.startswith("#!"):
        return None
    words = shlex.split(first[2:])
    if words and os.path.basename(words[0]) == "env" and len(words) > 1:
        return shutil.which(words[-1])
    return words[0] if words and os.path.isfile(words[0]) else None


def _commands(inv: Invocation) -> list[str]:
    """The fixed commands aider runs (`/run`) before the prompt, for this role."""
    runs = ["git nerve thread"]
    test = inv.ctx.test_command
    base = inv.ctx.start.base
    if inv.ctx.role == "reviewer" and base:
        q = shlex.quote(base)
        runs.append(f"git --no-pager log --oneline {q}..HEAD")
        runs.append(f"git --no-pager diff {q}...HEAD")
    elif test:
        runs.append(test)
    return [f"/run {c}" for c in runs]


USAGE_LOG = "aider-usage.jsonl"


def _report(adapter: CommandAdapter, stdout: str, inv: Invocation) -> usage.Report:
    """aider's usage as the launcher logged it in the run's private directory (none there: not reported)."""
    return usage.aider(inv.private_text(USAGE_LOG), stdout)


def _prepare(adapter: CommandAdapter, inv: Invocation) -> None:
    python = aider_python(inv.argv[0])
    launcher = os.path.join(inv.tmpdir, "nerve_aider.py")
    with open(launcher, "w", encoding="utf-8") as fh:
        fh.write(LAUNCHER)
    load = os.path.join(inv.tmpdir, "nerve-aider-commands.txt")
    with open(load, "w", encoding="utf-8") as fh:
        fh.write("\n".join(_commands(inv)) + "\n")
    # aider's own files (history, input history) go to the private directory, not into the worktree
    files = [
        ("--load", load),
        ("--chat-history-file", os.path.join(inv.tmpdir, "aider.chat.history.md")),
        ("--input-history-file", os.path.join(inv.tmpdir, "aider.input.history")),
    ]
    if inv.ctx.test_command and inv.ctx.role == "coder":
        files += [("--test-cmd", inv.ctx.test_command), ("--auto-test", None)]
    extra = options(files, adapter.extra_args)
    at = inv.argv.index("--message-file")
    inv.argv[at:at] = extra
    if python is None and shutil.which(inv.argv[0], path=inv.env.get("PATH")) is None:
        return  # run_process says the binary is not on PATH
    if python is None:
        # never unpatched: with stdin closed aider answers every question with its default (yes)
        raise AdapterSpawnFailed(adapter.name, f"cannot find the Python interpreter of `{inv.argv[0]}` "
                                 "(needed to apply the confirmation policy)")
    inv.argv[0:1] = [python, launcher]
    inv.env["NERVE_AIDER_ROOT"] = inv.workdir
    inv.env["NERVE_AIDER_USAGE"] = os.path.join(inv.tmpdir, USAGE_LOG)  # each response's usage (the launcher's)
    inv.env["AIDER_ANALYTICS"] = "false"
    inv.env["AIDER_CHECK_UPDATE"] = "false"
    inv.env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm would fetch its model list at import
    inv.env.pop("AIDER_YES_ALWAYS", None)  # the policy answers, never a blanket yes


_AUTH = re.compile(r"AuthenticationError|Incorrect API key|invalid[_ ]api[_ ]key|\b401\b|api key.*(invalid|not valid)"
                   r"|OPENAI_API_KEY", re.I)
_API = re.compile(r"^(litellm\.\w+Error|openai\.\w+Error|\w*APIConnectionError|\w*NotFoundError).*$", re.M)


def diagnose(code: int | None, stdout: str, stderr: str) -> str | None:
    """aider prints litellm's error and goes on (exit 0): an authentication error is fatal at once."""
    text = stdout + "\n" + stderr
    for line in text.splitlines():
        if "AuthenticationError" in line or ("401" in line and _AUTH.search(line)):
            return f"the model API refused the key: {line.strip()[:300]} (check OPENAI_API_KEY / the key aider uses)"
    if code is not None:
        m = _API.search(text)
        if m:
            return f"the model API failed: {m.group(0).strip()[:300]}"
    return None


def checks(adapter: CommandAdapter) -> list[str]:
    """aider runs, its interpreter is found (the policy launcher needs it) and knows the flags used here."""
    python = aider_python(adapter.binary)
    if python is None:
        return [f"cannot find the Python interpreter of `{adapter.binary}` (needed for the confirmation policy)"]
    check = ("import inspect, aider, aider.io, aider.main; "
             "print(aider.__version__); "
             "print(list(inspect.signature(aider.io.InputOutput.confirm_ask).parameters))")
    proc, helped = probe([python, "-c", check]), probe([adapter.binary, "--help"])
    if not (proc.ok and helped.ok):
        return [proc.error or helped.error]
    help_text = helped.stdout
    if proc.code != 0:
        return [f"aider's package cannot be imported by {python}: {proc.stderr.strip()[-300:]}"]
    problems = []
    if "question" not in proc.stdout or "subject" not in proc.stdout:
        problems.append(f"aider {proc.stdout.split()[0] if proc.stdout else '?'}: InputOutput.confirm_ask changed; "
                        "the confirmation policy cannot be applied (tested with aider 0.86)")
    needed = [f for f, _ in OWN_FLAGS] + ["--load", "--test-cmd", "--auto-test", "--message-file"]
    missing = [f for f in needed if f.replace("--no-", "--") not in help_text and f not in help_text]
    if missing:
        problems.append(f"aider does not know {', '.join(missing)} (tested with aider 0.86)")
    return problems


create_aider = adapter_factory(
    "aider", "aider",
    build=_argv, prompt_via="file", prepare=_prepare, diagnose=diagnose, checks=checks,
    sandbox="",  # aider has no sandbox and no permission rules; see the module docstring
    report=_report,
    env_names=("AIDER_*", "OPENAI_*", "LITELLM_*", "OLLAMA_*"), state_dirs=(".aider",),
)


#: The default instance: sensible defaults, tuned per repository in nerve.toml.
aider_adapter = create_aider()

__all__ = ["aider_adapter", "aider_python", "create_aider"]
