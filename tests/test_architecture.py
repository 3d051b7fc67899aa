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
