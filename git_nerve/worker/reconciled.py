"""What `status` last found about APPROVED tasks and the remote (:func:`.merged.reconcile_all`), so that it
asks git again only for what moved: ``<git-common-dir>/nerve/reconciled.json``.

An APPROVED task was found not merged with its branch tip at T and the remote's integration branch at R:
whether a merge commit with T as a parent is on R's first-parent line depends on those two commits only, so
while both are where they were the answer stands (one ``git for-each-ref`` instead of 3-4 git calls per task).
"""

from __future__ import annotations

import json

from ..fs import replace_file
from ..git import refs

FILE = "reconciled.json"


class Seen:
    def __init__(self, repo):
        self.path = repo.paths.nerve_dir / FILE
        remote = repo.settings.remote
        self.remote = remote
        self.tips = refs.tips(repo.cwd, ["refs/heads/", f"refs/remotes/{remote}/", "refs/nerve/archive/"])
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        self.old = data if isinstance(data, dict) else {}
        self.new: dict[str, list[str]] = {}

    def _key(self, w) -> list[str] | None:
        tip = self.tips.get(f"refs/heads/{w.branch}") or self.tips.get(refs.archive_name(w.task_id))
        onto = self.tips.get(f"refs/remotes/{self.remote}/{w.integration}")
        return [tip, onto] if tip and onto else None

    def unchanged(self, w) -> bool:
        key = self._key(w)
        if key is not None and self.old.get(w.task_id) == key:
            self.new[w.task_id] = key
            return True
        return False

    def not_merged(self, w) -> None:
        key = self._key(w)
        if key is not None:
            self.new[w.task_id] = key

    def save(self) -> None:
        if self.new == self.old:
            return
        try:
            replace_file(self.path, json.dumps(self.new, sort_keys=True))
        except OSError:
            pass  # only a cache: the next status asks git again


__all__ = ["FILE", "Seen"]
