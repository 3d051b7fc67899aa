"""The warm reader (issue 27): a per-clone process that answers `git worker status --json`, `git worker show T
--json` and `git worker conflicts --json` (from the radar's last result; never a recompute) over a Unix socket, so
a crowd of agents asking them pays neither Python's imports nor git-nerve's.

``client`` (floor 0: os, sys, _socket, json) is what the command tries first; ``start`` says whether a clone gets a
server and starts one; the server, ``git_nerve/warm_server.py`` (a front end beside this package: it runs the
commands' own click-free path, cli/entry.py, which imports this package), answers.
"""
