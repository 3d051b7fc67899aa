"""The knowledge index's pure parts: chunking, identifier splitting, safe FTS5 queries, ranking, configuration."""

from __future__ import annotations

import sqlite3
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from git_nerve.errors import UsageError
from git_nerve.knowledge import chunking, config, ranking, terms
from git_nerve.knowledge.chunking import chunk_file

# -- chunking -----------------------------------------------------------------------------------


def spans(chunks):
    return [(c.start_line, c.end_line, c.title) for c in chunks]


def test_markdown_splits_at_headings_with_heading_paths():
    text = (
        "---\ntitle: front\n---\nIntro line.\n\n"  # 1-5
        "# Guide\n\n"  # 6-7: a heading with nothing under it joins the next section
        "## Install\n\nRun it.\n\n"  # 8-11
        "```sh\n# not a heading\n```\n\n"  # 12-15, still Install
        "Setext Title\n------------\n\nbody\n"  # 16-19
        "# Other\ntext\n"  # 20-21
    )
    assert spans(chunk_file("docs/guide.md", text)) == [
        (1, 4, ""),
        (6, 14, "Guide > Install"),
        (16, 19, "Guide > Setext Title"),
        (20, 21, "Other"),
    ]


def test_python_is_cut_along_functions_classes_and_methods_with_their_names_and_docstrings():
    text = (
        '"""Module doc.\n\nText at column 0 inside the docstring.\n"""\n\nimport os\nimport sys\nimport re\n\n\n'  # 1-10
        "# helper comment\n@decorator\ndef alpha(x):\n    return {\n        'a': 1,\n\n'not a boundary': 2,\n    }\n\n\n"  # 11-20
        "class Beta:\n    def m(self):\n        \"\"\"Em.\"\"\"\n\n    def n(self):\n        pass\n"  # 21-26
        "X = 1\n"  # 27
    )
    chunks = chunk_file("pkg/mod.py", text)
    assert spans(chunks) == [(1, 8, ""), (11, 18, "alpha"), (21, 21, "Beta"), (22, 23, "Beta.m"), (25, 26, "Beta.n"), (27, 27, "")]
    assert [(c.symbol, c.doc) for c in chunks[2:4]] == [("Beta", ""), ("m", "Em.")]
    assert chunks[1].doc == "# helper comment"


def test_without_a_grammar_code_splits_at_top_level_definitions_keeping_decorators_and_comments():
    lines = chunking.split_lines(
        '"""Module doc.\n\nText at column 0 inside the docstring.\n"""\n\nimport os\nimport sys\nimport re\n\n\n'  # 1-10
        "# helper comment\n@decorator\ndef alpha(x):\n    return {\n        'a': 1,\n\n'not a boundary': 2,\n    }\n\n\n"  # 11-20
        "class Beta:\n    def m(self):\n        pass\n\n    def n(self):\n        pass\n"  # 21-26
        "X = 1\n"  # 27: a small tail joins the chunk before it
    )
    blocks = chunking.code_blocks(lines, hash_comments=True, triple_quotes=True)
    assert [(a + 1, b, t) for a, b, t in blocks] == [(1, 5, ""), (6, 10, ""), (11, 20, "alpha"), (21, 27, "Beta")]
    assert [c.title for c in chunk_file("lib/mod.rb", "class Gamma\n  def m\n    1\n  end\nend\n")] == ["Gamma"]


def test_brace_languages_split_at_top_level_blocks():
    go = (
        "package main\n\nimport (\n\t\"fmt\"\n)\n\n"  # 1-6
        "// Add adds.\nfunc Add(a, b int) int {\n\treturn a + b\n}\n"  # 7-10
        "func (s *Server) Start() error {\n\tif x {\n\t\treturn nil\n\t}\n\n\treturn nil\n}\n"  # 11-17
    )
    assert spans(chunk_file("main.go", go)) == [(1, 5, ""), (7, 10, "Add"), (11, 17, "Start")]
    ts = (
        "import { x } from './x';\nimport { y } from './y';\nimport { z } from './z';\n\n"
        "export const refreshToken = async (t: string): Promise<string> => {\n  return t;\n};\n\n"
        "export class Store {\n  get(): void {}\n}\n"
    )
    assert [c.title for c in chunk_file("a.ts", ts)] == ["", "refreshToken", "Store", "Store.get"]


