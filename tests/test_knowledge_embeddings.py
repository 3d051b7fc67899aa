"""Embeddings against a real OpenAI-compatible HTTP server on 127.0.0.1 (deterministic vectors), and its failures."""

from __future__ import annotations

import json
import re
import socket
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import cli
from fixtures.repos import knowledge as kfix
from fixtures.repos.build import commit_file, write
from tests.conftest import git

KEY_VAR = "NERVE_TEST_EMBED_KEY"
KEY = "sk-test-SECRET-4242"
DIM = 256
#: Words the fake model treats as one concept: a query in these words shares no word with the code.
CONCEPTS = {w: "money" for w in ("payable", "pecuniary", "invoice", "amount", "owes", "cents", "total", "tax", "due", "subtotal")}


def fake_vector(text: str) -> list[float]:
    vec = [0.0] * DIM
    for word in re.findall(r"[a-z]+", text.lower()):
        vec[zlib.crc32(CONCEPTS.get(word, word).encode()) % DIM] += 1.0
    return vec


class Server:
    """An /v1/embeddings endpoint; ``mode`` "ok" or "error" (HTTP 500)."""

    def __init__(self):
        self.mode = "ok"
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "model": body["model"],
                                       "inputs": list(body["input"])})
                if outer.mode == "error":
                    payload, code = {"error": {"message": "model overloaded"}}, 500
                else:
                    data = [{"object": "embedding", "index": i, "embedding": fake_vector(t)} for i, t in enumerate(body["input"])]
                    payload, code = {"object": "list", "data": list(reversed(data)), "model": body["model"]}, 200
                raw = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def texts(self) -> list[str]:
        return [t for r in self.requests for t in r["inputs"]]

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


def configure(work, port, *, key_var=KEY_VAR):
    write(work, "nerve.toml", f'[knowledge.embeddings]\nbase_url = "http://127.0.0.1:{port}/v1"\nmodel = "fake-embed"\n'
                              f'api_key_env = "{key_var}"\nbatch_size = 7\ntimeout = 5\n')
    assert cli(["trust"], work, prog="nerve").code == 0  # the person's own endpoint (issue 35)


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def shop(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_VAR, KEY)
    return kfix.project(tmp_path).work


def distinct_chunks(work) -> int:
    import sqlite3

    conn = sqlite3.connect(work / ".git" / "nerve" / "knowledge.db")
    try:
        return conn.execute("SELECT count(DISTINCT hash) FROM chunks").fetchone()[0]
    finally:
        conn.close()


def test_sync_embeds_each_text_once_and_queries_fuse_both_rankings(shop, server, gn):
    # full text alone cannot answer a query that shares no word with the code
    gn("knowledge sync", shop)
    assert gn("knowledge query payable pecuniary", shop).out.splitlines()[0] == "no results"

    configure(shop, server.port)
    res = gn("knowledge sync", shop)
    assert res.code == 0 and res.err == "", res
    n = distinct_chunks(shop)
    assert f"embeddings: {n} new, 0 missing (model fake-embed)" in res.out
    assert len(server.texts) == n and len(set(server.texts)) == n
    assert all(r["path"] == "/v1/embeddings" and r["auth"] == f"Bearer {KEY}" and r["model"] == "fake-embed" for r in server.requests)
    assert max(len(r["inputs"]) for r in server.requests) == 7  # batch_size

    res = gn("knowledge query payable pecuniary", shop)
    assert res.code == 0 and res.err == "", res
    assert res.out.splitlines()[0].startswith("src/billing/invoice.py:")
    assert res.out.splitlines()[-1] == "(ranked by full text + embeddings (reciprocal rank fusion))"
    data = json.loads(gn("knowledge query --json add up the invoice line items", shop).out)
    assert data["ranking"] == "fusion" and data["results"][0]["title"] == "compute_invoice_total"

    before = len(server.requests)
    res = gn("knowledge sync", shop)
    assert "embeddings: 0 new, 0 missing" in res.out
    assert len(server.requests) == before  # nothing embedded twice

    # the key reaches the Authorization header and nothing else
    for path in (shop / ".git" / "nerve").rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_the_embedding_cache_is_shared_by_worktrees(shop, server, gn, tmp_path):
    configure(shop, server.port)
    git(shop, "add", "nerve.toml")
    git(shop, "commit", "-qm", "embeddings")
    gn("knowledge sync", shop)
    first = len(server.texts)
    other = tmp_path / "topic"
    git(shop, "worktree", "add", "-q", "-b", "topic", str(other))
    commit_file(other, "src/otter.py", "def otter_payment_due():\n    return 'invoice'\n")
    res = gn("knowledge sync", other)
    assert "embeddings: 1 new, 0 missing" in res.out, res
    assert server.texts[first:] == ["def otter_payment_due():\n    return 'invoice'"]
    assert (shop / ".git" / "nerve" / "embeddings.db").is_file()
    assert not (shop / ".git" / "worktrees" / "topic" / "nerve" / "embeddings.db").exists()
    assert not (shop / ".git" / "worktrees" / "topic" / "nerve" / "knowledge.db").exists()  # one store per repository


