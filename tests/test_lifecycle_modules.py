"""The lifecycle package is a plain package (issue 42): ``import git_nerve.worker.lifecycle.X as m`` gives the
module X for every module of it, and no verb shares its name with a module (``lifecycle.merge`` is the function,
:mod:`git_nerve.worker.lifecycle.merging` its module), so neither can hide the other."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import git_nerve.worker.lifecycle as lifecycle

PACKAGE = Path(lifecycle.__file__).parent
MODULES = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")


def _in_a_fresh_python(code: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_import_as_gives_each_module_even_after_every_verb_was_used():
    """The verbs first (each imports its module), then every module by ``import ... as``: each is a module."""
    code = ("import json, types\nfrom git_nerve.worker import lifecycle\n"
            "verbs = {n: callable(getattr(lifecycle, n)) for n in lifecycle.__all__}\nfound = {}\n"
            + "".join(f"import git_nerve.worker.lifecycle.{m} as m\n"
                      f"found[{m!r}] = [isinstance(m, types.ModuleType), m.__name__]\n" for m in MODULES)
            + "print(json.dumps({'verbs': verbs, 'found': found}))\n")
    out = _in_a_fresh_python(code)
    assert out["found"] == {m: [True, f"git_nerve.worker.lifecycle.{m}"] for m in MODULES}
    assert {"spawn", "merge", "cancel", "done", "approve"} <= {n for n, is_callable in out["verbs"].items() if is_callable}


def test_the_verbs_stay_functions_once_every_module_is_imported():
    code = ("import importlib, json\nfrom git_nerve.worker import lifecycle\n"
            + "".join(f"importlib.import_module('git_nerve.worker.lifecycle.{m}')\n" for m in MODULES)
            + "print(json.dumps({v: type(getattr(lifecycle, v)).__name__ for v in ('spawn', 'merge', 'cancel', "
              "'retry', 'start', 'done')}))\n")
    assert set(_in_a_fresh_python(code).values()) == {"function"}


def test_no_name_the_package_gives_is_a_module_of_it():
    given = set(lifecycle.__all__) | set(lifecycle._LAZY)
    assert given & set(MODULES) == set()
    assert {"merging", "spawning", "cancelling"} <= set(MODULES)
