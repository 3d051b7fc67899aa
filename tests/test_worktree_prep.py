"""Worktrees that are ready to work (issue 28): `.worktreeinclude` / `[worktree] include` copies (hostile
patterns refused), clone_dirs, NERVE_PORT blocks, the setup command, disk_bytes and the caps, on real
repositories through `git worker`."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from conftest import git, trusting
from fixtures.repos import worker as wk
from fixtures.repos.build import commit_file, write
from fixtures.repos.worker import fsck_after  # noqa: F401  (autouse: `git fsck` after every test)
from waiting import wait_until


@pytest.fixture
def gw(gw, gn):
    """The settings here are the person's own: trusted before each spawn and retry."""
    return trusting(gw, gn)


def wt_of(work: Path, task_id: str) -> Path:
    return work.parent / f"{work.name}.worktrees" / task_id


def toml(work: Path, text: str) -> None:
    write(work, "nerve.toml", "[worktree]\n" + text)
    git(work, "add", "nerve.toml")
    git(work, "commit", "-q", "-m", "nerve.toml")


def ignore(work: Path, *patterns: str) -> None:
    commit_file(work, ".gitignore", "".join(p + "\n" for p in patterns), "ignore")


def status_json(gw, work: Path) -> dict:
    res = gw("status --json", work)
    assert res.code == 0, res
    return {r["task_id"]: r for r in json.loads(res.out)}


def test_worktreeinclude_copies_ignored_files_only(repo, gw):
    work = repo.work
    ignore(work, ".env", "config/local.json", "build/", "*.log")
    write(work, ".env", "API_KEY=abcdefgh12345\n")
    write(work, "config/local.json", "{}\n")
    write(work, "build/out.bin", "x")
    write(work, "debug.log", "not included\n")
    write(work, "notes.txt", "untracked, not ignored\n")
    write(work, ".worktreeinclude", "# carried into every worktree\n.env\nconfig/\nnotes.txt\n")
    res = gw("spawn t1 --no-fetch", work)
    assert res.code == 0, res
    wt = wt_of(work, "t1")
    assert (wt / ".env").read_text() == "API_KEY=abcdefgh12345\n"
    assert (wt / "config" / "local.json").is_file()
    assert not (wt / "build").exists() and not (wt / "debug.log").exists()
    assert not (wt / "notes.txt").exists()  # matched, but git does not ignore it: never copied
    assert "Copied:   .env, config/local.json" in res.out
    assert status_json(gw, work)["t1"]["copied"] == [".env", "config/local.json"]
    show = gw("show t1", work)
    assert "Copied:   .env, config/local.json" in show.out
    assert git(wt, "status", "--porcelain") == ""  # the copies are ignored there too


def test_nerve_toml_include_and_retry_copies_again(repo, gw):
    work = repo.work
    ignore(work, "secrets/")
    write(work, "secrets/dev.key", "k\n")
    toml(work, 'include = ["secrets/*.key"]\n')
    assert gw("spawn t1 --no-fetch", work).code == 0
    wt = wt_of(work, "t1")
    assert (wt / "secrets" / "dev.key").read_text() == "k\n"
    assert gw("cancel t1 --cleanup --force", work).code == 0
    assert not wt.exists()
    assert gw("retry t1", work).code == 0
    assert (wt / "secrets" / "dev.key").read_text() == "k\n"


