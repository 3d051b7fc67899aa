"""The entry the hook shims start.

The shims run ``python -S -c '<add the package root to sys.path>; from
git_nerve.hooks.run import main; ...' <root> <hook> [git's arguments]``;
``python -m git_nerve.hooks.run <hook> [args]`` and the hidden
``git nerve hook-run <hook> [args]`` do the same. Standard library only.

A failure of ours never blocks git: it is one warning line and exit 0.
Only pre-push's own refusals (see :mod:`.runtime`) and pre-commit's (:mod:`.precommit`) exit non-zero.
"""

from __future__ import annotations

import os
import sys

HOOKS = ("post-commit", "post-merge", "post-rewrite", "pre-push", "pre-commit")
USAGE = f"usage: python -m git_nerve.hooks.run <{'|'.join(HOOKS)}> [ARGS...]"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        sys.stderr.write(USAGE + "\n")
        return 0 if argv else 2
    hook, args = argv[0], argv[1:]
    if os.environ.get("NERVE_HOOK_BACKGROUND"):  # the shim's part nobody waits on (the radar's request)
        from ..detach import lower_own_priority

        lower_own_priority()
    if os.environ.get("NERVE_HOOK_CHAINED") == hook:
        return 0  # a team's hook chaining ours (`git nerve hook-run`), run by our shim: the shim does git-nerve's part
    if hook not in HOOKS:
        sys.stderr.write(f"warning: git-nerve: no hook named {hook!r} (it handles {', '.join(HOOKS)}); nothing done\n")
        return 0
    try:
        from . import runtime

        return runtime.run(hook, args, getattr(sys.stdin, "buffer", None))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - a hook of ours must never block git
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        from ..text import clean

        sys.stderr.write(clean(f"warning: git-nerve {hook}: {detail} (git carries on)") + "\n")
        return 0


if __name__ == "__main__":
    sys.exit(main())
