"""Secrets are checked at every exit (issue 35, point 3): a `.env` that `.worktreeinclude` copied into a task's
worktree, or one of its values, committed with `--no-verify` is refused by the pre-push hook, `done`, `merge` and
`merge --all` (exit 7, one line naming the commit and the file, never the value; nothing published), and what the
agent printed is masked wherever git-nerve stores or shows it. Real git, a bare origin."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import git
from fixtures.repos.build import commit_file, write
from fixtures.repos.worker import fsck_after  # noqa: F401  (autouse: `git fsck` after every test)

SECRET = "s3cr3t-Value-9f8e7d"


def _run(wt: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=wt, capture_output=True, text=True)


def _remote_heads(origin: Path) -> dict[str, str]:
    out = git(origin, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads")
    return dict(line.split() for line in out.splitlines()) if out else {}


def task_with_env(remote_repo, gw, *, include: bool = True) -> tuple[Path, str]:
    """t1 spawned from a main whose ignored `.env` (API_KEY=SECRET) `.worktreeinclude` copies; (worktree, branch)."""
    work = remote_repo.work
    commit_file(work, ".gitignore", ".env\n", "ignore .env")
    if include:
        commit_file(work, ".worktreeinclude", ".env\n", "copy .env into task worktrees")
        # the person's own .worktreeinclude, trusted as they would (issue 35 §4: an untrusted one copies nothing)
        subprocess.run(["git", "nerve", "trust"], cwd=work, check=True, capture_output=True)
    git(work, "push", "-q", "origin", "main")
    write(work, ".env", f"API_KEY={SECRET}\nSHORT=abc\n")
    res = gw("spawn t1 --wait", work)
    assert res.code == 0, res
    wt = work.parent / f"{work.name}.worktrees" / "t1"
    assert (wt / ".env").is_file() == include
    assert gw("start", wt).code == 0
    return wt, git(wt, "rev-parse", "--abbrev-ref", "HEAD")


def _one_refusal(text: str, commit: str, file: str) -> None:
    lines = [ln for ln in text.splitlines() if commit[:12] in ln]
    assert len(lines) == 1, text
    assert file in lines[0] and "refused" in lines[0], text
    assert SECRET not in text


def test_a_copied_file_committed_with_no_verify_is_refused_by_pre_push_and_done(remote_repo, gw):
    wt, branch = task_with_env(remote_repo, gw)
    origin_before = _remote_heads(remote_repo.origin)
    git(wt, "add", "-f", ".env")
    assert _run(wt, "git", "commit", "-q", "--no-verify", "-m", "settings").returncode == 0
    leak = git(wt, "rev-parse", "HEAD")
    commit_file(wt, "src/more.py", "x = 1\n", "more work on top")

    push = _run(wt, "git", "push", "origin", f"HEAD:refs/heads/{branch}")
    assert push.returncode != 0
    _one_refusal(push.stderr, leak, ".env")
    assert _remote_heads(remote_repo.origin) == origin_before

    done = gw("done", wt)
    assert done.code == 7, done
    _one_refusal(done.out + done.err, leak, ".env")
    assert _remote_heads(remote_repo.origin) == origin_before
    show = json.loads(gw("show t1 --json", remote_repo.work).out)
    assert show["worker"]["state"] == "WORKING"
    assert git(wt, "rev-parse", "HEAD") != leak  # nothing rewritten: the tip is the agent's commit on top


def test_a_copied_value_pasted_into_a_tracked_file_is_refused_the_same(remote_repo, gw):
    wt, branch = task_with_env(remote_repo, gw)
    origin_before = _remote_heads(remote_repo.origin)
    write(wt, "config.py", f"API_KEY = {SECRET!r}\n")
    git(wt, "add", "config.py")
    assert _run(wt, "git", "commit", "-q", "--no-verify", "-m", "config").returncode == 0
    leak = git(wt, "rev-parse", "HEAD")

    push = _run(wt, "git", "push", "origin", branch)
    assert push.returncode != 0
    _one_refusal(push.stderr, leak, "config.py")
    done = gw("done", wt)
    assert done.code == 7, done
    _one_refusal(done.out + done.err, leak, "config.py")
    assert ".env" in done.out + done.err  # where the value comes from
    assert _remote_heads(remote_repo.origin) == origin_before


def test_merge_and_merge_all_refuse_an_approved_task_carrying_a_copied_secret(remote_repo, gw):
    wt, branch = task_with_env(remote_repo, gw)
    commit_file(wt, "src/feature.py", "def f():\n    return 1\n", "feature")
    assert gw("done", wt).code == 0
    assert gw("approve t1", remote_repo.work).code == 0
    # the state done's check cannot see: the approved branch gains the file afterwards, hooks bypassed
    git(wt, "add", "-f", ".env")
    assert _run(wt, "git", "commit", "-q", "--no-verify", "-m", "settings").returncode == 0
    leak = git(wt, "rev-parse", "HEAD")
    main_before = git(remote_repo.origin, "rev-parse", "refs/heads/main")
    local_main = git(remote_repo.work, "rev-parse", "refs/heads/main")

    res = gw("merge t1", remote_repo.work)
    assert res.code == 7, res
    _one_refusal(res.out + res.err, leak, ".env")
    assert git(remote_repo.origin, "rev-parse", "refs/heads/main") == main_before
    assert git(remote_repo.work, "rev-parse", "refs/heads/main") == local_main
    assert json.loads(gw("show t1 --json", remote_repo.work).out)["worker"]["state"] == "APPROVED"

    res = gw("merge --all", remote_repo.work)
    assert res.code == 7, res
    assert leak[:12] in res.out + res.err and SECRET not in res.out + res.err
    assert git(remote_repo.origin, "rev-parse", "refs/heads/main") == main_before


def test_no_false_refusal_a_task_with_copies_and_clean_commits_publishes_as_before(remote_repo, gw):
    wt, branch = task_with_env(remote_repo, gw)
    commit_file(wt, "src/config.py", "import os\nAPI_KEY = os.environ['API_KEY']\nSHORT = 'abc'\n", "config")
    push = _run(wt, "git", "push", "origin", branch)
    assert push.returncode == 0, push.stderr
    assert gw("done", wt).code == 0
    assert gw("approve t1", remote_repo.work).code == 0
    res = gw("merge t1", remote_repo.work)
    assert res.code == 0, res
    assert git(remote_repo.origin, "show", "main:src/config.py").startswith("import os")


def test_no_false_refusal_without_copies(remote_repo, gw):
    wt, branch = task_with_env(remote_repo, gw, include=False)
    write(wt, "notes.txt", f"{SECRET}\n")  # the same text, but nothing was copied into this worktree
    git(wt, "add", "notes.txt")
    git(wt, "commit", "-q", "-m", "notes")
    assert _run(wt, "git", "push", "origin", branch).returncode == 0
    assert gw("done", wt).code == 0


OPENAI = "sk-test-0123456789abcdef"
MASK = "[value from .env hidden by git-nerve]"


def _nothing_holds(root: Path, *values: str) -> None:
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            for value in values:
                assert value.encode() not in data, path


def test_what_the_agent_printed_is_masked_in_the_round_log_show_thread_and_console(remote_repo, gw, tmp_path):
    import os

    from conftest import run
    from console_support import Console

    wt, _branch = task_with_env(remote_repo, gw)
    work = remote_repo.work
    env = {**os.environ, "OPENAI_API_KEY": OPENAI}
    res = run(["git", "worker", "run", "--", "sh", "-c", 'cat .env; echo "key: $OPENAI_API_KEY"'], wt, env=env)
    assert res.code == 0, res
    assert SECRET in res.out  # the terminal gets what the command printed
    run(["git", "worker", "heartbeat", "--status", f"using {SECRET}"], wt, env=env)
    assert run(["git", "nerve", "post", "--role", "coder", f"the key is {OPENAI} and {SECRET}"], wt, env=env).code == 0

    nerve = work / ".git" / "nerve"
    logs = list((nerve / "runs" / "t1").glob("*.log"))
    assert len(logs) == 1, logs
    log = logs[0].read_text()
    assert f"API_KEY={MASK}" in log and "key: [redacted]" in log, log
    _nothing_holds(nerve, SECRET, OPENAI)

    for argv in (["git", "worker", "show", "t1"], ["git", "worker", "show", "t1", "--json"],
                 ["git", "nerve", "thread", "t1"], ["git", "nerve", "thread", "t1", "--json"]):
        shown = run(argv, work, env=env)
        assert shown.code == 0, shown
        assert SECRET not in shown.out + shown.err and OPENAI not in shown.out + shown.err, argv
    thread = run(["git", "nerve", "thread", "t1"], work, env=env).out
    assert MASK in thread and "[redacted]" in thread, thread
    assert f"using {MASK}" in run(["git", "worker", "show", "t1", "--json"], work, env=env).out

    console = Console(work, env=env)
    try:
        status, text = console.request("GET", "/api/task/t1/output")
    finally:
        assert console.stop() == 0
    assert status == 200, text
    out = json.loads(text)
    assert MASK in out["text"] and SECRET not in out["text"] and OPENAI not in out["text"], out


def test_one_redaction_masks_a_value_known_literally_or_only_by_its_hash_the_same_way():
    from git_nerve import redact

    salt = b"0123456789abcdef"
    table = redact.by_length([[len(SECRET), redact.digest(salt, SECRET), ".env"]])
    text = f"line one\nexport API_KEY='{SECRET}' # and {SECRET}x\nkey {OPENAI}\n"
    by_hash = redact.Redactor(["sk-test-0123456789abcdef"], salt=salt, hashed=table)
    literal = redact.Redactor(["sk-test-0123456789abcdef"], copied={SECRET: ".env"})
    want = f"line one\nexport API_KEY='{MASK}' # and {MASK}x\nkey [redacted]\n"
    assert by_hash.text(text) == literal.text(text) == want
    assert by_hash.data(text.encode()) == literal.data(text.encode()) == want.encode()
    assert by_hash.find(f"x = '{SECRET}'") == literal.find(f"x = '{SECRET}'") == (5, len(SECRET), ".env")
    assert by_hash.value({"a": [f"v {SECRET}"], "n": 1}) == {"a": [f"v {MASK}"], "n": 1}
    assert not redact.Redactor.of_env({"HOME": "/root", "API_KEY": "short"})  # nothing to mask: free
    assert literal.held(b"using s3cr3t-Val") == len("s3cr3t-Val")  # a stream waits for the rest of a value


def test_a_value_the_worktree_no_longer_holds_is_still_found_by_its_hash(remote_repo, gw):
    wt, branch = task_with_env(remote_repo, gw)
    write(wt, ".env", "API_KEY=changed-by-the-agent\n")  # the copy edited: the value is known only by its hash now
    write(wt, "config.py", f"API_KEY = {SECRET!r}\n")
    git(wt, "add", "config.py")
    assert _run(wt, "git", "commit", "-q", "--no-verify", "-m", "config").returncode == 0
    leak = git(wt, "rev-parse", "HEAD")
    done = gw("done", wt)
    assert done.code == 7, done
    _one_refusal(done.out + done.err, leak, "config.py")