def test_hostile_patterns_copy_nothing_from_outside(repo, gw, tmp_path):
    work = repo.work
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "stolen.txt").write_text("outside the checkout\n")
    ignore(work, "link.txt", "linkdir", "conf.local", "stolen.txt", "ok.txt")
    os.symlink(outside / "stolen.txt", work / "link.txt")  # a symlink pointing out
    os.symlink(outside, work / "linkdir")  # a directory symlink pointing out
    write(work, "ok.txt", "fine\n")
    # the task's branch tracks conf.local; the main checkout has its own, ignored
    git(work, "checkout", "-q", "-b", "other")
    write(work, "conf.local", "tracked on the branch\n")
    git(work, "add", "-f", "conf.local")
    git(work, "commit", "-q", "-m", "track conf.local")
    git(work, "checkout", "-q", "main")
    write(work, "conf.local", "the main checkout's\n")
    write(work, ".worktreeinclude", "\n".join([
        "../outside/stolen.txt", "../*", f"{outside}/stolen.txt", "/stolen.txt", "link.txt", "linkdir/**",
        "linkdir", "README.md", "src/", "conf.local", "ok.txt"]) + "\n")
    res = gw("spawn t1 --no-fetch --from other", work)
    assert res.code == 0, res
    wt = wt_of(work, "t1")
    assert (wt / "ok.txt").read_text() == "fine\n"
    assert not os.path.lexists(wt / "link.txt") and not os.path.lexists(wt / "linkdir")
    assert not os.path.lexists(wt / "stolen.txt")
    assert (wt / "conf.local").read_text() == "tracked on the branch\n"  # never over a file the worktree tracks
    assert git(wt, "status", "--porcelain") == ""  # README.md, src/ (tracked) untouched
    assert "leaves the checkout" in res.err and "'../*'" in res.err
    assert "not copied: conf.local (the new worktree tracks it)" in res.err
    assert "not copied: link.txt (not a regular file)" in res.err
    assert status_json(gw, work)["t1"]["copied"] == ["ok.txt"]
    assert (outside / "stolen.txt").read_text() == "outside the checkout\n"


def test_a_symlinked_directory_on_the_worktree_side_is_not_written_through(repo, gw, tmp_path):
    work = repo.work
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    ignore(work, "cfg/")
    git(work, "checkout", "-q", "-b", "other")
    os.symlink(outside, work / "cfg")  # the branch tracks cfg as a symlink pointing out
    git(work, "add", "-f", "cfg")
    git(work, "commit", "-q", "-m", "cfg link")
    git(work, "checkout", "-q", "main")
    write(work, "cfg/app.ini", "x=1\n")
    write(work, ".worktreeinclude", "cfg/\n")
    res = gw("spawn t1 --no-fetch --from other", work)
    assert res.code == 0, res
    assert list(outside.iterdir()) == []
    assert "not copied: cfg/app.ini" in res.err


def test_clone_dirs_brings_an_ignored_directory(repo, gw):
    work = repo.work
    ignore(work, "node_modules/")
    write(work, "node_modules/pkg/index.js", "module.exports = 1\n")
    os.symlink("pkg/index.js", work / "node_modules" / "link.js")
    toml(work, 'clone_dirs = ["node_modules", "src", "../x"]\n')
    res = gw("spawn t1 --no-fetch", work)
    assert res.code == 0, res
    wt = wt_of(work, "t1")
    assert (wt / "node_modules" / "pkg" / "index.js").read_text() == "module.exports = 1\n"
    assert os.readlink(wt / "node_modules" / "link.js") == "pkg/index.js"
    assert "Cloned:   node_modules" in res.out
    assert "'src' not brought over (git does not ignore it" in res.err  # tracked: never
    assert "'../x' not brought over (leaves the checkout)" in res.err


def test_ports_distinct_across_five_live_tasks_and_freed_on_cancel(repo, gw):
    work = repo.work
    toml(work, "port_range = [31000, 31050]\nport_block = 10\n")
    for i in range(1, 6):
        assert gw(f"spawn t{i} --no-fetch", work).code == 0
    ports = {t: r["port"] for t, r in status_json(gw, work).items()}
    assert sorted(ports.values()) == [31000, 31010, 31020, 31030, 31040]
    full = gw("spawn t6 --no-fetch", work)
    assert full.code == 0 and "no free port block of 10 in 31000-31049" in full.err
    assert status_json(gw, work)["t6"]["port"] is None
    assert gw("cancel t3", work).code == 0
    after = status_json(gw, work)
    assert after["t3"]["port"] is None  # an ended task holds no block
    assert gw("spawn t7 --no-fetch", work).code == 0
    assert status_json(gw, work)["t7"]["port"] == ports["t3"]
    show = gw("show t1", work)
    assert f"Port:     {ports['t1']}" in show.out


