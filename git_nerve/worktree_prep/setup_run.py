"""The supervisor of a setup command (started by :func:`.setup.start`):
``python -m git_nerve.worktree_prep.setup_run <bus> <task> <worktree> <log> -- ARGV...``.

Runs ARGV in the worktree (no shell), its output appended to the log, then records done (exit 0) or
failed (any other status, or a command that cannot start) in the bus."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time


def main(argv: list[str]) -> int:
    bus_path, task_id, worktree, log = argv[:4]
    command = argv[5:] if len(argv) > 4 and argv[4] == "--" else argv[4:]
    with open(log, "ab") as out:
        out.write(f"$ {shlex.join(command)}   (in {worktree})\n".encode())
        out.flush()
        try:
            code = subprocess.run(command, cwd=worktree, stdin=subprocess.DEVNULL, stdout=out, stderr=out).returncode
        except OSError as exc:
            out.write(f"setup could not start: {exc}\n".encode())
            code = 127
        out.write(f"[setup exited {code}]\n".encode())
    from ..bus import Bus
    from ..bus import prep as busprep

    bus = Bus(bus_path, create=False)
    try:
        with bus.write() as conn:
            busprep.set_values(conn, task_id, setup_state="done" if code == 0 else "failed", setup_exit=code,
                               setup_ended=time.time())
    finally:
        bus.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
