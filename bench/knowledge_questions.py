#!/usr/bin/env python3
"""How often the knowledge index puts the implementing file first / in the top 3 (issue 26).

Indexes the real codebases of ``tests/data/knowledge_questions.toml`` (PyPI sdists at pinned versions,
downloaded once into the tool cache by fixtures/repos/sdists.py), asks every question under each ranking
(full text alone, embeddings alone, fused) and prints top-1 / top-3 for the tuning part and the held-out
part side by side. ``-v`` lists the questions whose file missed the top 3.

    .venv/bin/python bench/knowledge_questions.py [-v]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixtures.repos import build, sdists  # noqa: E402


LOCAL_EMBEDDINGS = '[knowledge.embeddings]\nprovider = "local"\n'


def index_corpora(tmp: Path) -> dict:
    from git_nerve.knowledge import sync as ksync
    from git_nerve.paths import discover

    out = {}
    for name, version in sdists.corpora():
        work = sdists.sdist_repo(tmp, name, version).work
        if _has_wordllama() and os.environ.get("NERVE_BENCH_EMBEDDINGS", "1") != "0":
            (work / "nerve.toml").write_text(LOCAL_EMBEDDINGS)  # untracked: the question files are the sdist's
        paths = discover(work)
        report = ksync.sync(paths)
        print(f"{name} {version}: {report.files} files, {report.chunks} chunks, synced in {report.seconds:.2f}s")
        out[name] = paths
    return out


def _has_wordllama() -> bool:
    import importlib.util

    return importlib.util.find_spec("wordllama") is not None


def run(indexed: dict, mode: str) -> list[dict]:
    from git_nerve.knowledge import query as kquery

    return sdists.evaluate(lambda corpus, q: [h.path for h in kquery.search(indexed[corpus], q, 20, mode=mode).hits])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-v", action="store_true", help="list the misses")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="nerve-bench-questions-"))
    env = build.hermetic_env(tmp / "home")
    for key in list(os.environ):
        if key.startswith("GIT_") and key != "GIT_NERVE_TOOL_CACHE":
            del os.environ[key]
    os.environ.update(env)
    indexed = index_corpora(tmp)
    from git_nerve.knowledge import query as kquery

    print(f"\n{'ranking':<12} {'tuning top-1':>12} {'top-3':>6}   {'held-out top-1':>14} {'top-3':>6}   {'ms/query':>8}")
    for mode in kquery.MODES:
        t0 = time.perf_counter()
        try:
            results = run(indexed, mode)
        except Exception as exc:  # a ranking that is not available here (no embeddings installed)
            print(f"{mode:<12} unavailable: {exc}")
            continue
        if mode == "embeddings" and not any(r["rank"] for r in results):
            print(f"{mode:<12} unavailable")
            continue
        per = (time.perf_counter() - t0) / len(results) * 1000
        t1, t3, n = sdists.rates(results, False)
        h1, h3, m = sdists.rates(results, True)
        print(f"{mode:<12} {t1:>11.0%} {t3:>6.0%}   {h1:>13.0%} {h3:>6.0%}   {per:>8.1f}   (n={n}+{m})")
        if args.v:
            for r in results:  # the tuning part only: the held-out part is never looked at question by question
                if not r["held_out"] and (r["rank"] is None or r["rank"] > 1):
                    print(f"      rank {r['rank']}: [{r['corpus']}] {r['q']} -> {r['file']}")
    print(f"\n(temporary files in {tmp})")


if __name__ == "__main__":
    main()
