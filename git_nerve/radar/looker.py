"""The radar runner's second thread: it looks at the worktrees' uncommitted work (`git status`, a snapshot),
one task at a time, while the runner's main loop keeps answering new commits with the quick pass over
committed work (:mod:`.background`). Its worktree look happens outside the radar lock (:func:`.scan.recompute`),
so neither waits for the other's git.
"""

from __future__ import annotations

import sys
import threading
import time


class Looker:
    def __init__(self, cwd: str):
        self.cwd = cwd
        self.todo: list[str] = []
        self.working = False
        self.closing = False
        self.cv = threading.Condition()
        self.thread = threading.Thread(target=self._loop, name="radar-looker", daemon=True)
        self.thread.start()

    def ask(self, tasks) -> None:
        with self.cv:
            self.todo += [t for t in tasks if t not in self.todo]
            self.cv.notify_all()

    def busy(self) -> bool:
        """Work handed on is under way. A looker whose thread has ended (it could not open the repository: its
        worktree was removed meanwhile) is never busy: what is asked of it then is nobody's to do, and the runner
        holding the radar's run lock until it is done would wait for ever (and no other runner could start)."""
        with self.cv:
            return self.thread.is_alive() and (bool(self.todo) or self.working)

    def close(self) -> None:
        with self.cv:
            self.closing = True
            self.cv.notify_all()
        self.thread.join()

    def _next(self) -> str | None:
        with self.cv:
            while not self.todo and not self.closing:
                self.cv.wait()
            if not self.todo:
                return None
            self.working = True
            return self.todo.pop(0)

    def _loop(self) -> None:
        from ..errors import NerveError
        from ..worker.lifecycle import open_repo
        from . import notify, scan

        try:
            with open_repo(self.cwd) as repo:
                while (task := self._next()) is not None:
                    try:
                        result = scan.recompute(repo, changed=[task])
                        notify.after(repo, result)
                        if result.new_conflicts:
                            print(f"radar {time.time():.3f}: looked at {task}: {len(result.new_conflicts)} new "
                                  f"conflict(s)", flush=True)
                    except NerveError as exc:
                        print(f"radar: {exc.message}", file=sys.stderr, flush=True)
                    finally:
                        with self.cv:
                            self.working = False
                            self.cv.notify_all()
        except NerveError as exc:
            print(f"radar: {exc.message}", file=sys.stderr, flush=True)
        finally:
            with self.cv:
                self.todo, self.working = [], False


__all__ = ["Looker"]
