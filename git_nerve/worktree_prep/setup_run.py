"""The supervisor of a setup command (started by :func:`.setup.start`):
``python -m git_nerve.worktree_prep.setup_run <bus> <task> <worktree> <log> -- ARGV...``.

Runs ARGV in the worktree (no shell), its output appended to the log line by line with every value of a
copied .env file and of a secret-looking environment variable hidden (:func:`.secrets.redactor`, the one
redaction of :mod:`git_nerve.redact`: a setup that prints one never puts it in git-nerve's log), then records done (exit 0) or failed (any other status, or a command that cannot start) in the bus."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time

from ..bus import Bus
from ..bus import prep as busprep
from ..redact import Redactor
from .secrets import redactor


def _run(command: list[str], worktree: str, out, masking: Redactor) -> int:
    try:
        proc = subprocess.Popen(command, cwd=worktree, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
    except OSError as exc:
        out.write(f"setup could not start: {exc}\n".encode())
        return 127
    assert proc.stdout is not None
    for raw in proc.stdout:
        out.write(masking.text(raw.decode("utf-8", "replace")).encode("utf-8"))
        out.flush()
    return proc.wait()


def main(argv: list[str]) -> int:
    bus_path, task_id, worktree, log = argv[:4]
    command = argv[5:] if len(argv) > 4 and argv[4] == "--" else argv[4:]
    bus = Bus(bus_path, create=False)
    try:
        masking = redactor(bus.conn, task_id, worktree)
        with open(log, "ab") as out:
            out.write(f"$ {shlex.join(command)}   (in {worktree})\n".encode())
            out.flush()
            code = _run(command, worktree, out, masking)
            out.write(f"[setup exited {code}]\n".encode())
        with bus.write() as conn:
            busprep.set_values(conn, task_id, setup_state="done" if code == 0 else "failed", setup_exit=code,
                               setup_ended=time.time())
    finally:
        bus.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
