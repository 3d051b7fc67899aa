"""`.ci/run`: the README's test command, verbatim, as on a fresh machine (an empty HOME, no GIT_* variables),
with only the tool cache passed in; any failure, and pytest's exit 5 (no tests), fails the run."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = ('printf "%s\\n" "home=$HOME" "cache=$GIT_NERVE_TOOL_CACHE" "author=${GIT_AUTHOR_NAME-unset}" '
         '"global=${GIT_CONFIG_GLOBAL-unset}" "xdg=${XDG_CONFIG_HOME-unset}" > "$OUT"; ls -A "$HOME" >> "$OUT"; '
         'git var GIT_AUTHOR_IDENT > "$OUT.ident" 2>&1; exit $CODE')


def ci_run(tmp_path: Path, code: int) -> tuple[subprocess.CompletedProcess, dict[str, str], list[str]]:
    """.ci/run in a copy of the project whose README's test command is PROBE."""
    project = tmp_path / "project"
    (project / ".ci").mkdir(parents=True)
    shutil.copy2(ROOT / ".ci" / "run", project / ".ci" / "run")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "<!-- test-command -->\n```sh\n" in readme
    (project / "README.md").write_text(f"# x\n\n<!-- test-command -->\n```sh\n{PROBE}\n```\n", encoding="utf-8")
    out = tmp_path / "probe.txt"
    home = Path(os.environ["HOME"])
    (home / ".cache" / "git-nerve-tools").mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OUT": str(out), "CODE": str(code)}
    env.pop("XDG_CACHE_HOME")  # the real user's cache is under their HOME
    proc = subprocess.run([str(project / ".ci" / "run")], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    lines = out.read_text().splitlines()
    values = dict(line.split("=", 1) for line in lines[:5])
    values["ident"] = Path(f"{out}.ident").read_text()
    return proc, values, lines[5:]


def test_the_test_command_runs_with_an_empty_home_no_git_identity_and_the_real_tool_cache(tmp_path):
    proc, values, rest = ci_run(tmp_path, 0)
    assert proc.returncode == 0, proc.stderr
    real_home = Path(os.environ["HOME"])
    assert values["home"] != str(real_home) and not Path(values["home"]).exists()  # made for the run, then removed
    assert values["cache"] == str(real_home / ".cache" / "git-nerve-tools")
    assert values["author"] == values["global"] == values["xdg"] == "unset"
    assert rest == [], rest  # HOME starts empty: no .gitconfig, no dotfiles
    assert "Nerve Test" not in values["ident"]  # the identity of the environment it was started from does not reach it


def test_a_failing_run_fails_and_no_tests_collected_fails_too(tmp_path):
    proc, _, _ = ci_run(tmp_path, 1)
    assert proc.returncode == 1
    proc, _, _ = ci_run(tmp_path / "again", 5)
    assert proc.returncode == 5 and "no tests" in proc.stderr
