"""Each agent in a box (issue 41): the real bubblewrap around `git worker run` and the adapters' processes,
each agent only its own credentials, `git nerve validate` naming what each adapter receives."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from git_nerve.bus import messages, rounds
from git_nerve.bus.connection import Bus
from git_nerve.errors import UsageError
from git_nerve.workflow import sandbox
from git_nerve.workflow.adapters import AgentContext, StartFrame, claude_adapter
from tests.realtools import apt_tool

PY = sys.executable


@pytest.fixture
def bwrap():
    """Debian's bubblewrap, installed when missing; skipped where no box can be made (no user namespaces)."""
    path = apt_tool("bubblewrap", "bwrap")
    os.environ["PATH"] = f"{path.parent}{os.pathsep}{os.environ['PATH']}"
    why = sandbox.bwrap_usable(str(path))
    if why:
        pytest.skip(f"no bubblewrap box can be made here: {why}")
    return path


@pytest.fixture
def two_tasks(repo, gw):
    for t in ("t1", "t2"):
        assert gw(["spawn", t, "-d", f"task {t}"], repo.work).code == 0
    base = repo.work.parent / "project.worktrees"
    return repo.work, base / "t1", base / "t2"


def _bus(work: Path) -> Bus:
    return Bus(work / ".git" / "nerve" / "bus.db")


def _snapshot(*paths: Path) -> dict[str, bytes | None]:
    return {str(p): (p.read_bytes() if p.is_file() else None) for p in paths}


ATTACKS = {
    "read_ssh_key": 'cat "$HOME/.ssh/id_ed25519"',
    "write_outside": 'echo pwned > "$MAIN/outside.txt"',
    "write_other_task": 'echo pwned > "$OTHER/evil.txt"',
    "append_hook": 'echo "echo pwned" >> "$COMMON/hooks/pre-commit"',
    "change_config": 'git config core.hooksPath /tmp/evil',
    "append_config": 'echo "[core]" >> "$COMMON/config"',
    "write_bus": 'echo pwned >> "$COMMON/nerve/bus.db"',
    "move_other_branch": 'git update-ref refs/heads/$OTHER_BRANCH $(git commit-tree "HEAD^{tree}" -p HEAD -m forged)',
    "delete_other_branch": 'git update-ref -d refs/heads/$OTHER_BRANCH',
    "forge_context": 'echo {} > "$ADMIN/nerve/.worker-ctx.json"',
    "read_hidden": 'cat "$HOME/private/token"',
    "read_netrc": 'grep -q machine "$HOME/.netrc"',
    "read_aws": 'cat "$HOME/.aws/credentials"',
    "remove_packs": 'rm -f "$COMMON"/objects/pack/*.pack && ! ls "$COMMON"/objects/pack/*.pack',
}


def _script() -> str:
    lines = []
    for name, cmd in ATTACKS.items():
        lines.append(f'if ( {cmd} ) >/dev/null 2>&1; then echo "ATTACK {name} ok"; else echo "ATTACK {name} refused"; fi')
    lines += [
        'echo "line from the box" >> README.md',
        'git commit -qam "boxed edit" && echo "COMMIT ok"',
        'git nerve thread >/dev/null && echo "THREAD ok"',
        'git nerve post --role boxed "hello from the box" && echo "POST ok"',
        'git worker heartbeat --status "boxed beat" >/dev/null && echo "HEARTBEAT ok"',
    ]
    return "\n".join(lines)