def test_endpoint_errors_are_warnings_and_full_text_still_answers(shop, server, gn):
    configure(shop, server.port)
    server.mode = "error"
    res = gn("knowledge sync", shop)
    n = distinct_chunks(shop)
    assert res.code == 0
    assert f"embeddings: 0 new, {n} missing (model fake-embed)" in res.out
    assert res.err.startswith(f"warning: embeddings: http://127.0.0.1:{server.port}/v1/embeddings answered HTTP 500: model overloaded;")

    res = gn("knowledge query invoice", shop)  # nothing embedded yet: say so, rank by full text
    assert res.code == 0 and "no chunk has one yet" in res.err
    assert res.out.splitlines()[-1] == "(ranked by full text (SQLite FTS5, BM25))"

    server.mode = "ok"
    assert f"embeddings: {n} new" in gn("knowledge sync", shop).out
    server.mode = "error"
    res = gn("knowledge query invoice tax", shop)
    assert res.code == 0
    assert res.err.strip() == (f"warning: embeddings unavailable (http://127.0.0.1:{server.port}/v1/embeddings answered HTTP 500: "
                               "model overloaded); full-text results only")
    assert res.out.splitlines()[0].startswith("src/billing/invoice.py:")
    assert res.out.splitlines()[-1] == "(ranked by full text (SQLite FTS5, BM25))"
    data = json.loads(gn("knowledge query --json invoice", shop).out)
    assert data["ranking"] == "full-text" and data["results"] and "HTTP 500" in data["warnings"][0]


def test_a_refused_connection_or_a_missing_key_is_a_warning(shop, server, gn):
    configure(shop, server.port)
    gn("knowledge sync", shop)
    configure(shop, dead_port())
    res = gn("knowledge query invoice", shop)
    assert res.code == 0 and res.out.splitlines()[0].startswith("src/billing/invoice.py:")
    assert res.err.startswith("warning: embeddings unavailable (cannot reach http://127.0.0.1:")
    write(shop, "src/new.py", "def brand_new():\n    return 1\n")
    res = gn("knowledge sync", shop)
    assert res.code == 0 and "embeddings: 0 new, 1 missing" in res.out and "cannot reach" in res.err

    configure(shop, server.port, key_var="NERVE_UNSET_KEY_VAR")
    res = gn("knowledge query invoice", shop)
    assert res.code == 0 and "the environment variable NERVE_UNSET_KEY_VAR (api_key_env in nerve.toml) is not set" in res.err
    assert KEY not in res.out + res.err


def test_a_malformed_embeddings_table_is_a_usage_error(shop, gn):
    write(shop, "nerve.toml", '[knowledge.embeddings]\nbase_url = "http://127.0.0.1:1/v1"\nmodel = "m"\napi_key = "sk-live-123"\n')
    res = gn("knowledge sync", shop)
    assert res.code == 2 and "unknown key api_key" in res.err and "sk-live-123" not in res.err
