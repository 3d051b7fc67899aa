"""The supervisor of a setup command (started by :func:`.setup.start`, in a session of its own):
``python -m git_nerve.worktree_prep.setup_run <bus> <task> <worktree> <log> <started> <lock fd> -- ARGV...``.

Runs ARGV in the worktree (no shell), its output appended to the log line by line with every value of a
copied .env file and of a secret-looking environment variable hidden (:func:`.secrets.redactor`, the one
redaction of :mod:`git_nerve.redact`: a setup that prints one never puts it in git-nerve's log), then records
done (exit 0) or failed (any other status, or a command that cannot start) in the bus, only over its own
generation (``setup_started`` = ``<started>``: a newer setup's record is never written over). The setup's lock
(``<lock fd>``, held since before this process started) is handed on to the command, so it stays held while any
process of the setup lives (:func:`.setup.stop`)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time

from ..bus import Bus
from ..bus import prep as busprep
from ..fs import create_file
from ..redact import Redactor
from .secrets import redactor


def _run(command: list[str], worktree: str, out, masking: Redactor, lock_fd: int | None) -> int:
    try:
        proc = subprocess.Popen(command, cwd=worktree, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, pass_fds=() if lock_fd is None else (lock_fd,))
    except OSError as exc:
        out.write(f"setup could not start: {exc}\n".encode())
        return 127
    assert proc.stdout is not None
    for raw in proc.stdout:
        out.write(masking.text(raw.decode("utf-8", "replace")).encode("utf-8"))
        out.flush()
    return proc.wait()


def main(argv: list[str]) -> int:
    split = argv.index("--") if "--" in argv else len(argv)
    head, command = argv[:split], argv[split + 1:]
    bus_path, task_id, worktree, log = head[:4]
    started = float(head[4]) if len(head) > 4 else None
    lock_fd = int(head[5]) if len(head) > 5 else None
    bus = Bus(bus_path, create=False)
    try:
        masking = redactor(bus.conn, task_id, worktree)
        with os.fdopen(create_file(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND), "ab") as out:
            out.write(f"$ {shlex.join(command)}   (in {worktree})\n".encode())
            out.flush()
            code = _run(command, worktree, out, masking, lock_fd)
            out.write(f"[setup exited {code}]\n".encode())
        with bus.write() as conn:
            busprep.end_setup(conn, task_id, started, "done" if code == 0 else "failed", code, time.time())
    finally:
        bus.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
