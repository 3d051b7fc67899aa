"""The knowledge index: the repository's own search index (RFC-003, knowledge layer).

Each worktree keeps its chunks in ``<git-dir>/nerve/knowledge.db`` (SQLite
with FTS5); embeddings, when configured, are cached once for all worktrees in
``<git-common-dir>/nerve/embeddings.db`` keyed by a hash of the chunk text.

* :mod:`.config` reads ``knowledge.yaml`` and the ``[knowledge.embeddings]`` part of ``nerve.toml``;
* :mod:`.chunking`, :mod:`.terms` and :mod:`.ranking` are pure (no I/O);
* :mod:`.store` owns both databases; :mod:`.sync`, :mod:`.query` and :mod:`.status` are the commands' bodies;
* :mod:`.trigger` is what the post-commit hook calls (standard library only); it starts :mod:`.background`.

This file stays empty of imports: the hook imports :mod:`.trigger` through it.
"""
