#!/usr/bin/env python3
"""Benchmark of the knowledge index (issue 7). Prints figures; asserts nothing.

On a repository of several thousand files, measured in one run:

1. full sync: files/s and chunks/s (the function behind `git nerve knowledge sync`);
2. incremental sync after a one-file commit (goal: under 0.3 s), three ways:
   the trigger's sync of the committed file, the whole-tree incremental
   sync, and the `git nerve knowledge sync` command (a process, start-up included);
3. query p50/p95 over the whole index (goal: p50 under 50 ms) for a set of
   queries, side by side with `git grep -n -i` for the same terms, plus the
   `git nerve knowledge query` command's p50 (a process);
4. the in-memory cosine scan that ranks by embeddings, over as many
   1024-dimension vectors as the index has chunks (no server involved);
5. the one store of the repository: its size for one checkout and for nine (goal: at most 1.5 x), and
   what a new worktree's first sync costs (it chunks only what the store lacks).

``--questions`` prints instead how often the implementing file comes first / in the top 3 on real
codebases, per ranking (full text, embeddings, fused), tuning and held-out parts apart
(bench/knowledge_questions.py; ``--source django`` indexes Django 5.1.4's sdist, cached like the tools).

The repository is generated (fixtures/repos/knowledge.py ``large``: Python,
TypeScript, Go and Markdown whose words follow a Zipf law, as identifiers
do), or with ``--source DIR`` a copy of a real tree committed to a fresh
repository (e.g. the Python standard library, which every machine running
this has: ``--source stdlib``).

Run from the repository root with the venv's interpreter:
    .venv/bin/python bench/knowledge.py [--files 4000] [--repeat 5] [--source DIR|stdlib]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import bytecode_cache, timed
from fixtures.repos import (
    build,
    sdists,  # here, before HOME is swapped below: its download cache is the user's
)
from fixtures.repos import knowledge as kfix

#: queries for --source stdlib (real code); the generated repository gets queries from its own vocabulary
STDLIB_QUERIES = [
    "parse email header", "http request retry", "json decoder error", "thread pool executor shutdown", "extract tar archive",
    "unicode normalization", "sqlite connection cursor", "compress data with zlib", "timezone offset of a datetime",
    "shuffle a list randomly", "argparse subcommand", "socket timeout", "glob pattern path", "sha256 digest", "base64 encode",
    "csv dialect sniffer", "rotating log file handler", "decimal rounding context", "subprocess pipe communicate",
    "quote a url", "dataclass field default factory", "asyncio event loop", "heap push pop", "dedent text",
]


def generated_queries(count: int = 24) -> list[str]:
    from fixtures.repos.knowledge import vocabulary

    words = vocabulary()
    rng = random.Random(5)
    queries = []
    for i in range(count):
        common, rare = rng.choice(words[:50]), rng.choice(words[50:2000])
        queries.append(f"{common} {rare}" if i % 3 else f"{rare}{rng.choice(words[:200]).title()}")
    return queries


def copy_source(source: Path, dest: Path) -> None:
    """A fresh repository holding the text files of ``source`` (caches, binaries' build dirs and site-packages left out)."""
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "site-packages", "*.so", ".git"),
                    symlinks=True)
    build.git(dest, "init", "-q", "-b", "main")
    build.git(dest, "add", "-A")
    build.git(dest, "commit", "-q", "-m", "import")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f} ms"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def timed_run(argv: list[str], cwd: Path, env: dict) -> float:
    return timed(argv, cwd, env, ok=(0, 1))  # git grep exits 1 when nothing matches


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=4000)
    ap.add_argument("--repeat", type=int, default=5, help="runs of each timed step (medians are printed)")
    ap.add_argument("--source", help="index a copy of this directory instead of a generated repository "
                    "('stdlib': Python's; 'django': Django 5.1.4's sdist)")
    ap.add_argument("--questions", action="store_true", help="the question set's top-1 / top-3 figures instead")
    ap.add_argument("--checkouts", type=int, default=9, help="worktrees for the store-size figure")
    args = ap.parse_args()
    if args.questions:
        from bench import knowledge_questions

        sys.argv = [sys.argv[0]]
        knowledge_questions.main()
        return

    tmp = Path(tempfile.mkdtemp(prefix="nerve-bench-knowledge-"))
    env = build.hermetic_env(tmp / "home")
    env.pop("NERVE_DEBUG", None)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    bytecode_cache(env, tmp / "pycache")  # as after pip install
    for key in list(os.environ):
        if key.startswith("GIT_"):
            del os.environ[key]
    os.environ.update(env)

    from git_nerve.knowledge import query as kquery
    from git_nerve.knowledge import ranking, terms
    from git_nerve.knowledge import sync as ksync
    from git_nerve.paths import discover

    t0 = time.perf_counter()
    if args.source:
        import sysconfig

        if args.source == "django":
            source = sdists.sdist_tree("Django", "5.1.4")
        else:
            source = Path(sysconfig.get_paths()["stdlib"] if args.source == "stdlib" else args.source)
        work = tmp / "source"
        copy_source(source, work)
        queries = STDLIB_QUERIES
    else:
        source = None
        work = kfix.large(tmp, args.files).work
        queries = generated_queries()
    files = [p for p in work.rglob("*") if p.is_file() and ".git" not in p.parts]
    size = sum(p.stat().st_size for p in files)
    print(f"repository: {len(files)} files, {size / 1e6:.1f} MB ({'copy of ' + str(source) if source else 'generated'}, "
          f"made in {time.perf_counter() - t0:.1f}s) at {work}")
    paths = discover(work)

    # 1. full sync
    report = ksync.sync(paths)
    print(f"\nfull sync:            {report.files} files, {report.chunks} chunks in {report.seconds:.2f}s = "
          f"{report.files / report.seconds:,.0f} files/s, {report.chunks / report.seconds:,.0f} chunks/s")
    full = ksync.sync(paths, full=True)
    print(f"full sync (--full):   {full.seconds:.2f}s = {full.files / full.seconds:,.0f} files/s (re-reading a warm index)")

    # 2. incremental after a one-file commit
    rng = random.Random(1)
    py_files = sorted(p.relative_to(work).as_posix() for p in work.rglob("*.py") if ".git" not in p.parts)
    trig, whole, cli = [], [], []
    for i in range(args.repeat):
        for bucket, how in ((trig, "files"), (whole, "all"), (cli, "cli")):
            rel = rng.choice(py_files)
            build.commit_file(work, rel, (work / rel).read_text() + f"\n\ndef bench_edit_{how}_{i}(x):\n    return x\n")
            if how == "files":
                bucket.append(ksync.sync(paths, files=[rel]).seconds)
            elif how == "all":
                bucket.append(ksync.sync(paths).seconds)
            else:
                bucket.append(timed_run(["git", "nerve", "knowledge", "sync"], work, env))
    print("\nincremental sync after a one-file commit (median; goal < 300 ms):")
    print(f"  trigger's sync of the committed file (in the background process):  {ms(statistics.median(trig))}")
    print(f"  whole-tree incremental sync (function):                             {ms(statistics.median(whole))}")
    print(f"  `git nerve knowledge sync` (a process, start-up included):          {ms(statistics.median(cli))}")
    base = [timed_run([sys.executable, "-c", "pass"], work, env) for _ in range(args.repeat)]
    startup = [timed_run(["git", "nerve", "--version"], work, env) for _ in range(args.repeat)]
    print(f"  for scale: `python -c pass`:                                        {ms(statistics.median(base))}")
    print(f"  for scale: `git nerve --version` (the command's start-up alone):    {ms(statistics.median(startup))}")

    # 3. queries, side by side with git grep
    ours, grep = [], []
    hits = 0
    for q in queries:
        words = terms.query_terms(q)
        grep_argv = ["git", "grep", "-n", "-i", "-I", *[a for w in words for a in ("-e", w)]]
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            res = kquery.search(paths, q, 10)
            ours.append(time.perf_counter() - t0)
            grep.append(timed_run(grep_argv, work, env))
        hits += bool(res.hits)
    print(f"\nquery over the whole index ({len(queries)} queries x {args.repeat}; {hits} with results; goal p50 < 50 ms):")
    print(f"  knowledge query (function):  p50 {ms(pct(ours, 0.5))}   p95 {ms(pct(ours, 0.95))}")
    print(f"  git grep -n -i (same terms): p50 {ms(pct(grep, 0.5))}   p95 {ms(pct(grep, 0.95))}")
    print(f"  ratio grep / query (p50):    {pct(grep, 0.5) / pct(ours, 0.5):.1f}x")
    cli_q, bare = [], []
    for q in queries[: max(5, args.repeat)] * 3:  # interleaved, so both see the same load
        bare.append(timed_run([sys.executable, "-c", "pass"], work, env))
        cli_q.append(timed_run(["git", "nerve", "knowledge", "query", q], work, env))
    print(f"  `git nerve knowledge query` (a process): p50 {ms(statistics.median(cli_q))}   "
          f"`python -c pass`: p50 {ms(statistics.median(bare))}   ratio {statistics.median(cli_q) / statistics.median(bare):.1f}x "
          "(goal p50 <= 100 ms)")

    # 4. the embedding ranking's cosine scan
    n = report.chunks
    vec_rng = random.Random(2)
    blobs = [(i, ranking.pack([vec_rng.gauss(0, 1) for _ in range(1024)])) for i in range(n)]
    q = [vec_rng.gauss(0, 1) for _ in range(1024)]
    scan, reference = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        ranking.nearest(q, blobs, 50)
        scan.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        _nearest_pure_python(q, blobs, 50)
        reference.append(time.perf_counter() - t0)
    print(f"\ncosine scan of {n} chunks x 1024 dims (float32 blobs):")
    print(f"  ranking.nearest (numpy, blocks of {ranking.BLOCK}): {ms(statistics.median(scan))} "
          f"({statistics.median(scan) / n * 1e6:.1f} us/chunk)")
    print(f"  pure Python reference (array + map):      {ms(statistics.median(reference))}   "
          f"ratio {statistics.median(reference) / statistics.median(scan):.0f}x")
    store_figures(paths, work, tmp, args.checkouts)
    print(f"\n(temporary files in {tmp})")


