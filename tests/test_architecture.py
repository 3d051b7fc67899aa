"""The layering of docs/architecture.md, as the import-linter contracts in pyproject.toml state it: no import
circles, no import up a floor, every module on a floor, fences that deny by default (the database drivers, the web
stack, click, pygit2, ... only in the modules listed for each). Runs the real `lint-imports` of this environment,
so a change that breaks a contract fails here (and in CI) with its report. And the rules beside it: rooms of a
bounded size, git reached through the named operations of git_nerve/git/ only. docs/architecture.md ("Rules that
keep it livable") says which command checks each."""

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
    proc = subprocess.run([_lint_imports(), str(ROOT / "pyproject.toml"), "--no-cache"], cwd=ROOT,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout, proc.stdout


def _lint_copy(tmp_path: Path, edits: dict[str, str]) -> subprocess.CompletedProcess:
    """`lint-imports` on a copy of the package (the scripted model an empty package there: nothing of the product
    imports it) with ``edits``: module path -> lines appended to it (a new module when it does not exist)."""
    pkg = tmp_path / "git_nerve"
    shutil.copytree(ROOT / "git_nerve", pkg, ignore=shutil.ignore_patterns("__pycache__", "scripted_model"))
    (pkg / "demo" / "scripted_model").mkdir()
    (pkg / "demo" / "scripted_model" / "__init__.py").write_text("")
    for rel, lines in edits.items():
        path = pkg / rel
        path.write_text((path.read_text() if path.exists() else "") + "\n" + lines + "\n")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run([_lint_imports(), str(tmp_path / "pyproject.toml"), "--no-cache"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=240, env=env)


def test_a_broken_contract_is_reported(tmp_path):
    """The check can fail: an upward import (git/ importing a command module, the product importing the demo)
    breaks the floors, and a module nobody listed anywhere (a new one) is inside every fence: the database driver,
    click and filelock are refused to it."""
    proc = _lint_copy(tmp_path, {"git/refs.py": "from ..cli import common",
                                 "worker/states.py": "def f():\n    from ..demo import fast",
                                 "brand_new.py": "import sqlite3\nimport click\nimport filelock"})
    assert proc.returncode != 0, proc.stdout + proc.stderr
    reported = {" ".join(line.split()) for line in proc.stdout.splitlines()}
    for link in ("git_nerve.git.refs -> git_nerve.cli.common", "git_nerve.worker.states -> git_nerve.demo.fast",
                 "git_nerve.brand_new -> sqlite3", "git_nerve.brand_new -> click", "git_nerve.brand_new -> filelock"):
        assert any(line.startswith(f"- {link} (l.") for line in reported), proc.stdout


def _floors(pyproject: Path) -> list[str]:
    """The modules the floors contract (the layers contract of pyproject.toml) puts on a floor."""
    import re
    import tomllib

    contracts = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]
    (floors,) = [c for c in contracts if c["type"] == "layers"]
    return [name.strip() for layer in floors["layers"] for name in re.split(r"[:|]", layer)]


def _outside_the_floors(root: Path, floors: list[str]) -> list[str]:
    """Every module of git_nerve on no floor, as its path, but a package's ``__init__.py`` that imports nothing (the
    root package, and a package whose modules stand on different floors: mcptools, warm): a new module must be put
    on one."""
    import ast

    found = []
    for path in sorted((root / "git_nerve").rglob("*.py")):
        rel = path.relative_to(root)
        name = ".".join(rel.with_suffix("").parts[:-1] if rel.name == "__init__.py" else rel.with_suffix("").parts)
        if any(name == floor or name.startswith(floor + ".") for floor in floors):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import)
                   or isinstance(n, ast.ImportFrom) and n.module != "__future__"]
        if rel.name != "__init__.py" or imports:
            found.append(rel.as_posix())
    return found


def test_every_module_stands_on_a_floor():
    """A module on no floor escapes the layering unseen: every module is on one (pyproject.toml's floors)."""
    assert _outside_the_floors(ROOT, _floors(ROOT / "pyproject.toml")) == [], (
        "put these on their floor in pyproject.toml's layers contract (and in docs/architecture.md's floors)")


