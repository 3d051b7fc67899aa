"""The layering of docs/architecture.md, as the import-linter contracts in pyproject.toml state it: no import
circles, no import up a floor, the web stack and the MCP SDK only inside their own commands. Runs the real
`lint-imports` of this environment, so a change that breaks a contract fails here (and in CI) with its report."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _lint_imports() -> str:
    here = Path(sys.executable).parent / "lint-imports"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    found = shutil.which("lint-imports")
    if found is None:
        pytest.fail("lint-imports is not installed: pip install -e '.[test]' (import-linter is in the test extra)")
    return found


def test_the_import_contracts_hold():
    proc = subprocess.run([_lint_imports(), "--config", str(ROOT / "pyproject.toml"), "--no-cache"], cwd=ROOT,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout, proc.stdout


def test_a_broken_contract_is_reported(tmp_path):
    """The check can fail: an upward import (git/ importing a command module) breaks the floors."""
    pkg = tmp_path / "git_nerve"
    shutil.copytree(ROOT / "git_nerve", pkg, ignore=shutil.ignore_patterns("__pycache__", "scripted_model"))
    (pkg / "scripted_model").mkdir()
    (pkg / "scripted_model" / "__init__.py").write_text("")
    (pkg / "git" / "refs.py").write_text((pkg / "git" / "refs.py").read_text() + "\nfrom ..cli import common\n")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([_lint_imports(), "--config", str(tmp_path / "pyproject.toml"), "--no-cache"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "git_nerve.git.refs -> git_nerve.cli.common" in proc.stdout, proc.stdout


# -- the size of the rooms -------------------------------------------------------------------------------------

MODULE_LINES = 400
FUNCTION_LINES = 60
#: modules over MODULE_LINES that state no reason yet, and functions over FUNCTION_LINES, each being split by
#: another change (shrink this list; never grow it: split the new code along its seams instead)
ALLOWED = {
}


def _rooms(root: Path) -> list[str]:
    """Every module over MODULE_LINES lines whose docstring states no ``Size:`` reason, and every function over
    FUNCTION_LINES lines (its ``def`` to its last line), as ``path`` or ``path:function (N lines)``."""
    import ast

    found = []
    for path in sorted((root / "git_nerve").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        lines = len(text.splitlines())
        doc = ast.get_docstring(tree) or ""
        if lines > MODULE_LINES and not any(line.startswith("Size: ") for line in doc.splitlines()) and rel not in ALLOWED:
            found.append(f"{rel} ({lines} lines, no `Size: <reason>` line in its docstring)")
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > FUNCTION_LINES and f"{rel}:{node.name}" not in ALLOWED:
                    found.append(f"{rel}:{node.name} ({n} lines)")
    return found


def test_no_module_or_function_is_too_big():
    """No module over 400 lines without a stated reason, no function over 60 lines, but the allow-list."""
    assert _rooms(ROOT) == [], "split these along their seams (or state a module's reason in a `Size:` line)"


def test_the_allow_list_names_only_rooms_still_too_big():
    """An entry that is small now is dropped from ALLOWED, so the list only ever shrinks."""
    import ast

    stale = []
    for entry in sorted(ALLOWED):
        rel, _, fn = entry.partition(":")
        text = (ROOT / rel).read_text(encoding="utf-8")
        if not fn:
            if len(text.splitlines()) <= MODULE_LINES:
                stale.append(entry)
            continue
        sizes = [n.end_lineno - n.lineno + 1 for n in ast.walk(ast.parse(text))
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == fn]
        if not sizes or max(sizes) <= FUNCTION_LINES:
            stale.append(entry)
    assert stale == [], "these are small enough now: remove them from ALLOWED"


def test_the_size_rule_can_fail(tmp_path):
    """A module that grows past the limit without a reason, and a long function, are both reported."""
    pkg = tmp_path / "git_nerve"
    pkg.mkdir()
    (pkg / "big.py").write_text('"""A big module."""\n' + "x = 1\n" * MODULE_LINES, encoding="utf-8")
    (pkg / "why.py").write_text('"""A big module.\n\nSize: a stated reason.\n"""\n' + "x = 1\n" * MODULE_LINES,
                                encoding="utf-8")
    (pkg / "long.py").write_text("def f():\n" + "    x = 1\n" * FUNCTION_LINES, encoding="utf-8")
    assert _rooms(tmp_path) == [f"git_nerve/big.py ({MODULE_LINES + 1} lines, no `Size: <reason>` line in its docstring)",
                                f"git_nerve/long.py:f ({FUNCTION_LINES + 1} lines)"]


# -- git through named operations -------------------------------------------------------------------------------

#: modules outside git_nerve/git/ that may still hand git/cli.py a literal argument list, each with its reason
#: (empty: every git command the domain runs is a named operation of a module under git_nerve/git/)
GIT_ARGV_ALLOWED: dict[str, str] = {}

#: the functions of git/cli.py that run git with the argument list they are given
_CLI_RUNNERS = {"run", "out", "ok"}


def _literal_git_argv_calls(root: Path) -> list[str]:
    """Every call, outside git_nerve/git/, of git/cli.py's run/out/ok whose first argument is a list literal
    (``cli.run(["rev-parse", ...])``, ``gitcli.ok([...])``, ``run([...])`` after ``from ..git.cli import run``),
    as ``path:line``."""
    import ast

    found = []
    for path in sorted((root / "git_nerve").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("git_nerve/git/"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules, functions = set(), set()  # names bound to git/cli.py, and to its runners
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = node.module or ""
                if source == "git" or source.endswith(".git") or source == "git_nerve.git":
                    modules |= {a.asname or a.name for a in node.names if a.name == "cli"}
                if source == "git.cli" or source.endswith("git.cli"):
                    functions |= {a.asname or a.name for a in node.names if a.name in _CLI_RUNNERS}
            elif isinstance(node, ast.Import):
                modules |= {a.asname for a in node.names if a.name == "git_nerve.git.cli" and a.asname}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.List):
                continue
            f = node.func
            if (isinstance(f, ast.Attribute) and f.attr in _CLI_RUNNERS and isinstance(f.value, ast.Name)
                    and f.value.id in modules) or (isinstance(f, ast.Name) and f.id in functions):
                if rel not in GIT_ARGV_ALLOWED:
                    found.append(f"{rel}:{node.lineno}")
    return found


def test_git_is_reached_through_named_operations_only():
    """Outside git_nerve/git/ no module builds a git argument list: it calls a named operation of git/."""
    assert _literal_git_argv_calls(ROOT) == [], (
        "move these git argument lists into a named function of a module under git_nerve/git/")


def test_the_git_argv_rule_can_fail(tmp_path):
    """A literal argument list handed to git/cli.py outside git/ is reported, however cli was imported; the same
    call inside git/ is not."""
    pkg = tmp_path / "git_nerve"
    (pkg / "git").mkdir(parents=True)
    (pkg / "worker").mkdir()
    (pkg / "git" / "refs.py").write_text('from . import cli\ncli.run(["rev-parse", "HEAD"])\n', encoding="utf-8")
    (pkg / "worker" / "a.py").write_text(
        'from ..git import cli\nfrom ..git import refs\n\nhead = cli.run(["rev-parse", "HEAD"], check=False)\n'
        'refs.verify(".", "HEAD")\n', encoding="utf-8")
    (pkg / "worker" / "b.py").write_text(
        'from ...git import cli as gitcli\nfrom ..git.cli import ok as git_ok\n\n'
        'gitcli.out(\n    ["config", "--get", "x"])\ngit_ok(["check-ignore", "-q", "f"])\n', encoding="utf-8")
    assert _literal_git_argv_calls(tmp_path) == ["git_nerve/worker/a.py:4", "git_nerve/worker/b.py:4",
                                                 "git_nerve/worker/b.py:6"]
