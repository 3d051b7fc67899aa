"""Floor 1: the only place git is touched.

* :mod:`.cli` runs the git binary (standard library only: hooks import it).
* :mod:`.repo` discovers repositories and reads config through git.
* :mod:`.objects` is the pygit2 side: in-memory merges and rebases, commits.
* :mod:`.worktrees`, :mod:`.refs`, :mod:`.remote` wrap the git operations the
  features need, each with typed errors.
* :mod:`.checkout`, :mod:`.history`, :mod:`.objectdb`, :mod:`.location`,
  :mod:`.staged`, :mod:`.here` (standard library): the other named operations;
  nothing outside this package builds a git argument list.

Importing this package does not import pygit2.
"""
