"""The knowledge index: the repository's own search index (RFC-003, knowledge layer).

The repository keeps one content-addressed store, ``<git-common-dir>/nerve/knowledge.db`` (SQLite
with FTS5), in which each worktree has a view of what its checkout holds; embeddings, when configured, are cached once for all worktrees in
``<git-common-dir>/nerve/embeddings.db`` keyed by a hash of the chunk text.

* :mod:`.config` reads ``knowledge.yaml`` and the ``[knowledge.embeddings]`` part of ``nerve.toml``;
* :mod:`.chunking` (with :mod:`.syntax`'s tree-sitter chunks), :mod:`.terms`, :mod:`.prior` and :mod:`.ranking` are pure (no I/O);
* :mod:`.store` owns both databases; :mod:`.sync`, :mod:`.query` and :mod:`.status` are the commands' bodies;
* :mod:`.trigger` is what the post-commit hook calls (standard library only); it starts :mod:`.background`.

This file stays empty of imports: the hook imports :mod:`.trigger` through it.
"""