def test_long_definitions_and_plain_text_become_overlapping_windows():
    body = "\n".join(f"    x{i} = {i}" for i in range(300))
    chunks = chunk_file("big.py", f"def big():\n{body}\n")
    assert len(chunks) > 1 and all(c.title == "big" for c in chunks)
    assert chunks[0].start_line == 1 and chunks[-1].end_line == 301
    for a, b in pairwise(chunks):
        assert b.start_line <= a.end_line  # overlap: nothing falls between two windows
    text = "\n".join(f"line {i}" for i in range(1, 101)) + "\n"
    windows = chunk_file("notes.txt", text)
    assert [(c.start_line, c.end_line) for c in windows][:2] == [(1, 40), (33, 72)]
    assert windows[-1].end_line == 100
    assert chunk_file("short.txt", "one\ntwo\n") == [chunking.Chunk(1, 2, "", "one\ntwo")]


def test_giant_lines_never_make_giant_chunks():
    text = ("x" * 50_000 + "\n") * 3
    chunks = chunk_file("bundle.js", text)
    assert chunks and all(len(c.text) <= chunking.MAX_CHARS for c in chunks)
    assert [c.start_line for c in chunks] == [1, 2, 3]


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab #{}()\n\n\t-=`'\"_:")), max_size=400),
       st.sampled_from(["a.md", "a.py", "a.go", "a.txt", "a.rb"]))
def test_every_nonblank_line_lands_in_a_chunk(text, name):
    lines = chunking.split_lines(text)
    chunks = chunk_file(name, text)
    covered = {n for c in chunks for n in range(c.start_line, c.end_line + 1)}
    assert {i + 1 for i, ln in enumerate(lines) if ln.strip()} <= covered
    for c in chunks:
        assert 1 <= c.start_line <= c.end_line <= len(lines)
        assert c.text == "\n".join(lines[c.start_line - 1:c.end_line])[:chunking.MAX_CHARS]


# -- terms ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "word, parts",
    [
        ("parseHTTPResponse", ["parse", "HTTP", "Response"]),
        ("snake_case_name", ["snake", "case", "name"]),
        ("src/net/retry.py", ["src", "net", "retry", "py"]),
        ("utf8Decoder2", ["utf", "8", "Decoder", "2"]),
        ("plain", ["plain"]),
    ],
)
def test_split_identifier(word, parts):
    assert terms.split_identifier(word) == parts


def test_index_text_appends_camel_case_parts_only():
    assert terms.index_text("call parseConfigFile now") == "call parseConfigFile now\nparse Config File"
    assert terms.index_text("snake_case only") == "snake_case only"


def test_query_terms_drop_stop_words_unless_nothing_else_is_left():
    assert terms.query_terms("how does the parseRetryAfter work") == ["parseretryafter", "parse", "retry", "after", "work"]
    assert terms.query_terms("the") == ["the"]
    assert terms.fts_query("!!! ???") is None


def _fts():
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize = 'porter unicode61 remove_diacritics 2')")
    conn.execute("INSERT INTO t(body) VALUES (?)", (terms.index_text('foo bar OR NEAR parseConfig "quoted"'),))
    return conn


@pytest.mark.parametrize("text", ['foo"bar OR (', "NEAR(a b)", "a AND", "*foo^ -bar: \"baz", "col:foo", "NOT", "'; DROP TABLE t; --"])
def test_hostile_queries_are_plain_words_to_fts5(text):
    match = terms.fts_query(text)
    assert match is not None
    _fts().execute("SELECT rowid FROM t WHERE t MATCH ?", (match,)).fetchall()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_no_text_breaks_an_fts5_query(text):
    match = terms.fts_query(text)
    if match is not None:
        _fts().execute("SELECT rowid FROM t WHERE t MATCH ?", (match,)).fetchall()


