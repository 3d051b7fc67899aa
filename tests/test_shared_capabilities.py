"""What a shared-state backend can do beyond the interface is declared on it (issue 42): ``holds_claims``,
``rides_push``, ``locks_claims``, ``queues_merges``, ``watches`` on :class:`git_nerve.shared.SharedState`, which
the lifecycle, the merge queue and `sync --watch` ask, never ``hasattr`` / ``getattr`` with a default."""

from __future__ import annotations

import ast
from pathlib import Path

from fixtures.repos import build
from git_nerve.shared import RemoteStore, SharedState, open_state
from git_nerve.shared.gitremote import GitRemoteState
from git_nerve.shared.local import LocalState
from git_nerve.shared.postgres import PostgresState

ROOT = Path(__file__).resolve().parents[1]
CAPABILITIES = ("active", "holds_claims", "rides_push", "locks_claims", "queues_merges", "watches")
#: a capability -> the method only a backend declaring it has
METHODS = {"holds_claims": "hold", "queues_merges": "hold_next", "watches": "watch"}


def test_each_backend_declares_what_it_can_do():
    table = {cls.__name__: [c for c in CAPABILITIES if getattr(cls, c)]
             for cls in (LocalState, GitRemoteState, PostgresState)}
    assert table == {
        "LocalState": [],
        "GitRemoteState": ["active", "holds_claims", "rides_push", "watches"],
        "PostgresState": ["active", "holds_claims", "locks_claims", "queues_merges", "watches"],
    }
    assert all(issubclass(cls, SharedState) for cls in (LocalState, GitRemoteState, PostgresState))
    assert issubclass(GitRemoteState, RemoteStore) and issubclass(PostgresState, RemoteStore)


def test_a_backend_has_the_method_of_a_capability_exactly_when_it_declares_it():
    for cls in (LocalState, GitRemoteState, PostgresState):
        for capability, method in METHODS.items():
            own = getattr(cls, method) is not getattr(SharedState, method)
            assert own == getattr(cls, capability), (cls.__name__, capability, method)


def test_a_repository_without_shared_mode_is_the_local_backend_and_refuses_watch(repo, gn):
    common = Path(build.git(repo.work, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    state = open_state(common)
    assert isinstance(state, LocalState) and not any(getattr(state, c) for c in CAPABILITIES)
    res = gn(["sync", "--watch"], repo.work)
    assert res.code == 2, res
    assert res.err.startswith("error: sync --watch keeps the view of several machines fresh"), res


#: what the backends and their holds answer to: asked with hasattr / getattr(..., default) they were duck-typed
_INTERFACE = {"active", "claim", "hold", "hold_next", "watch", "ride", "update", "record", "remote", "instance",
              "_instance", "prepare_with_push", "landed", "lost", "learn", "take", "takeable", "sync", "freshness",
              *CAPABILITIES}


def _duck_typed(root: Path) -> list[str]:
    found = []
    for path in sorted((root / "git_nerve").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("hasattr", "getattr")
                    and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                    and node.args[1].value in _INTERFACE):
                found.append(f"{path.relative_to(root).as_posix()}:{node.lineno} {node.func.id} {node.args[1].value}")
    return found


def test_nothing_asks_a_backend_what_it_can_do_by_its_attributes():
    assert _duck_typed(ROOT) == [], "ask the capability the backend declares (git_nerve/shared/__init__.py)"


def test_the_duck_typing_rule_can_fail(tmp_path):
    (tmp_path / "git_nerve").mkdir()
    (tmp_path / "git_nerve" / "m.py").write_text("def f(state):\n    return hasattr(state, 'hold_next')\n")
    assert _duck_typed(tmp_path) == ["git_nerve/m.py:2 hasattr hold_next"]