def test_setup_wait_runs_in_the_worktree_with_task_and_port(repo, gw):
    work = repo.work
    ignore(work, ".env")
    write(work, ".env", "A=1\n")
    write(work, ".worktreeinclude", ".env\n")
    toml(work, "setup = \"sh -c 'cat .env; echo port=$NERVE_PORT task=$NERVE_TASK_ID; touch ready'\"\n"
               "port_range = [32000, 32100]\n")
    res = gw("spawn t1 --no-fetch --wait", work)
    assert res.code == 0, res
    wt = wt_of(work, "t1")
    assert (wt / "ready").is_file()  # ran in the new worktree, after the copy
    log = Path(status_json(gw, work)["t1"]["setup_log"])
    assert log == Path(git(work, "rev-parse", "--path-format=absolute", "--git-common-dir")) / "nerve" / "setup" / "t1.log"
    assert "A=1" in log.read_text() and "port=32000 task=t1" in log.read_text()
    assert "Setup:    done" in res.out
    assert status_json(gw, work)["t1"]["setup"] == "done"


def test_failing_setup_keeps_everything_and_names_its_log(repo, gw):
    work = repo.work
    toml(work, "setup = \"sh -c 'echo broken >&2; exit 3'\"\n")
    res = gw("spawn t1 --no-fetch --wait", work)
    assert res.code == 1, res
    log = wt_of(work, "t1").parent.parent / work.name / ".git" / "nerve" / "setup" / "t1.log"
    assert str(log) in res.err and "setup failed" in res.err
    assert "broken" in log.read_text() and "[setup exited 3]" in log.read_text()
    assert wk.state(work, "t1") == "ASSIGNED" and wt_of(work, "t1").is_dir()
    row = status_json(gw, work)["t1"]
    assert row["setup"] == "failed"
    human = gw("status", work)
    assert f"setup failed (log: {log})" in human.out


def test_setup_in_the_background_and_start_warns(repo, gw):
    work = repo.work
    toml(work, "setup = \"sh -c 'sleep 3; echo finished'\"\n")
    began = time.monotonic()
    res = gw("spawn t1 --no-fetch", work)
    assert res.code == 0, res
    assert time.monotonic() - began < 2.5  # spawn did not wait for it
    assert status_json(gw, work)["t1"]["setup"] == "running"
    start = gw("start", wt_of(work, "t1"))
    assert start.code == 0 and "setup of t1 is still running" in start.err
    deadline = time.monotonic() + 20
    while status_json(gw, work)["t1"]["setup"] == "running" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert status_json(gw, work)["t1"]["setup"] == "done"


def test_setup_is_never_given_to_a_shell(repo, gw):
    work = repo.work
    toml(work, "setup = \"touch a;touch b\"\n")
    assert gw("spawn t1 --no-fetch --wait", work).code == 0
    wt = wt_of(work, "t1")
    assert (wt / "a;touch").exists() and (wt / "b").exists()  # two words for touch, no `;` for a shell


def test_disk_bytes_measured_and_cached(repo, gw):
    work = repo.work
    toml(work, "disk_ttl = 3600\n")
    assert gw("spawn t1 --no-fetch", work).code == 0
    first = status_json(gw, work)["t1"]["disk_bytes"]
    assert isinstance(first, int) and first > 0
    (wt_of(work, "t1") / "big.bin").write_bytes(os.urandom(1 << 20))
    assert status_json(gw, work)["t1"]["disk_bytes"] == first  # cached
    wk.ingest(work)
    with wk.opened(work) as r:
        r.bus.conn.execute("UPDATE task_prep SET disk_at = disk_at - 7200")
    assert status_json(gw, work)["t1"]["disk_bytes"] >= first + (1 << 20)
    assert "disk 1." in gw("status", work).out and "Disk:     1." in gw("show t1", work).out


