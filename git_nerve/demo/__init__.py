"""The demo, above the product: it may import any of git-nerve, nothing of git-nerve imports it but the
`git nerve demo` command (cli/setup.py, inside the command; pyproject.toml's floors contract names it).

- :mod:`.fast`: `git nerve demo --fast`, the worker lifecycle on a throw-away repository, and the helpers the
  full demo shares with it;
- :mod:`.agents`: `git nerve demo`, real agent processes against the scripted model;
- :mod:`.scripted_model`: the deterministic model server on 127.0.0.1 that real agent CLIs talk to in the demo and
  in the tests (tests/ and bench/ import it from here).

Nothing is imported here, so that importing the scripted model loads neither click nor the demo.
"""