def test_worker_run_in_the_box_commits_posts_and_beats_and_every_escape_fails(bwrap, two_tasks, gw, repo):
    work, wt1, wt2 = two_tasks
    common = work / ".git"
    home = Path(os.environ["HOME"])
    (home / ".ssh").mkdir(exist_ok=True)
    (home / ".ssh" / "id_ed25519").write_text("SECRET-KEY-MATERIAL\n")
    (common / "hooks" / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    (home / "private").mkdir()
    (home / "private" / "token").write_text("PRIVATE-TOKEN\n")
    (home / ".netrc").write_text("machine example.com login me password NETRC-PASSWORD\n")
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text("[default]\naws_secret_access_key = AWS-SECRET\n")
    (work / "nerve.toml").write_text('[run]\nhide = ["~/private"]\n')  # the main checkout's copy is read
    subprocess.run(["git", "gc", "-q"], cwd=work, check=True)  # the history in a pack
    packs = sorted((common / "objects" / "pack").glob("*.pack"))
    assert packs
    guarded = [home / ".ssh" / "id_ed25519", work / "outside.txt", wt2 / "evil.txt", common / "hooks" / "pre-commit",
               common / "config", common / "worktrees" / "t1" / "nerve" / ".worker-ctx.json"]
    other_branch = subprocess.run(["git", "rev-parse", "--abbrev-ref", "HEAD"], cwd=wt2, capture_output=True,
                                  text=True, check=True).stdout.strip()
    other_tip = subprocess.run(["git", "rev-parse", "HEAD"], cwd=wt2, capture_output=True, text=True).stdout
    bus = _bus(work)  # held open meanwhile, as the running git-nerve holds it: its WAL files exist
    before = _snapshot(*guarded)
    env = {**os.environ, "MAIN": str(work), "OTHER": str(wt2), "COMMON": str(common), "OTHER_BRANCH": other_branch,
           "ADMIN": str(common / "worktrees" / "t1")}
    proc = subprocess.run(["git", "worker", "run", "--sandbox", "bwrap", "--", "sh", "-c", _script()], cwd=wt1,
                          env=env, capture_output=True, text=True, timeout=120)
    out = proc.stdout
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    for name in ATTACKS:
        assert f"ATTACK {name} refused" in out, (name, out, proc.stderr)
    for secret in ("SECRET-KEY-MATERIAL", "PRIVATE-TOKEN", "NETRC-PASSWORD", "AWS-SECRET"):
        assert secret not in out + proc.stderr
    assert _snapshot(*guarded) == before
    assert sorted((common / "objects" / "pack").glob("*.pack")) == packs
    # the bus changed only through git-nerve outside the box (its own writes): nothing the box appended
    assert b"pwned" not in (common / "nerve" / "bus.db").read_bytes()
    assert bus.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert subprocess.run(["git", "rev-parse", "HEAD"], cwd=wt2, capture_output=True, text=True).stdout == other_tip
    for what in ("COMMIT", "THREAD", "POST", "HEARTBEAT"):
        assert f"{what} ok" in out, (what, out, proc.stderr)
    # outside the box: the commit is on t1's branch, the post became a round, the heartbeat a message
    log = subprocess.run(["git", "log", "-1", "--format=%s"], cwd=wt1, capture_output=True, text=True).stdout.strip()
    assert log == "boxed edit"
    posted = [r for r in rounds.load(bus.conn, "t1", range(1, rounds.last_round(bus.conn, "t1") + 1)) if r.role == "boxed"]
    assert [r.content for r in posted] == ["hello from the box"]
    beats = [m.payload for m in messages.for_task(bus.conn, "t1", kinds=("heartbeat",)) if m.payload.get("source") == "box"]
    assert beats and beats[-1].get("status") == "boxed beat"
    commits = [m.payload["sha"] for m in messages.for_task(bus.conn, "t1", kinds=("commit",))]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=wt1, capture_output=True, text=True).stdout.strip()
    assert head in commits
    bus.close()


def test_a_box_cannot_post_to_another_tasks_thread(bwrap, two_tasks):
    work, wt1, _ = two_tasks
    bus = _bus(work)
    proc = subprocess.run(["git", "worker", "run", "--sandbox", "bwrap", "--", "git", "nerve", "post", "--task", "t2",
                           "--role", "forger", "not mine"], cwd=wt1, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "only its own task's thread" in proc.stderr
    assert all(r.role != "forger" for r in rounds.load(bus.conn, "t2", range(1, rounds.last_round(bus.conn, "t2") + 1)))
    bus.close()


def test_network_none_cuts_the_box_off(bwrap, two_tasks):
    import socket

    work, wt1, _ = two_tasks
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    def serve() -> None:
        try:
            while True:
                server.accept()[0].close()
        except OSError:
            pass  # closed at the end of the test

    threading.Thread(target=serve, daemon=True).start()
    probe = [PY, "-c", f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5); print('CONNECTED')"]
    try:
        on = subprocess.run(["git", "worker", "run", "--sandbox", "bwrap", "--", *probe], cwd=wt1, capture_output=True,
                            text=True, timeout=60)
        assert on.returncode == 0 and "CONNECTED" in on.stdout, (on.stdout, on.stderr)
        (work / "nerve.toml").write_text('[run]\nnetwork = "none"\n')
        off = subprocess.run(["git", "worker", "run", "--sandbox", "bwrap", "--", *probe], cwd=wt1,
                             capture_output=True, text=True, timeout=60)
        assert off.returncode != 0 and "CONNECTED" not in off.stdout, (off.stdout, off.stderr)
    finally:
        server.close()


def test_sandbox_bwrap_without_a_box_refuses_with_one_line_and_auto_warns(two_tasks, monkeypatch, tmp_path):
    _, wt1, _ = two_tasks
    empty = tmp_path / "bin"
    empty.mkdir()
    for tool in ("git", "sh"):
        (empty / tool).symlink_to(subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True,
                                                 text=True).stdout.strip())
    env = {**os.environ, "PATH": f"{Path(PY).parent}{os.pathsep}{empty}", "NERVE_SANDBOX": "auto"}  # the default
    hard = subprocess.run(["git", "worker", "run", "--sandbox", "bwrap", "--", "sh", "-c", "echo RAN"], cwd=wt1,
                          env=env, capture_output=True, text=True, timeout=60)
    assert hard.returncode == 2 and "RAN" not in hard.stdout, (hard.stdout, hard.stderr)
    assert hard.stderr.strip().splitlines() == ['error: sandbox = "bwrap" but no box can be made here: `bwrap` is '
                                                'not on PATH (Debian/Ubuntu: apt-get install bubblewrap)']
    soft = subprocess.run(["git", "worker", "run", "--", "sh", "-c", "echo RAN"], cwd=wt1, env=env,
                          capture_output=True, text=True, timeout=60)
    assert soft.returncode == 0 and "RAN" in soft.stdout
    assert [ln for ln in soft.stderr.splitlines() if "unboxed" in ln] == [
        "warning: git-nerve: agents run unboxed: `bwrap` is not on PATH (Debian/Ubuntu: apt-get install bubblewrap)"]
    monkeypatch.setenv("PATH", env["PATH"])
    with pytest.raises(UsageError):
        sandbox.choose("bwrap")
    monkeypatch.delenv("NERVE_SANDBOX")
    lines = []
    assert sandbox.choose(None, warn=lines.append) == "none" and len(lines) == 1  # unset: auto
    with pytest.raises(UsageError):
        sandbox.choose("docker")


