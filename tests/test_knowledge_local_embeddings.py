"""Local embeddings (provider = "local"): WordLlama's model from inside its wheel, no network, no key."""

from __future__ import annotations

import socket

import pytest

from fixtures.repos import knowledge as kfix
from git_nerve.knowledge import query as kquery
from git_nerve.knowledge import sync as ksync
from git_nerve.paths import discover

pytest.importorskip("wordllama", reason="the git-nerve[embeddings] extra (wordllama) is not installed")


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("local embeddings tried to reach the network")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)


def test_local_embeddings_sync_and_fuse_without_network(tmp_path, no_network):
    work = kfix.project(tmp_path).work
    (work / "nerve.toml").write_text('[knowledge.embeddings]\nprovider = "local"\n')
    report = ksync.sync(discover(work))
    assert report.embeddings["error"] is None and report.embeddings["embedded"] > 0 and report.embeddings["missing"] == 0
    assert report.embeddings["endpoint"] == "local"
    fused = kquery.search(discover(work), "combine two ordered sequences into one", 3)
    assert fused.ranking == kquery.FUSION and fused.warnings == []
    assert ("src/util/lists.py", "merge_sorted_lists") in [(h.path, h.title) for h in fused.hits]
    alone = kquery.search(discover(work), "earth distance between coordinates", 3, mode="embeddings")
    assert alone.ranking == "embeddings" and alone.hits and alone.hits[0].path == "src/geo/distance.go"
    again = ksync.sync(discover(work))
    assert again.embeddings["embedded"] == 0  # every chunk text is embedded once


def test_a_local_provider_takes_no_endpoint(tmp_path, gn):
    work = kfix.project(tmp_path).work
    (work / "nerve.toml").write_text('[knowledge.embeddings]\nprovider = "local"\nbase_url = "http://x"\n')
    res = gn("knowledge sync", work)
    assert res.code == 2 and 'provider = "local" takes only batch_size' in res.err
