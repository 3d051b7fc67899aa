"""Man pages where man finds them when the installer left them inside its virtualenv (uv).

``git worker --help`` is ``man git-worker``; man-db (and the BSD/macOS manpath) look for pages
in ``<dir>/../share/man`` for every ``<dir>`` on PATH. pip puts the package's pages
(``share/man/man1``, data files) beside its bin directory, pipx links them into
``~/.local/share/man``, install.sh writes them next to its links. ``uv tool install`` (0.13,
astral-sh/uv#4731) leaves them in its tool virtualenv and links only the commands into
``~/.local/bin``: so the first ``git worker``/``git nerve`` command run through such a link
links each missing page into ``<that bin dir>/../share/man/man1``, as pipx would have.

Nothing is overwritten: a page already there (a file or a working link) is kept. Each link is recorded
before it is made (an ownership record of :mod:`.git.ownership`, kind ``manlink``, under
``<that bin dir>/../share/git-nerve``, which outlives a removed tool virtualenv); only a recorded link that
now points nowhere (its virtualenv was removed) is replaced, through the door. A dead link no record names
(a person's own) is kept, whatever it points at. Any error leaves things as they are: this never fails a
command. Standard library only; the usual case costs a directory listing and a stat per page.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: Only git-nerve's own pages are ever linked (a system man dir holds git's own git-*.1).
PAGES = ("git-worker.", "git-worker-", "git-nerve.", "git-nerve-")


def link_pages(argv0: str, prefix: str | None = None) -> list[str]:
    """Link the shipped pages next to the bin directory ``argv0`` ran from; the links made."""
    made: list[str] = []
    try:
        shipped = os.path.join(prefix or sys.prefix, "share", "man", "man1")
        if not argv0 or os.sep not in argv0:
            return made
        bindir = os.path.dirname(os.path.abspath(argv0))
        if os.path.realpath(bindir) == os.path.realpath(os.path.join(prefix or sys.prefix, "bin")):
            return made  # run from the environment itself: its pages are already beside its bin
        try:
            names = [n for n in os.listdir(shipped) if n.startswith(PAGES) and n.endswith(".1")]
        except OSError:
            return made  # pages installed elsewhere (pip --user: beside ~/.local/bin already)
        target = os.path.join(os.path.dirname(bindir), "share", "man", "man1")
        records = os.path.join(os.path.dirname(bindir), "share", "git-nerve")
        for name in sorted(names):
            dest = os.path.join(target, name)
            if os.path.exists(dest):
                continue
            from .git import destroy, ownership  # only when a page is missing: the usual run imports nothing more

            if os.path.islink(dest):
                try:  # a dead link: replaced only when a record says we made it
                    destroy.remove_recorded_link(Path(records), dest)
                except destroy.Refused:
                    continue
            os.makedirs(target, exist_ok=True)
            page = os.path.join(shipped, name)
            ownership.record(Path(records), "manlink", dest, target=page)  # record, then create
            try:
                os.symlink(page, dest)
            except OSError:
                ownership.forget(Path(records), "manlink", dest)  # not made (one appeared meanwhile): not ours
                raise
            made.append(dest)
    except OSError:
        pass
    return made


def unlink_pages(bindir: str) -> tuple[list[str], list[str]]:
    """Remove the man page links git-nerve recorded making for ``bindir`` (under ``<bindir>/../share``), through
    the door: only a link that still points where it was made to point. (removed, kept: one line each, why)."""
    from .git import destroy, ownership

    records = Path(os.path.dirname(os.path.abspath(bindir))) / "share" / "git-nerve"
    removed, kept = [], []
    for link in ownership.recorded_names(records, "manlink"):
        if not os.path.lexists(link):
            ownership.forget(records, "manlink", link)  # already gone: only its record was left
            continue
        try:
            destroy.remove_recorded_link(records, link)
            removed.append(link)
        except destroy.Refused as exc:  # someone's own now: kept, and no longer ours to name again
            kept.append(str(exc))
            ownership.forget(records, "manlink", link)
    owned = records.joinpath(*ownership.OWNED_DIR)
    destroy.remove_empty_dirs([owned, owned.parent])  # the records' own dirs; share/git-nerve may be an installer's
    return removed, kept


if __name__ == "__main__":  # install.sh --uninstall: `python -m git_nerve.manlink --unlink BIN_DIR`
    if len(sys.argv) == 3 and sys.argv[1] == "--unlink":
        for line in unlink_pages(sys.argv[2])[0]:
            print(f"removed {line}")

