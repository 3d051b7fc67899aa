"""Ranking on real codebases: the implementing file of each question of tests/data/knowledge_questions.toml.

click 8.1.8, requests 2.32.3 and ujson 5.10.0 (C/C++) are downloaded once as PyPI sdists into the tool cache
(fixtures/repos/sdists.py), committed to fresh repositories and indexed with default settings. The rates
asserted are those reached when the ranking was tuned (issue 26), less one question of slack per part, so a
change that loses answers fails here. The held-out part was never tuned on.
"""

from __future__ import annotations

import pytest

from fixtures.repos import sdists
from git_nerve.knowledge import query as kquery
from git_nerve.knowledge import sync as ksync
from git_nerve.paths import discover

#: (top-1, top-3) answered when tuning stopped, out of (tuning, held-out) questions
REACHED = {"tuning": (23, 29), "held_out": (11, 13)}
SLACK = 1


@pytest.fixture
def corpora(tmp_path):
    indexed = {}
    for name, version in sdists.corpora():
        try:
            work = sdists.sdist_repo(tmp_path, name, version).work
        except sdists.DownloadError as exc:
            pytest.fail(str(exc))
        paths = discover(work)
        ksync.sync(paths)
        indexed[name] = paths
    return indexed


def test_questions_find_their_implementing_file(corpora):
    results = sdists.evaluate(lambda corpus, q: [h.path for h in kquery.search(corpora[corpus], q, 10).hits])
    assert len(results) >= 40 and sum(r["held_out"] for r in results) >= 10
    for part, held_out in (("tuning", False), ("held_out", True)):
        rows = [r for r in results if r["held_out"] == held_out]
        top1 = sum(1 for r in rows if r["rank"] == 1)
        top3 = sum(1 for r in rows if r["rank"] is not None and r["rank"] <= 3)
        want1, want3 = REACHED[part]
        missed = [(r["q"], r["file"], r["rank"]) for r in rows if not r["rank"] or r["rank"] > 3]
        assert top3 >= want3 - SLACK, (part, top3, missed)
        assert top1 >= want1 - SLACK, (part, top1)


def test_usage_questions_keep_the_docs_and_where_questions_prefer_the_source(corpora):
    click = corpora["click"]
    hits = kquery.search(click, "how do I test my application with CliRunner", 3).hits
    assert any(h.path.startswith("docs/") for h in hits), [h.path for h in hits]
    hits = kquery.search(click, "where does CliRunner invoke the command", 3).hits
    assert hits[0].path == "src/click/testing.py", [h.path for h in hits]
