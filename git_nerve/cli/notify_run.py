"""The notification sender a poke starts detached (git_nerve/worker/notify.py), click-free:
``python -m git_nerve.cli.notify_run --cwd TOPLEVEL``. Here, above the features, because the radar's marks (which
tasks it flags as conflicting) are read the way `git worker status` reads them (status_rows.marks_at)."""

from __future__ import annotations


def conflicts(repo) -> set[str]:
    from .status_rows import marks_at

    marks, _ = marks_at(repo.paths.common_dir)
    return {t for t, found in marks.items() if any(m.startswith("conflict") for m in found)}


def main(argv: list[str] | None = None) -> int:
    import argparse

    from ..worker import notify
    from ..worker.lifecycle import open_repo

    parser = argparse.ArgumentParser(prog="git_nerve.cli.notify_run")
    parser.add_argument("--cwd", required=True)
    with open_repo(parser.parse_args(argv).cwd, create=False) as repo:
        return notify.run(repo, conflicts)


if __name__ == "__main__":
    raise SystemExit(main())
