"""The Python parts of the hooks: pre-push, and what post-commit / post-rewrite cannot do in sh.

Commits, merges and rewrites are recorded by the shim itself (one line in
``<git-dir>/nerve/spool``, ingested by the next reader of the bus:
:mod:`git_nerve.bus.spool`). Python starts for pre-push, for the knowledge
index, for the radar (in the background) and for the CONFLICTED hint after
a rebase that stopped.

Every agent commit pays for these modules, so they import only the standard
library and git_nerve's own standard-library modules (bus, context, git.cli,
worker.heartbeat), and this dispatch imports only the module of the hook git ran.
The shims start Python with ``-S``; the two parts that need installed packages
(the pre-push merge check, pygit2, and whatever the knowledge trigger loads)
turn site-packages on when they run.

The parts, one module each:

* :mod:`.common`: where the hook runs (:func:`~.common.locate`), warnings and failing open, the bus opened
  with a short busy timeout (a locked bus delays a commit by at most ``BUSY_TIMEOUT`` seconds);
* :mod:`.kicks`: what a hook starts and never waits for (the knowledge index, the radar);
* :mod:`.post_commit`, :mod:`.post_rewrite`: fail open, any failure of ours is one warning line and exit 0;
* :mod:`.pre_push` (and its git-side checks, :mod:`.push_checks`): in a worker's worktree (its git dir holds
  ``nerve/.worker-ctx.json``) a heartbeat, and a refusal of pushes that would carry broken work.
  Elsewhere the hooks only trigger the knowledge index.

Git runs hooks with GIT_DIR / GIT_INDEX_FILE set for their own worktree; git commands here keep them
(``inherit_location``) because they all act on that worktree.
"""

from __future__ import annotations

from .common import locate


def run(hook: str, args: list[str], stdin) -> int:
    """Run one hook as git called it."""
    where = locate()
    if hook == "post-commit":
        from .post_commit import post_commit

        return post_commit(where)
    if hook == "pre-commit":
        from .precommit import pre_commit  # copied secrets stay out of git (worktree_prep)

        return pre_commit(where)
    text = stdin.read().decode("utf-8", "replace") if stdin is not None else ""
    if hook == "post-merge":
        return 0  # all of it is the shim's line in the spool
    if hook == "post-rewrite":
        from .post_rewrite import post_rewrite

        return post_rewrite(where, args[0] if args else "", text)
    if hook == "pre-push":
        from .pre_push import pre_push

        return pre_push(where, args[0] if args else "", text, args[1] if len(args) > 1 else "")
    raise ValueError(f"no hook named {hook!r}")
