"""git_nerve.record makes what dataclasses makes of the same class bodies (issue 27: the agent's commands import
no dataclasses), and the agent's commands import neither dataclasses nor typing."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from fixtures.repos import build
from git_nerve import record as rec


def _classes(deco, fld, frozen_error):
    @deco(frozen=True)
    class Frozen:
        a: int
        b: str | None
        c: tuple[str, ...] = ()
        d: str = fld(default="", compare=False)

        def twice(self) -> int:
            return 2 * self.a

    @deco
    class Plain:
        outcome: object
        rebased: bool = False
        rewritten: list = fld(default_factory=list)

    @deco
    class Own:
        x: int = 1

        def __repr__(self) -> str:
            return "own"

    return Frozen, Plain, Own, frozen_error


def _behaviour(Frozen, Plain, Own, frozen_error) -> list:
    seen = []
    f1, f2, f3 = Frozen(1, "x"), Frozen(1, "x", d="other"), Frozen(2, None, ("q",))
    seen += [repr(f1).split(".")[-1], repr(f3).split(".")[-1], f1 == f2, f1 == f3, f1 != 5, hash(f1) == hash(f2),
             f1.twice(), Frozen.c, Frozen.d, Frozen.__match_args__, __import__("copy").copy(f3) == f3]
    for attempt in (lambda: setattr(f1, "a", 3), lambda: delattr(f1, "b")):
        with pytest.raises(frozen_error) as info:
            attempt()
        seen.append((isinstance(info.value, AttributeError), str(info.value)))
    p1, p2 = Plain(None), Plain(None)
    p1.rewritten.append(1)
    p1.rebased = True
    seen += [repr(p1).split(".")[-1], p1 == p2, Plain.__hash__, p2.rewritten, Plain.rebased, hasattr(Plain, "rewritten"),
             repr(Own()), Own() == Own()]
    with pytest.raises(TypeError):
        Frozen(1)
    return seen


def test_record_makes_what_dataclass_makes():
    ours = _behaviour(*_classes(rec.record, rec.field, rec.FrozenInstanceError))
    theirs = _behaviour(*_classes(dataclasses.dataclass, dataclasses.field, dataclasses.FrozenInstanceError))
    assert ours == theirs
    Frozen = _classes(rec.record, rec.field, rec.FrozenInstanceError)[0]
    assert rec.replace(Frozen(1, "x", ("c",)), b="y") == Frozen(1, "y", ("c",))
    assert [f.name for f in rec.fields(Frozen)] == ["a", "b", "c", "d"]


@pytest.mark.parametrize("argv, where", [
    (["start"], "wt"), (["done", "--allow-empty"], "wt"), (["status", "--json"], "work"), (["show", "t1", "--json"], "work"),
    (["heartbeat"], "wt"),
])
def test_agent_commands_import_no_dataclasses_or_typing(tmp_path, argv, where):
    """Each costs a command more CPU than its work (~8 ms and ~3 ms); under load a command's wall time is its CPU
    time over its share of the cores (bench/startup.py)."""
    work = build.simple(tmp_path).work
    subprocess.run(["git", "worker", "spawn", "t1", "--no-fetch"], cwd=work, check=True, capture_output=True)
    wt = work.parent / f"{work.name}.worktrees" / "t1"
    subprocess.run(["git", "worker", "start"], cwd=wt, check=True, capture_output=True)
    code = ("import sys, atexit\n"
            "atexit.register(lambda: sys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules)) + '\\n'))\n"
            f"sys.argv = ['git-worker', *{argv!r}]\n"
            "from git_nerve.cli.entry import worker_main\nworker_main()\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=wt if where == "wt" else work, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    loaded = set(next(ln for ln in proc.stderr.splitlines() if ln.startswith("MODULES ")).split()[1:])
    assert "git_nerve.worker.lifecycle" in loaded or argv == ["heartbeat"]
    assert not {"dataclasses", "typing", "inspect", "click"} & loaded
