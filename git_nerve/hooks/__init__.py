"""Floor 2: the git hooks that make agents' plain-git activity visible on the bus.

* :mod:`.install`: put the shims (top-level ``hooks/``) into the directory
  git uses for hooks, chaining any hook that was there; take them out again
  (its parts: :mod:`.shim`, :mod:`.where`, :mod:`.managers`, :mod:`.report`,
  :mod:`.uninstall`, :mod:`.status`; ``install`` re-exports their names).
* :mod:`.run`: the entry the shims start (``python -S``, standard library only).
* :mod:`.runtime`: the Python parts of the hooks (pre-push; knowledge, radar, hints).
* The commits the shims spool are ingested by :mod:`git_nerve.bus.spool`.

Importing this package imports nothing: the hook path pays only for what it uses.
"""