ENV_DUMP = "import json, os; print(json.dumps(sorted(os.environ)))"


def _env_seen(adapter, workdir: Path, start: StartFrame | None = None) -> list[str]:
    start = start or StartFrame(task_id="", workflow="w", content="c", workdir=str(workdir))
    ctx = AgentContext(start, [], str(workdir))
    out = adapter("prompt", ctx)
    return json.loads(out.strip().splitlines()[-1])


def _dumping(adapter):
    return dataclasses.replace(adapter, binary=PY, build=lambda a: [PY, "-c", ENV_DUMP], prepare=None,
                               diagnose=None, checks=None)


def test_each_adapter_process_gets_only_its_own_provider_keys(repo, monkeypatch):
    for name, value in (("OPENAI_API_KEY", "sk-openai"), ("GEMINI_API_KEY", "g-key"), ("AWS_SECRET_ACCESS_KEY", "aws"),
                        ("ANTHROPIC_API_KEY", "sk-ant"), ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9"),
                        ("HTTPS_PROXY", "http://127.0.0.1:3128"), ("LANG", "C.UTF-8")):
        monkeypatch.setenv(name, value)
    seen = _env_seen(_dumping(claude_adapter), repo.work)
    assert "OPENAI_API_KEY" not in seen and "GEMINI_API_KEY" not in seen and "AWS_SECRET_ACCESS_KEY" not in seen
    assert {"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "HTTPS_PROXY", "LANG", "PATH", "HOME"} <= set(seen)
    from git_nerve.workflow.adapters import create_exec, gemini_adapter

    seen = _env_seen(_dumping(gemini_adapter), repo.work)
    assert "GEMINI_API_KEY" in seen and "ANTHROPIC_API_KEY" not in seen and "OPENAI_API_KEY" not in seen
    # any command (create_exec) declares nothing: it gets the environment as before
    assert "OPENAI_API_KEY" in _env_seen(create_exec([PY, "-c", ENV_DUMP]), repo.work)
    # nerve.toml's [adapters.claude] pass_env names one more
    monkeypatch.setenv("MY_GATEWAY_TOKEN", "t")
    assert "MY_GATEWAY_TOKEN" not in _env_seen(_dumping(claude_adapter), repo.work)
    assert "MY_GATEWAY_TOKEN" in _env_seen(_dumping(claude_adapter).with_defaults({"pass_env": ["MY_GATEWAY_TOKEN"]}),
                                           repo.work)
    # a key set on the adapter itself (nerve.toml / the workflow) is its own
    assert "OPENAI_API_KEY" in _env_seen(dataclasses.replace(_dumping(claude_adapter), env={"OPENAI_API_KEY": "x"}),
                                         repo.work)


def test_validate_names_what_each_adapter_receives_never_the_values(repo, gn, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-VALUE")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-VALUE")
    res = gn(["validate", "--adapter", "claude", "--json"], repo.work)
    data = json.loads(res.out)
    env = data["environment"]["claude"]
    assert "ANTHROPIC_API_KEY" in env["own"] and "OPENAI_API_KEY" in env["withheld"]
    assert "PATH" in env["general"]
    text = gn(["validate", "--adapter", "claude"], repo.work)
    line = [ln for ln in text.out.splitlines() if ln.startswith("env: adapter claude")]
    assert line and "ANTHROPIC_API_KEY" in line[0] and "withheld: " in line[0] and "OPENAI_API_KEY" in line[0]
    assert "VALUE" not in res.out + text.out


def test_the_adapter_process_runs_in_the_box(bwrap, two_tasks):
    """A command adapter's process (what `git nerve run` starts) is boxed: its worktree writable, the bus not."""
    from git_nerve.workflow.adapters import create_exec

    work, wt1, _ = two_tasks
    bus = _bus(work)
    script = ("import os, sys\nopen('made-in-box.txt', 'w').write('x')\n"
              f"try:\n    open({str(work / '.git' / 'nerve' / 'bus.db')!r}, 'ab').write(b'x')\n"
              "    print('BUS WRITTEN')\nexcept OSError as e:\n    print('BUS REFUSED', e.errno)\n"
              "print('TMPDIR', os.environ['TMPDIR'])\n")
    branch = subprocess.run(["git", "rev-parse", "--abbrev-ref", "HEAD"], cwd=wt1, capture_output=True,
                            text=True).stdout.strip()
    start = StartFrame(task_id="t1", workflow="w", content="c", workdir=str(wt1), branch=branch, sandbox="bwrap")
    out = create_exec([PY, "-c", script])("prompt", AgentContext(start, [], str(wt1), task_id="t1", role="coder"))
    bus.close()
    assert "BUS REFUSED 30" in out, out  # EROFS
    assert (wt1 / "made-in-box.txt").read_text() == "x"


def test_git_nerves_own_agent_works_in_the_box(bwrap, tmp_path):
    """The real agent (`nerve_agent`, driven by the scripted model) in the box: it reads the thread, edits,
    runs the tests, commits; the tester and reviewer see its work; its provider's key reaches it."""
    from git_nerve.demo.scripted_model.server import API_KEY, ScriptedModel
    from tests.real_agents import AgentRepo, agent_env, assert_happy_path, chat_params

    with ScriptedModel() as model:
        toml = ('\n[adapters.nerve_agent]\nextra_args = ["--base-url", "' + model.url + '/v1", '
                '"--api-key-env", "NERVE_TEST_KEY"]\n')
        repo = AgentRepo.create(tmp_path, "nerve_agent", toml_extra=toml)
        model.params.update(chat_params(repo))
        env = {**agent_env(Path(PY)), "NERVE_TEST_KEY": API_KEY, "NERVE_SANDBOX": "bwrap",
               "GEMINI_API_KEY": "not-for-this-agent"}
        res = assert_happy_path(repo, model, env, timeout=180)
    assert "unboxed" not in res.err
    assert (repo.work / ".git" / "nerve" / "box" / "t1").is_dir()  # made only for a boxed agent


@pytest.mark.real
@pytest.mark.parametrize("name", ["claude", "codex", "gemini", "qwen", "opencode"])
def test_real_agent_clis_work_in_the_box(bwrap, tmp_path, name):
    """A real agent CLI (at its pinned version, driven by the scripted model) in the box: the develop workflow
    completes; where the CLI's shell runs the hooks, its commit is recorded through the box's spool."""
    from git_nerve.demo.scripted_model.server import ScriptedModel
    from tests.agent_drivers import DRIVERS, env_for
    from tests.real_agents import AgentRepo, assert_happy_path, chat_params

    driver = DRIVERS[name]
    bin_path = driver.install()
    repo = AgentRepo.create(tmp_path, driver.name)
    with ScriptedModel(params=chat_params(repo)) as model:
        env = {**env_for(driver, bin_path, model), "NERVE_SANDBOX": "bwrap"}
        res = assert_happy_path(repo, model, env)
    assert "unboxed" not in res.err
    assert (repo.work / ".git" / "nerve" / "box" / "t1").is_dir()
    if driver.hooks_run:
        assert any(b.payload.get("source") == "post-commit" for b in repo.view().heartbeats)


def test_both_run_commands_take_sandbox(gw, gn, repo):
    for res in (gw(["run", "--help"], repo.work), gn(["run", "--help"], repo.work)):
        assert res.code == 0 and "--sandbox [auto|bwrap|none]" in res.out, res.out
    res = gn(["run", "develop", "--sandbox", "docker"], repo.work)
    assert res.code == 2 and "docker" in res.err


def test_a_fifo_or_symlink_left_in_a_box_spool_neither_blocks_nor_redirects_the_bus(two_tasks, tmp_path):
    work, _, _ = two_tasks
    box = work / ".git" / "nerve" / "box" / "t1"
    box.mkdir(parents=True)
    os.mkfifo(box / "spool")
    result: list = []
    opener = threading.Thread(target=lambda: result.append(_bus(work).close()), daemon=True)
    opener.start()
    opener.join(20)
    assert not opener.is_alive(), "opening the bus blocked on a FIFO in a box spool"
    elsewhere = tmp_path / "lines"
    elsewhere.write_text('post\t{"id": "x", "role": "forged", "content": "via a symlink"}\n')
    for leftover in box.iterdir():
        leftover.unlink()
    (box / "spool").symlink_to(elsewhere)
    bus = _bus(work)
    assert all(r.role != "forged" for r in rounds.load(bus.conn, "t1", range(1, rounds.last_round(bus.conn, "t1") + 1)))
    bus.close()


def test_a_note_reaches_the_boxed_agent_once_and_its_delivery_is_recorded_outside(bwrap, two_tasks, gn):
    from git_nerve.bus import steer

    work, wt1, _ = two_tasks
    assert gn(["tell", "--task", "t1", "use tabs, not spaces"], work).code == 0
    hook = "echo '{\"hook_event_name\": \"PostToolUse\"}' | git nerve notes --hook claude"
    proc = subprocess.run(["git", "worker", "run", "--sandbox", "bwrap", "--", "sh", "-c",
                           f"echo FIRST; {hook}; echo SECOND; {hook}; echo END"], cwd=wt1, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    first, second = proc.stdout.split("FIRST", 1)[1].split("SECOND", 1)
    assert "use tabs, not spaces" in first and "nothing delivered" not in proc.stderr, (proc.stdout, proc.stderr)
    assert "use tabs" not in second  # handed over once, though the bus was read-only in the box
    bus = _bus(work)
    delivered = steer.deliveries_for(bus.conn, "t1")
    lines = [ln.text for ln in steer.outbox_after(bus.conn) if ln.kind == "delivered"]
    bus.close()
    assert len(delivered) == 1 and delivered[0].via == "hook"
    assert any(t.startswith("note delivered to claude-code (hook)") and "use tabs" in t for t in lines), lines


@pytest.mark.parametrize("their_var", [False, True])
def test_gemini_in_the_box_reads_and_refreshes_the_users_login_through_its_private_home(bwrap, two_tasks, tmp_path,
                                                                                     monkeypatch, their_var):
    """The gemini adapter's private home links to the user's login files (no copy): in the box Gemini CLI reads
    them and writes a refreshed token in place, as it does unboxed, whether they live in ~/.gemini or in the
    user's own GEMINI_CLI_HOME."""
    from git_nerve.workflow.adapters import create_gemini

    work, wt1, _ = two_tasks
    base = tmp_path / "their-gemini-home" if their_var else Path(os.environ["HOME"])
    theirs = base / ".gemini"
    theirs.mkdir(parents=True, exist_ok=True)
    (theirs / "oauth_creds.json").write_text('{"access_token": "old"}')
    if their_var:
        monkeypatch.setenv("GEMINI_CLI_HOME", str(base))
    exe = tmp_path / "fake-gemini"
    exe.write_text(f"#!{PY}\nimport os, sys\nsys.stdin.read()\n"
                   "p = os.path.join(os.environ['GEMINI_CLI_HOME'], '.gemini', 'oauth_creds.json')\n"
                   "print('READ', open(p).read())\n"
                   "with open(p, 'w') as fh:\n    fh.write('{\"access_token\": \"refreshed\"}')\n"  # writeFile: in place
                   "print('WRITTEN')\n")
    exe.chmod(0o755)
    branch = subprocess.run(["git", "rev-parse", "--abbrev-ref", "HEAD"], cwd=wt1, capture_output=True,
                            text=True).stdout.strip()
    start = StartFrame(task_id="t1", workflow="w", content="c", workdir=str(wt1), branch=branch, sandbox="bwrap")
    out = create_gemini(binary=str(exe))("prompt", AgentContext(start, [], str(wt1), task_id="t1", role="coder"))
    assert 'READ {"access_token": "old"}' in out and "WRITTEN" in out, out
    assert (theirs / "oauth_creds.json").read_text() == '{"access_token": "refreshed"}'
    assert not (theirs / "oauth_creds.json").is_symlink()
