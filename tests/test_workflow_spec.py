"""Authoring: structure checks, the develop moderator, loading workflows, `git nerve validate`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from pydantic import BaseModel

from fixtures.agents import install
from git_nerve.bus.rounds import Round
from git_nerve.errors import UsageError
from git_nerve.workflow import END, Role, StartFrame, Thread, Workflow, fail
from git_nerve.workflow.builtin import develop
from git_nerve.workflow.loader import available, load
from git_nerve.workflow.spec import problems
from git_nerve.workflow.validate import validate


class Done(BaseModel):
    done: bool


def echo_adapter(prompt, ctx):
    return '```json\n{"done": true}\n```'


def wf(**kw) -> Workflow:
    base = {"name": "w", "roles": {"worker": Role(echo_adapter, "Do it.", Done)}, "moderator": lambda t: END}
    base.update(kw)
    return Workflow(**base)


def test_a_well_formed_workflow_has_no_problems():
    assert problems(wf()) == []
    assert problems(develop.workflow) == []


@pytest.mark.parametrize(
    "roles, expected",
    [
        ({"worker": Role(None, "p", Done)}, "role worker: has no adapter"),
        ({"worker": Role("claude", "p", Done)}, "role worker: its adapter is not callable (str)"),
        ({"worker": Role(echo_adapter, "  ", Done)}, "role worker: its prompt is empty"),
        ({"worker": Role(echo_adapter, lambda: "x", Done)}, "role worker: its prompt function must take (start, rounds)"),
        ({"worker": Role(echo_adapter, "p", dict)}, "role worker: its meta must be a pydantic model class"),
        ({"Worker!": Role(echo_adapter, "p", Done)}, "role Worker!: role names are lowercase"),
        ({"human": Role(echo_adapter, "p", Done)}, "role human: the role name 'human' is reserved"),
        ({"worker": "claude"}, "role worker: not a Role but str"),
        ({}, "the workflow has no roles"),
    ],
)
def test_structural_problems_are_reported_one_per_line(roles, expected):
    found = problems(wf(roles=roles))
    assert any(p.startswith(expected) for p in found), found


def test_meta_models_may_not_use_the_runners_metadata_names():
    class Clash(BaseModel):
        adapter: str
        duration_s: float
        ok: bool

    (problem,) = problems(wf(roles={"worker": Role(echo_adapter, "p", Clash)}))
    assert problem == "role worker: its meta model uses reserved field names: adapter, duration_s"


def test_other_structural_problems():
    assert problems(wf(moderator="coder")) == ["the moderator is not callable"]
    assert problems(wf(max_rounds=0)) == ["max_rounds must be a positive integer, not 0"]
    assert problems("develop") == ["not a Workflow object but str"]


# -- the develop moderator -----------------------------------------------------------------------


START = StartFrame("t1", "develop", "Add a greeting", "/w", "feat/t1", "refs/heads/main")


def thread(*rounds: tuple[str, dict]) -> Thread:
    return Thread(START, tuple(Round(i + 1, 0.0, role, meta, "") for i, (role, meta) in enumerate(rounds)))


def test_develop_moderator_walks_coder_tester_reviewer():
    m = develop.moderator
    assert m(thread()) == "coder"
    assert m(thread(("coder", {"summary": "x"}))) == "tester"
    assert m(thread(("coder", {}), ("tester", {"passed": False}))) == "coder"
    assert m(thread(("coder", {}), ("tester", {"passed": True}))) == "reviewer"
    assert m(thread(("coder", {}), ("tester", {"passed": True}), ("reviewer", {"approved": False}))) == "coder"
    assert m(thread(("coder", {}), ("tester", {"passed": True}), ("reviewer", {"approved": True}))) is END


def test_develop_moderator_ignores_other_writers_and_ends_on_a_failed_agent():
    m = develop.moderator
    assert m(thread(("coder", {}), ("human", {"note": True}))) == "tester"
    verdict = m(thread(("coder", {"error": "timeout", "timeout_s": 300})))
    assert verdict == fail("the coder failed (timeout)") and not verdict.ok
    verdict = m(thread(("coder", {}), ("tester", {"extract_error": "no fenced block"})))
    assert not verdict.ok and "could not be read" in verdict.reason


def test_develop_prompts_point_at_the_thread_on_a_second_pass():
    first = develop.coder_prompt(START, ())
    assert "Add a greeting" in first and "another pass" not in first
    rounds = (Round(1, 0.0, "coder", {}, ""), Round(2, 0.0, "tester", {"passed": False}, "test_x failed"))
    again = develop.coder_prompt(START, rounds)
    assert "round #2" in again and "git nerve thread" in again
    assert "git diff refs/heads/main...HEAD" in develop.reviewer_prompt(START, rounds)


def test_thread_helpers():
    t = thread(("coder", {}), ("tester", {"passed": False}), ("coder", {"error": "timeout"}), ("human", {}))
    assert t.last().role == "human" and t.last("tester").round == 2
    assert t.count("coder") == 2 and [r.round for r in t.of("coder")] == [1, 3]
    assert Thread.failed(t.rounds[2]) and not Thread.failed(t.rounds[1])
    assert t.last("reviewer") is None


# -- loading ---------------------------------------------------------------------------------------


WORKFLOW_FILE = """
from pydantic import BaseModel
from git_nerve.workflow import END, Role, Workflow
from git_nerve.workflow.adapters import create_exec