def test_max_live_refuses_and_names_what_to_clean(repo, gw):
    work = repo.work
    toml(work, "max_live = 2\n")
    assert gw("spawn t1 --no-fetch", work).code == 0
    assert gw("spawn t2 --no-fetch", work).code == 0
    assert gw("cancel t2", work).code == 0
    res = gw("spawn t3 --no-fetch", work)
    assert res.code == 2, res
    err = res.err.strip().splitlines()
    assert len(err) == 1 and "max_live = 2" in err[0]
    assert err[0].index("git worker cancel t2 --cleanup") < err[0].index("git worker cancel t1 --cleanup")
    assert wk.row(work, "t3") is None and not wt_of(work, "t3").exists()
    assert "feat/t3" not in wk.branches(work)
    assert gw("cancel t2 --cleanup", work).code == 0
    assert gw("spawn t3 --no-fetch", work).code == 0


def test_max_total_bytes_refuses(repo, gw):
    work = repo.work
    toml(work, "max_total_bytes = 100000\ndisk_ttl = 0\n")
    assert gw("spawn t1 --no-fetch", work).code == 0
    (wt_of(work, "t1") / "big.bin").write_bytes(os.urandom(200000))
    res = gw("spawn t2 --no-fetch", work)
    assert res.code == 2 and "max_total_bytes = 100000" in res.err and "git worker cancel t1 --cleanup" in res.err
    assert wk.row(work, "t2") is None


def test_bad_worktree_table_is_refused_before_anything(repo, gw):
    work = repo.work
    toml(work, "setup = 3\n")
    res = gw("spawn t1 --no-fetch", work)
    assert res.code == 2 and "setup must be a string" in res.err
    assert wk.row(work, "t1") is None and not wt_of(work, "t1").exists()


def test_spawning_again_prepares_a_task_whose_spawn_stopped_before_it(repo, gw):
    work = repo.work
    ignore(work, ".env", "kept.env")
    write(work, ".env", "A=1\n")
    write(work, "kept.env", "B=2\n")
    write(work, ".worktreeinclude", "*.env\n.env\n")
    assert gw("spawn t1 --no-fetch", work).code == 0
    wt = wt_of(work, "t1")
    (wt / ".env").unlink()  # as if the spawn had been killed half-way through the copy (kept.env made)
    with wk.opened(work) as r:
        with r.bus.write() as conn:
            conn.execute("DELETE FROM task_prep WHERE task_id = 't1'")
    res = gw("spawn t1 --no-fetch", work)
    assert res.code == 0 and "Exists worker: t1" in res.out
    assert (wt / ".env").read_text() == "A=1\n"
    assert status_json(gw, work)["t1"]["copied"] == [".env", "kept.env"]  # the earlier copy is still guarded


def test_the_console_shows_port_setup_and_disk(repo, gw):
    from git_nerve.console import state

    work = repo.work
    toml(work, "port_range = [33000, 33010]\nsetup = \"true\"\n")
    assert gw("spawn t1 --no-fetch --wait", work).code == 0
    with wk.opened(work) as r:
        (row,) = state.summary(r)["workers"]
        detail = state.task_detail(r, "t1")["worker"]
    assert row["port"] == 33000 and row["setup"] == "done" and row["disk_bytes"] > 0
    assert detail["setup_log"].endswith("setup/t1.log")
    page = (Path(state.__file__).parent / "page.html").read_text()
    assert 'data-testid": "prep"' in page and '"disk " + (w.disk' in page and '"port " + w.port' in page