def store_figures(paths, work: Path, tmp: Path, checkouts: int) -> None:
    """The store's size for one checkout and for ``checkouts``; a new worktree's first sync."""
    import sqlite3

    from git_nerve.knowledge import store
    from git_nerve.knowledge import sync as ksync
    from git_nerve.paths import discover

    def size() -> int:
        db = store.index_path(paths.common_dir)
        conn = sqlite3.connect(db)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        return db.stat().st_size

    one, firsts = size(), []
    for i in range(checkouts - 1):
        wt = tmp / f"checkout-{i}"
        build.git(work, "worktree", "add", "-q", "-b", f"bench-{i}", str(wt))
        report = ksync.sync(discover(wt))
        firsts.append((report.seconds, report.chunks_written, report.files))
    print(f"\nthe repository's store ({checkouts} checkouts of one commit; goal <= 1.5 x one):")
    print(f"  one checkout: {one / 1e6:.1f} MB   {checkouts} checkouts: {size() / 1e6:.1f} MB   ratio {size() / one:.3f}")
    if firsts:
        secs = statistics.median(f[0] for f in firsts)
        print(f"  a new worktree's first sync: {ms(secs)} (median), {firsts[0][1]} chunks written of {firsts[0][2]} files")


def _nearest_pure_python(query, candidates, limit):
    """The scan without numpy, as the reference for speed."""
    import heapq
    from array import array
    from operator import mul

    from git_nerve.knowledge import ranking

    q = array("f", ranking.normalize(query))
    scored = ((key, sum(map(mul, q, ranking.unpack(blob)))) for key, blob in candidates if len(blob) == 4 * len(q))
    return heapq.nlargest(limit, scored, key=lambda kv: kv[1])


if __name__ == "__main__":
    main()