def test_camel_case_query_finds_snake_case_code_and_back():
    conn = _fts()
    rows = lambda q: conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (terms.fts_query(q),)).fetchall()
    assert rows("parse_config") and rows("parseConfig") and rows("config")


def test_snippet_picks_the_line_with_most_query_terms():
    text = "def helper():\n    pass\n# retries after the header says so\nvalue = parse_retry_after(h)\n"
    assert terms.snippet(text, terms.query_terms("parse retry after")) == "value = parse_retry_after(h)"
    assert terms.snippet("\n\n  first  \nsecond", ["zzz"]) == "first"
    assert terms.snippet("x" * 300, ["x"], width=20).endswith("…")


# -- ranking --------------------------------------------------------------------------------------------


def test_reciprocal_rank_fusion():
    fused = ranking.rrf([["a", "b", "c"], ["c", "a", "d"]], k=60)
    assert [k for k, _ in fused] == ["a", "c", "b", "d"]
    assert fused[0][1] == pytest.approx(1 / 61 + 1 / 62)
    assert ranking.rrf([]) == []


def test_vectors_are_compact_unit_float32_blobs():
    blob = ranking.pack([3.0, 4.0])
    assert len(blob) == 8
    assert list(ranking.unpack(blob)) == pytest.approx([0.6, 0.8])
    assert list(ranking.unpack(ranking.pack([0.0, 0.0]))) == [0.0, 0.0]


def test_nearest_ranks_by_cosine_and_ignores_other_dimensions():
    candidates = [("east", ranking.pack([1, 0])), ("north", ranking.pack([0, 1])), ("ne", ranking.pack([1, 1])),
                  ("3d", ranking.pack([1, 0, 0]))]
    best = ranking.nearest([2, 0.1], candidates, 2)
    assert [k for k, _ in best] == ["east", "ne"]
    assert best[0][1] == pytest.approx(0.9988, abs=1e-3)


def test_nearest_across_blocks_matches_a_full_sort_and_keeps_ties_in_order(monkeypatch):
    import random

    monkeypatch.setattr(ranking, "BLOCK", 3)  # many blocks, so the running best list is exercised
    rng = random.Random(5)
    vectors = {f"c{i}": [rng.gauss(0, 1) for _ in range(8)] for i in range(40)}
    vectors["twin-a"] = vectors["twin-b"] = [1, 2, 3, 4, 5, 6, 7, 8]
    candidates = [(k, ranking.pack(v)) for k, v in vectors.items()] + [("short", ranking.pack([1, 2]))]
    query = [1, 2, 3, 4, 5, 6, 7, 8.5]
    expected = sorted(
        ((k, sum(a * b for a, b in zip(ranking.unpack(ranking.pack(query)), ranking.unpack(blob)))) for k, blob in candidates[:-1]),
        key=lambda kv: -kv[1],
    )
    got = ranking.nearest(query, candidates, 5)
    assert [k for k, _ in got] == [k for k, _ in expected[:5]]
    assert [k for k, _ in got[:2]] == ["twin-a", "twin-b"]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected[:5]], abs=1e-5)
    assert ranking.nearest(query, [("short", ranking.pack([1, 2]))], 5) == []


