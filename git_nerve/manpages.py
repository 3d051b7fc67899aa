"""Man pages generated from the click commands (``git worker --help`` is
``man git-worker``, since git turns ``--help`` into ``git help worker``).

Usage: ``python -m git_nerve.manpages DIR`` writes ``git-worker.1``,
``git-nerve.1`` and one page per subcommand (``git-worker-spawn.1``, ...).
"""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path


def write(target: Path) -> list[Path]:
    from click_man.core import write_man_pages

    from . import __version__
    from .cli.nerve import nerve
    from .cli.worker import worker

    target.mkdir(parents=True, exist_ok=True)
    before = set(target.glob("git-*.1"))
    today = date.today().strftime("%Y-%m-%d")
    write_man_pages("git-worker", worker, version=__version__, target_dir=str(target), date=today)
    write_man_pages("git-nerve", nerve, version=__version__, target_dir=str(target), date=today)
    return sorted(set(target.glob("git-*.1")) - before) or sorted(target.glob("git-*.1"))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m git_nerve.manpages DIR", file=sys.stderr)
        return 2
    pages = write(Path(argv[0]))
    print(f"wrote {len(pages)} man pages to {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