class Shipped(BaseModel):
    shipped: bool


workflow = Workflow(
    name="{name}",
    roles={{"shipper": Role(create_exec(["{binary}"]), "Ship it.", Shipped)}},
    moderator=lambda thread: "shipper" if not thread.rounds else END,
)
"""


def write_workflow(root, name, text=None, binary="claude", *, trusted=True):
    """A repository's workflow file, written by the person (trusted, as `git nerve trust` would: issue 35)."""
    from git_nerve import trust
    from git_nerve.paths import discover

    path = root / ".nerve" / "workflows" / f"{name}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text if text is not None else WORKFLOW_FILE.format(name=name, binary=binary), encoding="utf-8")
    if not (root / ".git").exists():
        subprocess.run(["git", "init", "-q", str(root)], check=True)
    if trusted:
        trust.trust(discover(root).common_dir, root)
    return path


def test_repository_workflows_load_and_win_over_built_ins(tmp_path):
    assert available(tmp_path) == ["develop"]
    assert load("develop", tmp_path).source == "built-in:develop"
    path = write_workflow(tmp_path, "develop")
    write_workflow(tmp_path, "ship")
    own = load("develop", tmp_path)
    assert own.source == str(path) and list(own.roles) == ["shipper"]
    assert available(tmp_path) == ["develop", "ship"]


def test_a_module_may_provide_a_function_building_the_workflow(tmp_path):
    write_workflow(tmp_path, "lazy", WORKFLOW_FILE.format(name="lazy", binary="x").replace("workflow = Workflow(", "workflow = lambda: Workflow(", 1))
    assert load("lazy", tmp_path).name == "lazy"


def test_installed_modules_load_by_reference(tmp_path, monkeypatch):
    (tmp_path / "team_flows").mkdir()
    (tmp_path / "team_flows" / "__init__.py").write_text("")
    (tmp_path / "team_flows" / "review.py").write_text(WORKFLOW_FILE.format(name="review", binary="x").replace("workflow =", "flow ="))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "team_flows", raising=False)
    assert load("team_flows.review:flow", None).name == "review"
    with pytest.raises(UsageError, match="has no attribute 'nope'"):
        load("team_flows.review:nope", None)
    with pytest.raises(UsageError, match="cannot import no_such_pkg"):
        load("no_such_pkg.mod:flow", None)


