"""Each exit code is its own, and documented where the others are (issue 42: the door's refusal exited 4, the code
of a git failure): README's table, `git worker --help` (and so its man page) name every one of them."""

from __future__ import annotations

import os
import re

from git_nerve.errors import ExitCode
from tests.conftest import BIN, run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _readme_table() -> dict[int, str]:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("\n### Exit codes\n", 1)[1].split("\n#", 1)[0]
    return {int(m[1]): m[2] for m in re.finditer(r"^\| (\d+) \| (.+) \|$", section, re.M)}


def test_the_readme_table_has_a_row_for_each_exit_code_and_no_other():
    table = _readme_table()
    assert sorted(table) == sorted(int(c) for c in ExitCode)
    assert "refused by the door for destruction" in table[9] and "nothing was removed" in table[9]
    assert "git error" in table[4] and "door" not in table[4]


def test_git_worker_help_names_the_refusal_code(gw, repo):
    res = gw(["--help"], repo.work)
    assert res.code == 0, res
    codes = {int(n) for n in re.findall(r"(?:^|\s{2,})(\d) [a-z-]", res.out.split("Exit codes:", 1)[1])}
    assert codes == {0, 2, 3, 4, 5, 6, 7, 8, 9}, res.out
    assert "9 kept: the door could not prove git-nerve made it; nothing removed" in res.out


def test_a_refusal_of_the_door_exits_9_with_one_line_and_keeps_what_it_found(repo, tmp_path):
    """A symbolic link planted at git-nerve's record of `mcp install`: `mcp uninstall` takes its own entry out, then
    keeps the link (and what it points at) and says so: exit 9, its own code, not a git failure's 4."""
    exe = str(BIN / "git-nerve")
    assert run([exe, "mcp", "install", "claude", "--scope", "project"], repo.work).code == 0
    record = repo.work / ".git" / "nerve" / "mcp.json"
    planted = tmp_path / "planted.json"
    os.replace(record, planted)
    record.symlink_to(planted)
    res = run([exe, "mcp", "uninstall", "claude"], repo.work)
    assert res.code == 9, res
    assert res.err.splitlines() == [f"error: kept {record}: it is a symbolic link (its target is not ours to remove, "
                                    "nor is a link git-nerve did not record)"], res
    assert record.is_symlink() and planted.is_file()