def test_concurrent_spawns_get_distinct_ports_and_retry_keeps_distinctness(repo, gw):
    import subprocess

    work = repo.work
    toml(work, "port_range = [34000, 34100]\nport_block = 10\n")
    assert gw("spawn t0 --no-fetch", work).code == 0  # the bus exists before the race
    procs = [subprocess.Popen(["git", "worker", "spawn", f"c{i}", "--no-fetch"], cwd=work,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(4)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    rows = status_json(gw, work)
    ports = [rows[t]["port"] for t in ("t0", "c0", "c1", "c2", "c3")]
    assert len(set(ports)) == 5 and all(34000 <= p < 34100 and p % 10 == 0 for p in ports)
    freed = rows["c1"]["port"]
    assert gw("cancel c1", work).code == 0
    assert gw("spawn c9 --no-fetch", work).code == 0
    assert status_json(gw, work)["c9"]["port"] == freed  # the lowest free block: c1's
    assert gw("retry c1", work).code == 0
    again = status_json(gw, work)
    live = [again[t]["port"] for t in again if again[t]["state"] not in ("COMPLETED", "FAILED")]
    assert len(live) == len(set(live)) == 6 and again["c1"]["port"] not in (None, freed)


def test_negated_patterns_and_the_setup_at_retry(repo, gw):
    work = repo.work
    ignore(work, "config/")
    write(work, "config/a.json", "a\n")
    write(work, "config/private.json", "p\n")
    write(work, ".worktreeinclude", "config/*.json\n!config/private.json\n")
    toml(work, "setup = \"sh -c 'echo ran >> ../setup-runs-$NERVE_TASK_ID'\"\n")
    assert gw("spawn t1 --no-fetch --wait", work).code == 0
    wt = wt_of(work, "t1")
    assert (wt / "config" / "a.json").is_file() and not (wt / "config" / "private.json").exists()
    runs = wt.parent / "setup-runs-t1"
    assert runs.read_text() == "ran\n"
    assert gw("cancel t1", work).code == 0 and gw("retry t1", work).code == 0
    assert runs.read_text() == "ran\n"  # the worktree was kept: no second setup
    assert gw("cancel t1 --cleanup --force", work).code == 0 and gw("retry t1", work).code == 0
    deadline = time.monotonic() + 20
    while runs.read_text() != "ran\nran\n" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert runs.read_text() == "ran\nran\n"  # a worktree made anew is set up again
    assert (wt / "config" / "a.json").is_file()


def test_two_spawns_at_once_never_both_pass_max_live(repo, gw, tmp_path):
    """A spawn held in the middle of its `git worktree add` (its bus row not written yet) and a second spawn with
    `max_live = 1`: the second waits for the first's worktree to exist, then refuses; one worktree, never two."""
    import shlex
    import subprocess

    work = repo.work
    toml(work, "max_live = 1\n")
    held, release = tmp_path / "held", tmp_path / "release"
    write(work, ".gitattributes", "*.py filter=hold\n")
    git(work, "add", ".gitattributes")
    git(work, "commit", "-q", "-m", "attributes")
    script = f"touch {shlex.quote(str(held))}; while [ ! -e {shlex.quote(str(release))} ]; do sleep 0.05; done; cat"
    git(work, "config", "filter.hold.smudge", f"sh -c {shlex.quote(script)}")
    first = subprocess.Popen(["git", "worker", "spawn", "t1", "--no-fetch"], cwd=work, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ))
    try:
        wait_until(held.exists, 60, what="the first spawn held in its checkout")
        second = subprocess.Popen(["git", "worker", "spawn", "t2", "--no-fetch"], cwd=work, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ))
        time.sleep(1.0)  # deliberately: time for the second spawn to count (before the fix it passed the cap here)
    finally:
        release.touch()
    assert first.wait(60) == 0, first.stderr.read()
    code = second.wait(60)
    err = second.stderr.read()
    assert code == 2 and "max_live = 1" in err, (code, err)
    assert wk.row(work, "t2") is None and not wt_of(work, "t2").exists()
    assert wk.row(work, "t1") is not None and wt_of(work, "t1").is_dir()
