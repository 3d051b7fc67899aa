"""One content-addressed knowledge store per repository, a view per worktree (issue 26).

Chunks are stored once per (path, blob) whatever the number of worktrees holding that content; each
worktree's searches see only its own checkout; content no worktree holds any more is reclaimed.
"""

from __future__ import annotations

import os
import sqlite3

import pytest

from fixtures.repos import knowledge as kfix
from fixtures.repos import sdists
from fixtures.repos.build import commit_file
from git_nerve.knowledge import query as kquery
from git_nerve.knowledge import sync as ksync
from git_nerve.paths import discover
from tests.conftest import git


def store_of(work):
    return work / ".git" / "nerve" / "knowledge.db"


def rows(work, sql):
    conn = sqlite3.connect(store_of(work))
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def store_size(work) -> int:
    conn = sqlite3.connect(store_of(work))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return sum(os.path.getsize(p) for p in (store_of(work), store_of(work).with_name("knowledge.db-wal")) if p.exists())


def synced_click(tmp_path):
    """A repository of click 8.1.8's sdist (a real codebase), its knowledge synced; its main checkout."""
    try:
        work = sdists.sdist_repo(tmp_path, "click", "8.1.8").work
    except sdists.DownloadError as exc:
        pytest.fail(str(exc))
    ksync.sync(discover(work))
    return work


def paths_found(work, text, n=5):
    return [h.path for h in kquery.search(discover(work), text, n).hits]


def test_a_second_worktree_stores_nothing_twice_and_its_first_sync_chunks_only_what_differs(tmp_path):
    shop = kfix.project(tmp_path).work
    first = ksync.sync(discover(shop))
    docs, chunks = rows(shop, "SELECT (SELECT count(*) FROM docs), (SELECT count(*) FROM chunks)")[0]
    other = tmp_path / "topic"
    git(shop, "worktree", "add", "-q", "-b", "topic", str(other))
    commit_file(other, "src/otter.py", "def otter_payment_due():\n    return 'invoice'\n")
    second = ksync.sync(discover(other))
    assert second.added == first.added + 1 and second.files == first.files + 1
    assert second.chunks_written == 1  # the new file alone is chunked; the rest was in the store
    assert rows(shop, "SELECT (SELECT count(*) FROM docs), (SELECT count(*) FROM chunks)")[0] == (docs + 1, chunks + 1)
    assert not (shop / ".git" / "worktrees" / "topic" / "nerve" / "knowledge.db").exists()


def test_results_are_branch_aware(tmp_path):
    shop = kfix.project(tmp_path).work
    ksync.sync(discover(shop))
    other = tmp_path / "topic"
    git(shop, "worktree", "add", "-q", "-b", "topic", str(other))
    text = (other / "src/util/lists.py").read_text().replace("def chunked(", "def zebra_partition_rows(")
    commit_file(other, "src/util/lists.py", text)
    ksync.sync(discover(other))
    ksync.sync(discover(shop))
    assert paths_found(other, "zebra_partition_rows")[:1] == ["src/util/lists.py"]
    assert paths_found(shop, "zebra_partition_rows") == []  # main's checkout does not hold it
    hit = kquery.search(discover(shop), "chunked", 1).hits[0]
    assert hit.path == "src/util/lists.py" and "def chunked(" in hit.text
    hit = kquery.search(discover(other), "lists zebra partition", 1).hits[0]
    assert "def zebra_partition_rows(" in hit.text and "def chunked(" not in hit.text


def test_deleted_content_and_removed_worktrees_are_reclaimed(tmp_path):
    shop = kfix.project(tmp_path).work
    ksync.sync(discover(shop))
    other = tmp_path / "topic"
    git(shop, "worktree", "add", "-q", "-b", "topic", str(other))
    commit_file(other, "src/otter.py", "def otter_payment_due():\n    return 'invoice'\n")
    ksync.sync(discover(other))
    assert rows(shop, "SELECT count(*) FROM docs WHERE path = 'src/otter.py'")[0][0] == 1
    git(shop, "worktree", "remove", str(other))
    git(shop, "rm", "-q", "src/util/lists.py")
    git(shop, "commit", "-qm", "drop lists")
    ksync.sync(discover(shop))
    assert rows(shop, "SELECT count(*) FROM docs WHERE path IN ('src/otter.py', 'src/util/lists.py')")[0][0] == 0
    assert rows(shop, "SELECT count(DISTINCT view) FROM views")[0][0] == 1
    fts, chunks = rows(shop, "SELECT (SELECT count(*) FROM chunks_fts), (SELECT count(*) FROM chunks)")[0]
    assert fts == chunks == rows(shop, "SELECT sum(chunks) FROM docs")[0][0]


def test_nine_checkouts_cost_at_most_half_again_the_store_of_one(tmp_path):
    work = synced_click(tmp_path)
    one = store_size(work)
    for i in range(8):
        wt = tmp_path / f"wt{i}"
        git(work, "worktree", "add", "-q", "-b", f"b{i}", str(wt))
        report = ksync.sync(discover(wt))
        assert report.chunks_written == 0 and report.files > 50
    nine = store_size(work)
    assert nine <= 1.5 * one, (one, nine)


def test_content_reclaimed_by_another_worktree_between_look_and_write_is_chunked_again(tmp_path):
    from git_nerve.knowledge.chunking import chunk_file
    from git_nerve.knowledge.store import Index, blob_id

    db = tmp_path / "knowledge.db"
    data = b"def kiwi_ledger():\n    return 1\n"
    a, b = Index(db, str(tmp_path / "a")), Index(db, str(tmp_path / "b"))
    with a.write() as conn:
        a.put_file(conn, "k.py", blob_id(data), len(data), 1, chunk_file("k.py", data.decode()))
    assert b.has_doc("k.py", blob_id(data))  # b looks: the store holds it, no chunking needed...
    with a.write() as conn:
        a.remove_file(conn, "k.py")
    assert a.sweep(lambda view: True) == 1  # ...then a's sync reclaims it
    with b.write() as conn:
        written = b.put_file(conn, "k.py", blob_id(data), len(data), 1, lambda: chunk_file("k.py", data.decode()))
    assert written == 1 and b.counts() == (1, 1)
    assert [r[2] for r in b.search('"kiwi"', 5)] == ["k.py"] and a.search('"kiwi"', 5) == []
    a.close()
    b.close()


def test_a_store_that_shrinks_is_vacuumed(tmp_path):
    work = synced_click(tmp_path)
    before = store_size(work)
    git(work, "rm", "-q", "-r", "src", "tests", "docs")
    git(work, "commit", "-qm", "keep only the top-level files")
    report = ksync.sync(discover(work))
    assert report.removed > 50
    assert store_size(work) < before / 2, (before, store_size(work))
