"""The knowledge index on real repositories: sync, incremental updates, known answers, the commands."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from fixtures.repos import knowledge as kfix
from fixtures.repos.build import commit_file, write
from git_nerve.knowledge import query as kquery
from git_nerve.knowledge import status as kstatus
from git_nerve.knowledge import sync as ksync
from git_nerve.paths import discover
from tests.conftest import git


@pytest.fixture
def shop(tmp_path):
    """The known-layout repository, synced once."""
    work = kfix.project(tmp_path).work
    ksync.sync(discover(work))
    return work


def chunks_of(work, path=None):
    """The chunks the worktree at ``work`` sees (its view of the repository's store)."""
    conn = sqlite3.connect(work / ".git" / "nerve" / "knowledge.db")
    try:
        sql = ("SELECT d.path, c.start_line, c.end_line, c.title, c.text FROM views v JOIN docs d ON d.id = v.doc "
               "JOIN chunks c ON c.doc = d.id WHERE v.view = ?" + (" AND d.path = ?" if path else "") + " ORDER BY d.path, c.start_line")
        return conn.execute(sql, (os.path.realpath(work / ".git"), *((path,) if path else ()))).fetchall()
    finally:
        conn.close()


def indexed_paths(work):
    return sorted({row[0] for row in chunks_of(work)})


def top(work, text, n=3):
    return [(h.path, h.title) for h in kquery.search(discover(work), text, n).hits]


# -- what gets indexed --------------------------------------------------------------------------------


def test_first_sync_counts_and_keeps_out_what_must_stay_out(tmp_path):
    work = kfix.project(tmp_path).work
    report = ksync.sync(discover(work))
    assert (report.added, report.changed, report.removed) == (11, 0, 0)
    assert report.skipped == {"binary": 1, "too large": 1}
    assert report.files == 11 and report.chunks == len(chunks_of(work)) == report.chunks_written
    paths = indexed_paths(work)
    assert "src/billing/invoice.py" in paths and "docs/deploy.md" in paths and "data/notes.txt" in paths
    for outside in ("src/vendor/invoicing_lib.py", "src/static/app.min.js", "build/generated_invoice.py",
                    "data/logo.png", "data/export.csv", "knowledge.yaml", ".gitignore"):
        assert outside not in paths
    again = ksync.sync(discover(work))
    assert (again.added, again.changed, again.removed, again.unchanged, again.chunks_written) == (0, 0, 0, 11, 0)
    assert again.skipped == {"binary": 1, "too large": 1}


def test_known_answers_rank_in_the_top_three(shop):
    misses = []
    for text, path, title in kfix.KNOWN_ANSWERS:
        found = top(shop, text)
        if (path, title) not in found:
            misses.append((text, found))
    assert not misses


def test_chunks_carry_path_lines_and_text(shop):
    rows = {(r[0], r[3]): r for r in chunks_of(shop)}
    path, start, end, _title, text = rows[("src/net/retry.py", "parse_retry_after")]
    lines = (shop / path).read_text().splitlines()
    assert text == "\n".join(lines[start - 1:end])
    assert text.startswith("def parse_retry_after(") and lines[end] == ""
    path, start, end, _title, text = rows[("docs/deploy.md", "Deployment > Rolling back a release")]
    assert text.startswith("## Rolling back a release") and "backwards compatible" in text


def test_untracked_files_are_indexed_ignored_ones_are_not(shop):
    write(shop, "src/drafts/wip.py", "def zanzibar_draft():\n    return 1\n")
    write(shop, "build/more.py", "def zanzibar_built():\n    return 2\n")
    report = ksync.sync(discover(shop))
    assert report.added == 1
    assert top(shop, "zanzibar") == [("src/drafts/wip.py", "zanzibar_draft")]


# -- incremental sync ------------------------------------------------------------------------------------


def test_incremental_sync_after_add_edit_rename_delete_leaves_nothing_stale(shop):
    commit_file(shop, "src/new/quokka.py", "def quokka_counter():\n    return 'marsupial'\n", "add")
    write(shop, "src/util/lists.py", (shop / "src/util/lists.py").read_text().replace("merge_sorted_lists", "zip_ordered_wombat"))
    git(shop, "mv", "src/text/slug.py", "src/text/permalink.py")
    git(shop, "rm", "-q", "src/geo/distance.go")
    git(shop, "commit", "-qam", "edit, rename, delete")

    report = ksync.sync(discover(shop))
    assert (report.added, report.changed, report.removed) == (2, 1, 2)  # quokka + permalink; lists; slug + distance

    paths = indexed_paths(shop)
    assert "src/new/quokka.py" in paths and "src/text/permalink.py" in paths
    assert "src/text/slug.py" not in paths and "src/geo/distance.go" not in paths
    assert top(shop, "quokka marsupial")[0] == ("src/new/quokka.py", "quokka_counter")
    assert top(shop, "zip_ordered_wombat")[0] == ("src/util/lists.py", "zip_ordered_wombat")
    texts = "\n".join(row[4] for row in chunks_of(shop))
    assert "merge_sorted_lists" not in texts and "HaversineDistance" not in texts  # old text is gone
    assert kquery.search(discover(shop), "haversine", 10).hits == []
    assert top(shop, "slugify")[0] == ("src/text/permalink.py", "slugify")
    # the FTS table holds exactly the chunks: no orphan rows left by the deletes
    conn = sqlite3.connect(shop / ".git" / "nerve" / "knowledge.db")
    fts = conn.execute("SELECT count(*) FROM chunks_fts").fetchone()[0]
    assert fts == conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    conn.close()
    s = kstatus.status(discover(shop))
    assert s["stale"] == {"added": 0, "changed": 0, "removed": 0}


def test_restricted_sync_touches_only_the_files_given(shop):
    write(shop, "src/util/lists.py", "def only_this_changed():\n    return 0\n")
    write(shop, "src/text/slug.py", "def xylophone_untouched():\n    return 0\n")
    report = ksync.sync(discover(shop), files=["src/util/lists.py", "src/gone.py"])
    assert report.scope == "files" and (report.changed, report.unchanged) == (1, 0)
    assert top(shop, "only_this_changed")[0][0] == "src/util/lists.py"
    assert kquery.search(discover(shop), "xylophone", 5).hits == []
    assert kstatus.status(discover(shop))["stale"] == {"added": 0, "changed": 1, "removed": 0}


def test_a_touched_file_with_the_same_content_is_not_rechunked(shop):
    path = shop / "docs" / "faq.md"
    path.write_text(path.read_text())  # new mtime, same bytes
    report = ksync.sync(discover(shop))
    assert (report.changed, report.chunks_written, report.unchanged) == (0, 0, 11)


def test_files_that_turn_binary_or_too_large_leave_the_index(shop):
    (shop / "data" / "notes.txt").write_bytes(b"now\0binary")
    write(shop, "docs/faq.md", "# FAQ\n\n" + "word " * 20000)
    report = ksync.sync(discover(shop))
    assert report.removed == 2 and report.skipped == {"binary": 2, "too large": 2}
    assert "data/notes.txt" not in indexed_paths(shop) and "docs/faq.md" not in indexed_paths(shop)


def test_changing_include_and_exclude_reindexes(shop):
    commit_file(shop, "knowledge.yaml", 'include: ["src/**"]\nexclude: ["src/auth/**"]\n')
    report = ksync.sync(discover(shop), files=["knowledge.yaml"])  # what the trigger passes
    assert report.scope == "all"
    paths = indexed_paths(shop)
    assert all(p.startswith("src/") for p in paths) and "src/auth/tokens.ts" not in paths
    assert "src/vendor/invoicing_lib.py" in paths  # no longer excluded
    assert report.removed == 6  # README, 3 docs, notes, tokens.ts


def test_full_sync_rebuilds_every_chunk(shop):
    before = chunks_of(shop)
    report = ksync.sync(discover(shop), full=True)
    assert report.full and report.unchanged == 11 and report.chunks_written == len(before)
    assert chunks_of(shop) == before


def test_each_worktree_indexes_its_own_branch(shop, tmp_path):
    other = tmp_path / "shop-topic"
    git(shop, "worktree", "add", "-q", "-b", "topic", str(other))
    commit_file(other, "src/topic_only.py", "def platypus_feature():\n    return 1\n")
    ksync.sync(discover(other))
    assert top(other, "platypus")[0][0] == "src/topic_only.py"
    assert kquery.search(discover(shop), "platypus", 5).hits == []
    assert (other / ".git").is_file() and discover(other).git_dir != discover(shop).git_dir


# -- the commands ------------------------------------------------------------------------------------------


def test_sync_command_prints_counts_and_json(tmp_path, gn):
    work = kfix.project(tmp_path).work
    res = gn("knowledge sync", work / "src" / "billing")  # from a subdirectory
    assert res.code == 0, res
    lines = res.out.splitlines()
    assert lines[0] == "files: 11 added, 0 changed, 0 removed, 2 skipped (1 binary, 1 too large), 0 unchanged"
    assert lines[1].startswith("index: 11 files, ") and lines[1].endswith("s")
    res = gn("knowledge sync --json", work)
    data = json.loads(res.out)
    assert (data["added"], data["unchanged"], data["skipped"], data["files"]) == (0, 11, 2, 11)


def test_query_command_output(shop, gn):
    res = gn("knowledge query invoice sales tax --limit 2", shop / "docs")
    assert res.code == 0, res
    lines = res.out.splitlines()
    assert lines[0].startswith("src/billing/invoice.py:6-13  ")  # the function, its imports a chunk of their own
    float(lines[0].split()[-1])
    assert lines[1].startswith("    ") and "invoice" in lines[1].lower()
    assert lines[-1] == "(ranked by full text (SQLite FTS5, BM25))"
    assert len([ln for ln in lines if not ln.startswith((" ", "("))]) == 2
    data = json.loads(gn("knowledge query --json invoice", shop).out)
    assert data["ranking"] == "full-text" and data["warnings"] == []
    first = data["results"][0]
    assert set(first) == {"repo", "path", "start_line", "end_line", "score", "title", "snippet", "text"}
    assert first["repo"] == str(shop)


def test_hostile_query_text_does_not_crash(shop, gn):
    res = gn(['knowledge', 'query', 'foo"bar OR ('], shop)
    assert res.code == 0 and res.out.splitlines()[0] == "no results", res
    res = gn(["knowledge", "query", 'invoice" OR "x'], shop)
    assert res.code == 0 and "src/billing/invoice.py" in res.out
    res = gn(["knowledge", "query", "()*"], shop)
    assert res.code == 2 and res.err.strip() == "error: the query has no words to search for"


def test_query_usage_errors(shop, tmp_path, gn):
    res = gn("knowledge query -g --repo . invoice", shop)
    assert res.code == 2 and res.err.strip() == "error: --repo and -g cannot be used together"
    fresh = kfix.project(tmp_path / "fresh").work
    res = gn("knowledge query invoice", fresh)
    assert res.code == 2 and "run `git nerve knowledge sync`" in res.err
    res = gn(["knowledge", "query", "--repo", str(tmp_path / "nowhere"), "x"], shop)
    assert res.code == 2 and "no such directory" in res.err


def test_malformed_knowledge_yaml_is_one_error_line_naming_the_line(shop, gn):
    write(shop, "knowledge.yaml", 'include:\n  - "src/**"\nexclude: "docs/**"\n')
    res = gn("knowledge sync", shop)
    assert res.code == 2
    assert res.err.splitlines() == ['error: knowledge.yaml line 3: exclude must be a list of glob patterns (e.g. exclude: ["src/**/*.py"])']
    write(shop, "knowledge.yaml", "include: [src/**\n")
    res = gn("knowledge status", shop)
    assert res.code == 2 and len(res.err.splitlines()) == 1 and res.err.startswith("error: knowledge.yaml line 2: invalid YAML")


def test_status_command(shop, gn):
    out = gn("knowledge status", shop).out
    assert "indexed:     11 files, " in out and "2 skipped (1 binary, 1 too large)" in out
    assert "stale:       no; the index matches the files" in out
    commit_file(shop, "src/extra.py", "def extra():\n    return 1\n")
    write(shop, "README.md", "# Changed\n")
    res = gn("knowledge status", shop)
    assert "stale:       1 added, 1 changed, 0 removed since the last sync" in res.out
    assert "(HEAD is 1 commit ahead)" in res.out
    data = json.loads(gn("knowledge status --json", shop).out)
    assert data["stale"] == {"added": 1, "changed": 1, "removed": 0} and data["head"]["commits_since"] == 1
    assert data["background"]["trigger"] is True


def test_status_before_any_sync(tmp_path, gn):
    work = kfix.project(tmp_path, knowledge_yaml=None).work
    res = gn("knowledge status", work)
    assert res.code == 0
    assert "config:      none (no knowledge.yaml" in res.out and "indexed:     nothing yet" in res.out


def test_without_knowledge_yaml_sync_indexes_every_tracked_text_file(tmp_path, gn):
    work = kfix.project(tmp_path, knowledge_yaml=None).work
    res = gn("knowledge sync", work)
    assert res.out.splitlines()[0].startswith("config: defaults (no knowledge.yaml")
    paths = indexed_paths(work)
    assert ".gitignore" in paths and "src/vendor/invoicing_lib.py" in paths and "build/generated_invoice.py" not in paths


# -- across repositories ---------------------------------------------------------------------------------


def test_query_other_repo_and_everywhere(tmp_path, gn):
    first = kfix.project(tmp_path / "one", name="shop").work
    second = tmp_path / "two" / "notes"
    second.mkdir(parents=True)
    git(second, "init", "-q", "-b", "main")
    commit_file(second, "ideas.md", "# Ideas\n\n## Invoice reminders\n\nEmail customers whose invoice total is overdue.\n")
    assert gn("knowledge sync", first).code == 0
    assert gn("knowledge sync", second).code == 0

    here = gn("knowledge query invoice total", first).out
    assert "ideas.md" not in here
    there = gn(["knowledge", "query", "--repo", str(second / "."), "invoice", "total"], first).out
    assert there.splitlines()[0].startswith("ideas.md:1-5  ")

    res = gn("knowledge query -g invoice total --limit 20", tmp_path)  # works outside any repository
    assert res.code == 0, res
    lines = [ln for ln in res.out.splitlines() if not ln.startswith((" ", "("))]
    assert f"{second}/ideas.md:1-5" in {ln.split()[0] for ln in lines}
    assert any(ln.startswith(f"{first}/src/billing/invoice.py:") for ln in lines)
    data = json.loads(gn("knowledge query -g --json invoice", tmp_path).out)
    assert sorted(data["repos"]) == sorted([str(first), str(second)])
    assert {r["repo"] for r in data["results"]} == {str(first), str(second)}


def test_everywhere_skips_deleted_repositories(tmp_path, gn):
    import shutil

    first = kfix.project(tmp_path / "one").work
    second = kfix.project(tmp_path / "two").work
    gn("knowledge sync", first)
    gn("knowledge sync", second)
    shutil.rmtree(second)
    data = json.loads(gn("knowledge query -g --json invoice", tmp_path).out)
    assert data["repos"] == [str(first)]


def test_everywhere_with_nothing_indexed(tmp_path, gn):
    res = gn("knowledge query -g invoice", tmp_path)
    assert res.code == 2 and "no repository has been indexed yet" in res.err


def test_an_index_of_another_format_is_rebuilt_and_a_corrupt_one_is_reported(shop, gn):
    db = shop / ".git" / "nerve" / "knowledge.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    res = gn("knowledge sync", shop)
    assert res.code == 0 and res.out.splitlines()[0] == "the index was built by another version of git-nerve: rebuilt from scratch"
    assert "files: 11 added" in res.out and top(shop, "slugify")[0][1] == "slugify"
    for suffix in ("-wal", "-shm"):
        (db.parent / (db.name + suffix)).unlink(missing_ok=True)
    db.write_bytes(b"this is not a database" * 100)
    res = gn("knowledge query slugify", shop)
    assert res.code == 5 and res.err == f"error: cannot open {db} (file is not a database); it is only a cache: delete it and sync again\n"


def test_a_sync_spread_over_processes_indexes_what_one_process_does(tmp_path, monkeypatch):
    one = kfix.project(tmp_path / "one").work
    ksync.sync(discover(one))
    from git_nerve.knowledge import indexing

    monkeypatch.setattr(indexing, "POOL_MIN", 1)  # chunk in a pool of processes however few files there are
    monkeypatch.setattr(indexing, "POOL_BATCH_MIN", 1)
    started = []
    real = indexing._pool
    monkeypatch.setattr(indexing, "_pool", lambda: started.append(real()) or started[-1])
    many = kfix.project(tmp_path / "many").work
    report = ksync.sync(discover(many))
    if (os.cpu_count() or 1) > 1:
        assert started and started[0] is not None  # the pool really ran
    assert report.files == 11 and chunks_of(many) == chunks_of(one)
    assert top(many, "add up the line items of an invoice with sales tax") == top(one, "add up the line items of an invoice with sales tax")
