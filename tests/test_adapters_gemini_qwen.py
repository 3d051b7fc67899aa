"""The gemini and qwen adapters without the real CLIs (the real ones: tests/test_real_gemini.py, test_real_qwen.py).

A recording stand-in binary shows what each adapter hands its CLI: the argv (never the prompt), the
prompt on stdin, the private policy file while it runs, and the git configuration that puts back
what Gemini's shell takes away (hooks, a working `git diff`), checked against real git.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import tomllib
from pathlib import Path

import pytest

from fixtures.repos.build import git
from git_nerve.workflow.adapters import builtin_names, by_name, create_gemini, create_qwen, gemini_adapter, qwen_adapter
from git_nerve.workflow.adapters.base import AgentContext, StartFrame
from git_nerve.workflow.adapters.gemini import diagnose as gemini_diagnose
from git_nerve.workflow.adapters.gemini import git_config_env, policy_text
from git_nerve.workflow.adapters.qwen import diagnose as qwen_diagnose

PROMPT = "You are the coder. Add $(touch pwned) to README.md; it's \"quoted\".\n"

RECORDER = r'''#!{python}
import json, os, sys
prompt = sys.stdin.read()
argv = sys.argv[1:]
policy = argv[argv.index("--policy") + 1] if "--policy" in argv else None
out = {{"argv": argv, "prompt": prompt, "policy": open(policy).read() if policy and os.path.exists(policy) else None,
        "env": {{k: v for k, v in os.environ.items() if k.startswith(("GIT_", "NO_COLOR", "GEMINI_CLI"))}}}}
with open(os.environ["NERVE_RECORD_TO"], "w") as fh:
    json.dump(out, fh)
print("done\n```json\n{{\"summary\": \"ok\", \"files_changed\": []}}\n```")
'''


@pytest.fixture
def recorder(tmp_path, monkeypatch):
    exe = tmp_path / "bin" / "recorder"
    exe.parent.mkdir()
    exe.write_text(RECORDER.format(python=sys.executable))
    exe.chmod(0o755)
    record = tmp_path / "record.json"
    monkeypatch.setenv("NERVE_RECORD_TO", str(record))

    def read() -> dict:
        return json.loads(record.read_text())

    return exe, read


def ctx_for(workdir: Path, test_command: str = "python3 -m unittest -v") -> AgentContext:
    start = StartFrame(task_id="t1", workflow="develop", content="do it", workdir=str(workdir))
    return AgentContext(start, (), str(workdir), threading.Event(), "t1", "coder", test_command=test_command)


def test_both_are_built_in_and_discoverable():
    assert {"gemini", "qwen"} <= set(builtin_names())
    assert by_name("gemini") is gemini_adapter and by_name("qwen") is qwen_adapter
    assert gemini_adapter.sandbox and qwen_adapter.sandbox and gemini_adapter.tested and qwen_adapter.tested


def test_gemini_gets_the_prompt_on_stdin_and_a_private_policy(recorder, repo):
    exe, read = recorder
    out = create_gemini(binary=str(exe), model="gemini-x")(PROMPT, ctx_for(repo.work))
    assert "```json" in out
    got = read()
    assert got["prompt"] == PROMPT
    assert all("README" not in a for a in got["argv"])
    argv = got["argv"]
    assert argv[argv.index("--approval-mode") + 1] == "default"
    assert "--yolo" not in argv and "yolo" not in argv and "-y" not in argv
    assert argv[argv.index("--model") + 1] == "gemini-x"
    policy = Path(argv[argv.index("--policy") + 1])
    assert not policy.exists() and not policy.parent.exists()  # private to the run, removed afterwards
    rules = tomllib.loads(got["policy"])["rule"]
    allowed = [r for r in rules if r["decision"] == "allow" and r.get("toolName") == "run_shell_command"]
    assert "python3 -m unittest -v" in allowed[0]["commandPrefix"] and "git commit" in allowed[0]["commandPrefix"]
    assert any(r["decision"] == "deny" and r.get("commandRegex") == ".*" for r in rules)  # everything else
    assert not any(r["decision"] == "allow" and r.get("toolName") == "*" for r in rules)
    # what Gemini's shell takes away: the user's identity (~/.gitconfig) and the hooks
    assert got["env"]["GIT_AUTHOR_NAME"] == "Nerve Test"
    assert "core.hooksPath" in got["env"]["GIT_CONFIG_PARAMETERS"]
    assert not (repo.work / "pwned").exists()


def test_extra_args_override_the_flags_gemini_sets(recorder, repo):
    exe, read = recorder
    create_gemini(binary=str(exe), extra_args=["--approval-mode", "plan", "--policy", "/etc/mine.toml"])(
        PROMPT, ctx_for(repo.work))
    argv = read()["argv"]
    assert argv.count("--approval-mode") == 1 and argv[argv.index("--approval-mode") + 1] == "plan"
    assert argv.count("--policy") == 1 and argv[argv.index("--policy") + 1] == "/etc/mine.toml"


def test_policy_without_a_test_command_allows_only_git():
    rules = tomllib.loads(policy_text(""))["rule"]
    prefixes = next(r["commandPrefix"] for r in rules if r["decision"] == "allow" and "commandPrefix" in r)
    assert all(p.startswith("git ") for p in prefixes)
    assert "git push" not in prefixes and "git config" not in prefixes and "git -c" not in prefixes


def test_qwen_gets_rules_not_blanket_approval(recorder, repo):
    exe, read = recorder
    create_qwen(binary=str(exe))(PROMPT, ctx_for(repo.work))
    got = read()
    argv = got["argv"]
    assert got["prompt"] == PROMPT and all("README" not in a for a in argv)
    assert argv[argv.index("--approval-mode") + 1] == "default" and "--yolo" not in argv
    allowed = [argv[i + 1] for i, a in enumerate(argv) if a == "--allowed-tools"]
    denied = [argv[i + 1] for i, a in enumerate(argv) if a == "--exclude-tools"]
    assert "run_shell_command(python3 -m unittest -v)" in allowed and "run_shell_command(git commit)" in allowed
    assert "edit(/**)" in allowed and "run_shell_command" not in allowed  # never the whole shell
    assert "web_fetch" in denied and "run_shell_command(*$(*)" in denied and "run_shell_command(*`*)" in denied
    create_qwen(binary=str(exe), extra_args=["--allowed-tools", "run_shell_command(make test)"])(PROMPT, ctx_for(repo.work))
    argv = read()["argv"]
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--allowed-tools"] == ["run_shell_command(make test)"]


def test_a_bad_key_is_named_from_stderr_only():
    err = ('Error generating content via API. _ApiError: {"error":{"code":400,"message":"API key not valid. '
           'Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"reason":"API_KEY_INVALID"}]}}')
    cause = gemini_diagnose(None, "", err)
    assert cause and "\n" not in cause and "GEMINI_API_KEY" in cause
    assert gemini_diagnose(0, "", "When using Gemini API, you must specify the GEMINI_API_KEY environment variable.")
    assert gemini_diagnose(0, "The docs say: API key not valid means a typo.", "") is None  # the agent's answer
    assert gemini_diagnose(0, "done", "Ripgrep is not available.") is None
    cause = qwen_diagnose(None, "", "[API Error: 401 Incorrect API key provided.]")
    assert cause and "OPENAI_API_KEY" in cause
    assert qwen_diagnose(0, "[API Error: 401 Incorrect API key provided.]", "") is None
    assert qwen_diagnose(0, "ok", "Ripgrep not available") is None


def gemini_shell_env(extra: dict[str, str]) -> dict[str, str]:
    """What Gemini CLI's shell tool does to every command's environment (its prepareExecution)."""
    env = dict(os.environ, **extra)
    count = int(env.get("GIT_CONFIG_COUNT", "0"))
    for key, value in (("core.hooksPath", ""), ("diff.external", ""), ("core.pager", "cat")):
        env[f"GIT_CONFIG_KEY_{count}"], env[f"GIT_CONFIG_VALUE_{count}"] = key, value
        count += 1
    env.update(GIT_CONFIG_COUNT=str(count), GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1")
    return env


def test_git_in_geminis_shell_gets_its_hooks_and_its_diff_back(repo, tmp_path):
    work = repo.work
    (work / "README.md").write_text((work / "README.md").read_text() + "\nchanged line\n")
    (work / "new.txt").write_text("new file\n")
    git(work, "add", "new.txt")
    (work / "src").mkdir(exist_ok=True)
    want = git(work, "diff", "HEAD")
    broken = subprocess.run(["git", "diff", "HEAD"], cwd=work, env=gemini_shell_env({}), capture_output=True, text=True)
    assert broken.returncode != 0 and "external diff died" in broken.stderr  # what Gemini's shell does to git diff
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    fixed = gemini_shell_env(git_config_env(str(work), str(run_dir), {}))
    got = subprocess.run(["git", "diff", "HEAD"], cwd=work, env=fixed, capture_output=True, text=True)
    assert got.returncode == 0 and got.stdout.strip() == want.strip()
    hooks = subprocess.run(["git", "rev-parse", "--git-path", "hooks"], cwd=work, env=fixed, capture_output=True,
                           text=True).stdout.strip()
    assert os.path.realpath(hooks) == os.path.realpath(work / ".git" / "hooks")


def test_every_policy_regex_survives_geminis_safety_check_and_guards_its_settings():
    """Gemini CLI silently drops a rule whose regex has a nested quantifier (its isSafeRegExp): ours must not."""
    import re

    nested = re.compile(r"\([^)]*[*+?{].*\)[*+?{]")
    rules = tomllib.loads(policy_text("python3 -m unittest -v"))["rule"]
    patterns = [r[k] for r in rules for k in ("argsPattern", "commandRegex") if k in r]
    assert patterns and not [p for p in patterns if nested.search(p) or len(p) > 2048]
    settings = next(r for r in rules if "argsPattern" in r)
    assert settings["decision"] == "deny" and set(settings["toolName"]) == {"write_file", "replace"}
    pattern = re.compile(settings["argsPattern"])

    def args(path: str) -> str:  # Gemini's stable stringify of the tool's arguments
        return "\0" + json.dumps({"file_path": path}, separators=(",", ":"))[1:-1] + "\0"

    assert pattern.search(args("/w/t1/.gemini/settings.json")) and pattern.search(args(".qwen/settings.json"))
    assert not pattern.search(args("/w/t1/README.md")) and not pattern.search(args("/w/t1/notes.gemini/x"))


def test_qwens_notes_hooks_come_in_a_private_system_settings_file_beside_the_users_own(recorder, repo, tmp_path,
                                                                                           monkeypatch):
    """The hooks ride in this run's own system settings file (never the worktree), the user's own kept."""
    exe, read = recorder
    theirs = tmp_path / "their-system.json"
    theirs.write_text(json.dumps({"model": {"name": "m"}, "hooks": {"PostToolUse": [{"matcher": "x", "hooks": []}]}}))
    monkeypatch.setenv("QWEN_CODE_SYSTEM_SETTINGS_PATH", str(theirs))
    seen = {}
    real = RECORDER.format(python=sys.executable).replace(
        'with open(os.environ["NERVE_RECORD_TO"], "w") as fh:',
        'out["settings"] = json.load(open(os.environ["QWEN_CODE_SYSTEM_SETTINGS_PATH"]))\n'
        'out["settings_path"] = os.environ["QWEN_CODE_SYSTEM_SETTINGS_PATH"]\n'
        'with open(os.environ["NERVE_RECORD_TO"], "w") as fh:')
    exe.write_text(real)
    create_qwen(binary=str(exe))(PROMPT, ctx_for(repo.work))
    seen = read()
    path, data = seen["settings_path"], seen["settings"]
    assert path != str(theirs) and os.path.basename(path) == "nerve-qwen-settings.json"
    assert not os.path.exists(path)  # the run's private directory went with the run
    assert not str(path).startswith(str(repo.work))
    assert data["model"] == {"name": "m"}
    post = data["hooks"]["PostToolUse"]
    assert post[0]["matcher"] == "x" and len(post) == 2  # theirs first, ours beside it
    command = post[1]["hooks"][0]["command"]
    assert command.startswith("/bin/sh ") and "notes-hook.sh" in command and command.endswith("notes --hook qwen")
    assert data["hooks"]["PostToolUseFailure"][0]["hooks"][0]["command"] == command
    assert data["hooks"]["PreToolUse"][0]["hooks"][0]["command"] == command  # refuses the tools once stopped
    assert json.loads(theirs.read_text())["hooks"]["PostToolUse"] == [{"matcher": "x", "hooks": []}]  # untouched


GEMINI_HOME_RECORDER = RECORDER.replace(
    'with open(os.environ["NERVE_RECORD_TO"], "w") as fh:',
    'own = os.path.join(os.environ["GEMINI_CLI_HOME"], ".gemini")\n'
    'out["home"] = {{n: open(os.path.join(own, n)).read() for n in sorted(os.listdir(own))}}\n'
    'out["modes"] = {{n: os.lstat(os.path.join(own, n)).st_mode & 0o777 for n in os.listdir(own)}}\n'
    'out["links"] = {{n: os.readlink(os.path.join(own, n)) for n in os.listdir(own) if os.path.islink(os.path.join(own, n))}}\n'
    'with open(os.environ["NERVE_RECORD_TO"], "w") as fh:')


@pytest.mark.parametrize("their_var", [False, True])
def test_geminis_notes_hooks_come_in_a_private_home_with_the_users_settings_and_login(recorder, repo, tmp_path,
                                                                                       monkeypatch, their_var):
    """Each run its own GEMINI_CLI_HOME (never the worktree, gone with the run): the user's settings.json (JSON with
    comments, as Gemini CLI reads it) with the notes hooks appended beside their own, links to their login files
    (never a copy), and nothing else of their ~/.gemini (chat history, extensions, policies, memory); their files
    untouched."""
    exe, read = recorder
    exe.write_text(GEMINI_HOME_RECORDER.format(python=sys.executable))
    base = tmp_path / "their-gemini-home" if their_var else Path(os.environ["HOME"])
    theirs = base / ".gemini"
    (theirs / "tmp" / "chats").mkdir(parents=True)
    (theirs / "extensions").mkdir()
    settings = ('{\n  // mine\n  "security": {"auth": {"selectedType": "oauth-personal"}},\n'
                '  "mcpServers": {"nerve": {"command": "/x/git-nerve", "args": ["mcp"]}}, /* the url keeps // */\n'
                '  "site": "http://example.com/a",\n'
                '  "hooks": {"AfterTool": [{"matcher": "write_.*", "hooks": [{"type": "command", "command": "mine"}]}]}\n}\n')
    (theirs / "settings.json").write_text(settings)
    logins = {"oauth_creds.json": '{"refresh_token": "r"}', "google_accounts.json": '{"active": "me@x"}',
              "installation_id": "id-1", ".env": "GEMINI_API_KEY=k\n"}
    for name, text in logins.items():
        (theirs / name).write_text(text)
    for name in ("GEMINI.md", "history.txt", "trustedFolders.json"):
        (theirs / name).write_text("not for the run")
    if their_var:
        monkeypatch.setenv("GEMINI_CLI_HOME", str(base))
    create_gemini(binary=str(exe))(PROMPT, ctx_for(repo.work))
    got = read()
    home = got["env"]["GEMINI_CLI_HOME"]
    assert home != str(base) and not home.startswith(str(repo.work)) and not os.path.exists(home)
    assert sorted(got["home"]) == sorted([*logins, "settings.json"])  # no history, memory, trust, extensions
    assert all(got["home"][n] == text for n, text in logins.items())  # read through the links
    assert got["links"] == {n: str(theirs / n) for n in logins}
    assert got["modes"]["settings.json"] & 0o077 == 0  # the one file written there, theirs with our hooks
    data = json.loads(got["home"]["settings.json"])
    assert data["security"] == {"auth": {"selectedType": "oauth-personal"}} and "nerve" in data["mcpServers"]
    assert data["site"] == "http://example.com/a"
    after = data["hooks"]["AfterTool"]
    assert after[0]["hooks"][0]["command"] == "mine" and len(after) == 2  # theirs first, ours beside it
    ours = after[1]["hooks"][0]
    assert ours["command"].startswith("/bin/sh ") and "notes-hook.sh" in ours["command"]
    assert ours["command"].endswith("notes --hook gemini") and ours["timeout"] == 15000  # Gemini's are in ms
    assert data["hooks"]["BeforeTool"][0]["hooks"][0]["command"] == ours["command"]  # a stop ends it before a tool
    assert (theirs / "settings.json").read_text() == settings  # untouched
    assert sorted(p.name for p in theirs.iterdir()) == sorted(
        [*logins, "settings.json", "tmp", "extensions", "GEMINI.md", "history.txt", "trustedFolders.json"])
    assert not (repo.work / ".gemini").exists() and git(repo.work, "status", "--porcelain") == ""


def test_a_gemini_settings_file_that_does_not_parse_is_handed_over_as_it_is(recorder, repo, monkeypatch):
    """Gemini CLI says what is wrong with it (the run fails there): git-nerve neither fixes nor drops it."""
    exe, read = recorder
    exe.write_text(GEMINI_HOME_RECORDER.format(python=sys.executable))
    theirs = Path(os.environ["HOME"]) / ".gemini"
    theirs.mkdir(exist_ok=True)
    (theirs / "settings.json").write_text('{"model": ')
    create_gemini(binary=str(exe))(PROMPT, ctx_for(repo.work))
    assert read()["home"] == {"settings.json": '{"model": '}


def test_without_settings_of_their_own_a_gemini_run_gets_only_the_hooks(recorder, repo):
    exe, read = recorder
    exe.write_text(GEMINI_HOME_RECORDER.format(python=sys.executable))
    create_gemini(binary=str(exe))(PROMPT, ctx_for(repo.work))
    got = read()["home"]
    assert list(got) == ["settings.json"] and set(json.loads(got["settings.json"])) == {"hooks"}


HANGING_GEMINI = r'''#!{python}
import json, os, sys, time
own = os.path.join(os.environ["GEMINI_CLI_HOME"], ".gemini")
with open(os.environ["NERVE_RECORD_TO"] + ".tmp", "w") as fh:
    json.dump({{"pid": os.getpid(), "login": open(os.path.join(own, "oauth_creds.json")).read()}}, fh)
os.rename(os.environ["NERVE_RECORD_TO"] + ".tmp", os.environ["NERVE_RECORD_TO"])
time.sleep(120)
'''

KILLED_RUNNER = r'''
import sys, threading
from git_nerve.workflow.adapters import create_gemini
from git_nerve.workflow.adapters.base import AgentContext, StartFrame
work = sys.argv[2]
start = StartFrame(task_id="t1", workflow="develop", content="do it", workdir=work)
create_gemini(binary=sys.argv[1])("prompt", AgentContext(start, (), work, threading.Event(), "t1", "coder"))
'''


def test_a_gemini_run_killed_with_sigkill_leaves_no_copy_of_the_users_login(recorder, repo, tmp_path, monkeypatch):
    """The runner is SIGKILLed while Gemini CLI runs (no `finally` removes its private directory): the run read
    the user's login, and nothing under the temporary directory holds its content (links, never copies)."""
    import signal

    from tests.waiting import wait_until

    exe, _ = recorder
    exe.write_text(HANGING_GEMINI.format(python=sys.executable))
    secret = "1//refresh-token-" + os.urandom(8).hex()
    theirs = Path(os.environ["HOME"]) / ".gemini"
    theirs.mkdir()
    (theirs / "oauth_creds.json").write_text(json.dumps({"refresh_token": secret}))
    (theirs / "oauth_creds.json").chmod(0o600)
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    runner = subprocess.Popen([sys.executable, "-c", KILLED_RUNNER, str(exe), str(repo.work)],
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    record = Path(os.environ["NERVE_RECORD_TO"])
    try:
        wait_until(record.exists, 30, what="Gemini CLI started", alive=runner)
        got = json.loads(record.read_text())
        assert secret in got["login"]  # the run had the user's login
    finally:
        runner.kill()
        runner.wait()
        if record.exists():
            os.kill(json.loads(record.read_text())["pid"], signal.SIGKILL)
    left = [Path(d, f) for d, _, files in os.walk(temp) for f in files]
    assert any(p.name == "settings.json" for p in left)  # the killed run's private directory is still there
    holding = [p for p in left if not p.is_symlink() and secret in p.read_text(errors="replace")]
    assert holding == []
    assert json.loads((theirs / "oauth_creds.json").read_text()) == {"refresh_token": secret}


def test_a_killed_runs_private_directory_goes_at_the_next_run_once_its_agent_is_gone(recorder, repo, tmp_path,
                                                                                     monkeypatch):
    """The private directory of a run whose runner was SIGKILLed holds the copy of the user's settings made for
    it (their MCP server's token here). The next run keeps it while the killed run's agent still runs (it still
    reads it), and removes it once that agent is gone; a directory that is not a run's (no mark) is kept."""
    import signal

    from tests.waiting import wait_until

    exe, _ = recorder
    hanging = tmp_path / "bin" / "hanging"
    hanging.write_text(HANGING_GEMINI.format(python=sys.executable))
    hanging.chmod(0o755)
    secret = "mcp-token-" + os.urandom(8).hex()
    theirs = Path(os.environ["HOME"]) / ".gemini"
    theirs.mkdir()
    (theirs / "oauth_creds.json").write_text("{}")
    (theirs / "settings.json").write_text(json.dumps(
        {"mcpServers": {"tools": {"httpUrl": "http://127.0.0.1:9/mcp", "headers": {"Authorization": secret}}}}))
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # this process's runs too (gettempdir() is cached)
    somebody = temp / "nerve-gemini-somebodys"
    somebody.mkdir(mode=0o700)
    (somebody / "settings.json").write_text(secret)

    def holding() -> list[Path]:
        return [Path(d, f) for d, _, files in os.walk(temp) for f in files
                if Path(d) != somebody and secret in Path(d, f).read_text(errors="replace")]

    record = Path(os.environ["NERVE_RECORD_TO"])
    runner = subprocess.Popen([sys.executable, "-c", KILLED_RUNNER, str(hanging), str(repo.work)],
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    try:
        wait_until(record.exists, 30, what="the agent started", alive=runner)
        agent = json.loads(record.read_text())["pid"]
    finally:
        runner.kill()
        runner.wait()
    try:
        assert len(holding()) == 1  # the killed run's copy of the settings, with the token
        record.unlink()
        create_gemini(binary=str(exe))(PROMPT, ctx_for(repo.work))
        assert len(holding()) == 1  # its agent still runs: kept
    finally:
        os.kill(agent, signal.SIGKILL)
    wait_until(lambda: not _alive(agent), 30, what="the agent gone")
    create_gemini(binary=str(exe))(PROMPT, ctx_for(repo.work))
    assert holding() == []
    assert (somebody / "settings.json").read_text() == secret  # not a run's: kept


def _alive(pid: int) -> bool:
    """Running: a zombie (its parent, the killed runner, is gone; whether init reaps it soon depends on the
    machine) carries nothing any more."""
    from git_nerve import proctable

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not proctable.zombie(pid)