# -- knowledge.yaml ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, line, fragment",
    [
        ("include: [a\n", 2, "invalid YAML"),
        ("include:\n  - src/**\nexclude: docs\n", 3, "exclude must be a list"),
        ("include:\n  - a\nincluded:\n  - b\n", 3, "unknown key 'included'"),
        ("include:\n  - a\ninclude:\n  - b\n", 3, "given twice (first on line 1)"),
        ("- a\n- b\n", 1, "expected a mapping"),
        ("include:\n  - a\n  - [b]\n", 3, "non-empty glob pattern"),
        ("max_file_size: big\n", 1, "max_file_size must be a size"),
        ("include:\n  - a\n\tx\n", 3, "invalid YAML"),
    ],
)
def test_malformed_knowledge_yaml_names_the_line(text, line, fragment):
    with pytest.raises(UsageError) as err:
        config.parse(text)
    assert err.value.message.startswith(f"knowledge.yaml line {line}: ")
    assert fragment in err.value.message


def test_knowledge_yaml_never_constructs_objects(tmp_path):
    target = tmp_path / "pwned"
    with pytest.raises(UsageError) as err:
        config.parse(f'include:\n  - !!python/object/apply:os.mkdir ["{target}"]\n')
    assert err.value.message.startswith("knowledge.yaml line 2: ")
    assert not target.exists()


def test_include_exclude_follow_gitignore_rules():
    cfg = config.parse('include: ["src/**/*.py", "*.md"]\nexclude: ["src/vendor/**", "*_test.py"]\nmax_file_size: 2MB\n')
    assert cfg.included("src/a/b.py") and cfg.included("README.md") and cfg.included("docs/deep/x.md")
    assert not cfg.included("src/vendor/x.py") and not cfg.included("src/a/b_test.py") and not cfg.included("lib/x.py")
    assert cfg.max_file_size == 2 * 1024 * 1024
    assert config.parse("").included("anything/at/all.txt")
    assert config.parse("").digest != cfg.digest


@pytest.mark.parametrize("value, size", [("1048576", 1048576), ("512k", 524288), ("1MB", 1048576), ("2 MiB", 2097152), ("x", None)])
def test_parse_size(value, size):
    assert config.parse_size(value) == size


# -- nerve.toml [knowledge.embeddings] -------------------------------------------------------------------


def test_embeddings_config(tmp_path):
    assert config.load_embeddings(tmp_path) is None
    (tmp_path / "nerve.toml").write_text('[extract]\nprovider = "parse"\n')
    assert config.load_embeddings(tmp_path) is None
    (tmp_path / "nerve.toml").write_text(
        '[knowledge.embeddings]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\napi_key_env = "MY_KEY"\nbatch_size = 8\n'
    )
    cfg = config.load_embeddings(tmp_path)
    assert (cfg.endpoint, cfg.model, cfg.api_key_env, cfg.batch_size) == ("http://127.0.0.1:9/v1/embeddings", "m", "MY_KEY", 8)
    assert config.EmbeddingsConfig("http://h:1", "m").endpoint == "http://h:1/v1/embeddings"
    assert config.EmbeddingsConfig("http://h/api/embeddings", "m").endpoint == "http://h/api/embeddings"
    assert config.EmbeddingsConfig("http://user:s3cret@h:1/v1", "m").as_dict()["endpoint"] == "http://h:1/v1/embeddings"


@pytest.mark.parametrize(
    "body, fragment",
    [
        ('base_url = "ftp://x"\nmodel = "m"', "base_url must be an http(s) URL"),
        ('base_url = "http://x/v1"', "model must be"),
        ('base_url = "http://x/v1"\nmodel = "m"\napi_key_env = "sk-secret-123"', "NAME of an environment variable"),
        ('base_url = "http://x/v1"\nmodel = "m"\napi_key = "sk-secret-123"', "unknown key api_key"),
        ('base_url = "http://x/v1"\nmodel = "m"\nbatch_size = 0', "batch_size"),
    ],
)
def test_bad_embeddings_config_is_a_usage_error_that_never_echoes_a_key(tmp_path, body, fragment):
    (tmp_path / "nerve.toml").write_text(f"[knowledge.embeddings]\n{body}\n")
    with pytest.raises(UsageError) as err:
        config.load_embeddings(tmp_path)
    assert fragment in err.value.message
    assert "sk-secret-123" not in err.value.message