def test_the_floor_rule_can_fail(tmp_path):
    """A new module on no floor is reported, and so is a package's ``__init__.py`` that imports something; one that
    imports nothing (a docstring, a version) is not."""
    pkg = tmp_path / "git_nerve"
    (pkg / "warm").mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""root"""\nfrom __future__ import annotations\n__version__ = "1"\n')
    (pkg / "warm" / "__init__.py").write_text('"""warm"""\n')
    (pkg / "warm" / "client.py").write_text("import os\n")
    (pkg / "warm" / "new.py").write_text("import os\n")
    (pkg / "worker").mkdir()
    (pkg / "worker" / "__init__.py").write_text("from . import states\n")
    (pkg / "radar").mkdir()
    (pkg / "radar" / "__init__.py").write_text("from . import scan\n")
    assert _outside_the_floors(tmp_path, ["git_nerve.warm.client", "git_nerve.radar"]) == [
        "git_nerve/warm/new.py", "git_nerve/worker/__init__.py"]


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

#: modules outside git_nerve/git/ that may still build a git argument list, each with its reason
GIT_ARGV_ALLOWED: dict[str, str] = {
    "git_nerve/demo/fast.py": "the demo runs, and prints, the git commands a person would type (above the product)",
    "git_nerve/demo/agents.py": "the demo runs, and prints, the git commands a person would type (above the product)",
}

#: the functions of git/cli.py that run git with the argument list they are given
_CLI_RUNNERS = {"run", "out", "ok"}
#: what runs a command line given as one string
_SHELL_RUNNERS = {"run", "Popen", "call", "check_call", "check_output", "getoutput", "getstatusoutput", "system",
                  "popen"}


def _git_argv_outside_git(root: Path) -> list[str]:
    """Every git argument list built outside git_nerve/git/, as ``path:line``:

    - a call of git/cli.py's run/out/ok (``cli.run(...)``, ``gitcli.ok(...)``, ``run(...)`` after ``from
      ..git.cli import run``) whose first argument is built there: a list or tuple literal, one joined with ``+``,
      or a name the module binds to one (``args = ["rev-parse", "HEAD"]; cli.run(args)``);
    - a list or tuple whose first element is ``"git"`` (or a name the module binds to ``"git"``): ``["git", *x]``,
      ``("git", "log")``, ``["git"] + x``, wherever it goes (a comparison with one, or a click.Choice of
      values, is no argument list);
    - a command line handed to subprocess or os as one string starting with ``git ``
      (``subprocess.run("git status", shell=True)``, ``os.system(f"git {x}")``)."""
    import ast

    def literal(node: ast.AST, lists: set[str]) -> bool:
        if isinstance(node, (ast.List, ast.Tuple)):
            return True
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return literal(node.left, lists) or literal(node.right, lists)
        return isinstance(node, ast.Name) and node.id in lists

    def starts_git(node: ast.AST) -> bool:
        if isinstance(node, ast.JoinedStr):
            node = node.values[0] if node.values else node
        return isinstance(node, ast.Constant) and isinstance(node.value, str) and (
            node.value == "git" or node.value.startswith("git "))

    found = []
    for path in sorted((root / "git_nerve").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("git_nerve/git/") or rel in GIT_ARGV_ALLOWED:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules, functions, shells = set(), set(), set()  # names bound to git/cli.py, its runners, subprocess's
        lists, gits, compared = set(), set(), set()  # names bound to a built list, to "git"; value sets
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = node.module or ""
                if source == "git" or source.endswith(".git") or source == "git_nerve.git":
                    modules |= {a.asname or a.name for a in node.names if a.name == "cli"}
                if source == "git.cli" or source.endswith("git.cli"):
                    functions |= {a.asname or a.name for a in node.names if a.name in _CLI_RUNNERS}
                if source == "subprocess":
                    shells |= {a.asname or a.name for a in node.names if a.name in _SHELL_RUNNERS}
            elif isinstance(node, ast.Import):
                modules |= {a.asname for a in node.names if a.name == "git_nerve.git.cli" and a.asname}
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                names = {t.id for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                         if isinstance(t, ast.Name)}
                if literal(node.value, set()):
                    lists |= names
                elif isinstance(node.value, ast.Constant) and node.value.value == "git":
                    gits |= names
            elif isinstance(node, ast.Compare):
                compared |= {id(n) for n in (node.left, *node.comparators)}
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "Choice":
                compared |= {id(n) for n in node.args}  # click.Choice(["git", "postgres"]): values, not a command
        for node in ast.walk(tree):
            if (isinstance(node, (ast.List, ast.Tuple)) and node.elts and id(node) not in compared
                    and (isinstance(first := node.elts[0], ast.Constant) and first.value == "git"
                         or isinstance(first, ast.Name) and first.id in gits)):
                found.append(f"{rel}:{node.lineno}")
            if not isinstance(node, ast.Call) or not node.args:
                continue
            f = node.func
            if (isinstance(f, ast.Attribute) and f.attr in _CLI_RUNNERS and isinstance(f.value, ast.Name)
                    and f.value.id in modules) or (isinstance(f, ast.Name) and f.id in functions):
                if literal(node.args[0], lists):
                    found.append(f"{rel}:{node.lineno}")
            elif ((isinstance(f, ast.Attribute) and f.attr in _SHELL_RUNNERS and isinstance(f.value, ast.Name)
                   and f.value.id in ("subprocess", "os") or isinstance(f, ast.Name) and f.id in shells)
                  and starts_git(node.args[0])):
                found.append(f"{rel}:{node.lineno}")
    return sorted(set(found), key=lambda at: (at.split(":")[0], int(at.split(":")[1])))


def test_git_is_reached_through_named_operations_only():
    """Outside git_nerve/git/ no module builds a git argument list: it calls a named operation of git/."""
    assert _git_argv_outside_git(ROOT) == [], (
        "move these git argument lists into a named function of a module under git_nerve/git/")


def test_the_git_argv_rule_can_fail(tmp_path):
    """An argument list handed to git/cli.py outside git/ is reported, however cli was imported and however the
    list was built (literal, tuple, joined, through a name), and so is any list starting with "git" and a git
    command line given as one string; the same calls inside git/ are not, nor a comparison with such a list."""
    pkg = tmp_path / "git_nerve"
    (pkg / "git").mkdir(parents=True)
    (pkg / "worker").mkdir()
    (pkg / "git" / "refs.py").write_text('from . import cli\ncli.run(["rev-parse", "HEAD"])\n'
                                         'import subprocess\nsubprocess.run(["git", "status"])\n', encoding="utf-8")
    (pkg / "worker" / "a.py").write_text(
        'from ..git import cli\nfrom ..git import refs\n\nhead = cli.run(["rev-parse", "HEAD"], check=False)\n'
        'refs.verify(".", "HEAD")\n', encoding="utf-8")
    (pkg / "worker" / "b.py").write_text(
        'from ...git import cli as gitcli\nfrom ..git.cli import ok as git_ok\n\n'
        'gitcli.out(\n    ["config", "--get", "x"])\ngit_ok(("check-ignore", "-q", "f"))\n', encoding="utf-8")
    (pkg / "worker" / "c.py").write_text(
        'import os\nimport subprocess\nfrom ..git import cli\n\n'
        'args = ["rev-parse"] + ["HEAD"]\n'        # 5
        'cli.out(args)\n'                          # 6: a name bound to a built list
        'cli.ok(["log"] + extra)\n'                # 7: joined
        'subprocess.run(["git", *extra])\n'        # 8: "git" first, starred
        'argv = ("git", "log")\n'                  # 9: a tuple
        'GIT = "git"\nsubprocess.run([GIT] + extra)\n'  # 11: through a name bound to "git"
        'subprocess.run("git status", shell=True)\n'    # 12
        'os.system(f"git log {x}")\n'              # 13
        'if extra[:2] == ["git", "nerve"]:\n    pass\n'  # a comparison: not an argument list
        'click.Choice(["git", "postgres"])\n'       # values to choose from: not one either
        'subprocess.run(["ls", "git"])\ncli.out(computed)\n'  # neither
        'from subprocess import check_output as co\nco("git rev-parse HEAD", shell=True)\n', encoding="utf-8")  # 20
    assert _git_argv_outside_git(tmp_path) == [
        "git_nerve/worker/a.py:4", "git_nerve/worker/b.py:4", "git_nerve/worker/b.py:6",
        "git_nerve/worker/c.py:6", "git_nerve/worker/c.py:7", "git_nerve/worker/c.py:8", "git_nerve/worker/c.py:9",
        "git_nerve/worker/c.py:11", "git_nerve/worker/c.py:12", "git_nerve/worker/c.py:13",
        "git_nerve/worker/c.py:20"]