@pytest.mark.parametrize(
    "text, message",
    [
        ("def broken(:\n", "SyntaxError"),
        ("x = 1\nraise RuntimeError('boom')\n", "RuntimeError: boom (line 2)"),
        ("x = 1\n", "defines no `workflow`"),
        ("workflow = 42\n", "gives a int, not a git_nerve.workflow.Workflow"),
    ],
)
def test_broken_workflow_files_are_one_clear_error(tmp_path, text, message):
    write_workflow(tmp_path, "bad", text)
    with pytest.raises(UsageError) as info:
        load("bad", tmp_path)
    assert message in info.value.message


def test_unknown_and_invalid_names(tmp_path):
    with pytest.raises(UsageError, match="unknown workflow 'nope'.*available: develop"):
        load("nope", tmp_path)
    with pytest.raises(UsageError, match="invalid workflow name"):
        load("../etc/passwd", tmp_path)


# -- validate ------------------------------------------------------------------------------------------


def test_validate_reports_missing_binaries_one_line_each(tmp_path):
    write_workflow(tmp_path, "ship", binary="no-such-shipper")
    report = validate(tmp_path)
    assert report.workflows == ["ship"]
    assert [p.line() for p in report.problems] == ["ship: role shipper: adapter no-such-shipper: `no-such-shipper` is not on PATH"]


def test_validate_checks_the_built_ins_when_the_repository_has_none(tmp_path, monkeypatch):
    report = validate(tmp_path)
    assert report.workflows == ["develop"]
    assert len(report.problems) == 3  # coder, tester, reviewer: no `claude` on this PATH
    install(monkeypatch, tmp_path / "fakes")
    report = validate(tmp_path)
    assert len(report.problems) == 3 and "no Anthropic credentials" in report.problems[0].message
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")  # the user's login: validate checks it is there
    report = validate(tmp_path)
    assert report.ok and report.roles == 3


def test_validate_checks_the_extract_provider(tmp_path, monkeypatch):
    monkeypatch.delenv("NERVE_EXTRACT_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    install(monkeypatch, tmp_path / "fakes")
    (tmp_path / "nerve.toml").write_text(
        '[extract]\nprovider = "llm"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\napi_key_env = "NERVE_EXTRACT_KEY"\n'
    )
    (problem,) = validate(tmp_path).problems
    assert problem.line() == "nerve.toml: extract provider llm: environment variable NERVE_EXTRACT_KEY (the API key) is not set"
    monkeypatch.setenv("NERVE_EXTRACT_KEY", "k")
    assert validate(tmp_path).ok
    (tmp_path / "nerve.toml").write_text('[extract]\nprovider = "llm"\n')
    (problem,) = validate(tmp_path).problems
    assert problem.where == "nerve.toml" and "needs base_url and model" in problem.message


def test_validate_reports_workflows_that_do_not_load(tmp_path):
    write_workflow(tmp_path, "bad", "raise ValueError('nope')\n")
    write_workflow(tmp_path, "ship", binary="sh")
    report = validate(tmp_path)
    assert report.workflows == ["bad", "ship"]
    (problem,) = report.problems
    assert problem.where == "bad" and "ValueError: nope" in problem.message


def test_validate_command(repo, gn, monkeypatch, tmp_path):
    work = repo.work
    write_workflow(work, "ship", binary="no-such-shipper")
    (work / "src").mkdir(exist_ok=True)
    res = gn("validate", work / "src")  # from a subdirectory
    assert res.code == 1
    assert res.out.strip() == "ship: role shipper: adapter no-such-shipper: `no-such-shipper` is not on PATH"
    res = gn("validate --json", work)
    data = json.loads(res.out)
    assert res.code == 1 and data["ok"] is False and data["problems"][0]["where"] == "ship: role shipper"
    write_workflow(work, "ship", binary="sh")
    res = gn("validate", work)
    assert res.code == 0 and res.out.startswith("ok: 1 workflow(s), 1 role(s): ship")
    install(monkeypatch, tmp_path / "fakes")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    res = gn("validate develop ship", work)
    assert res.code == 0, res
    res = gn("validate nope", work)
    assert res.code == 1 and res.out.startswith("nope: unknown workflow 'nope'")
