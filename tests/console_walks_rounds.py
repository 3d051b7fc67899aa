"""Issue 38, what was left, as a person sees it in real Chromium: line comments that stay on their lines after the
agent's next round (outdated when the line moved or changed), and a CONFLICTED task's banner whose note reaches
the agent's thread; at 1400, 900 and 420 px, by visible text, with screenshots."""

from __future__ import annotations

from pathlib import Path

from console_support import Browser
from fixtures.repos.build import commit_file

WIDTHS = (1400, 900, 420)
ON_DEF = "keep the name feature"
ON_RETURN = "name the constant"
ON_GREET = "greet stays as it is"


def _comment(b: Browser, line: int, text: str) -> None:
    b("click", selector=f"#diff tr.line[data-new='{line}'] td.code")
    b("fill", selector="[data-testid=line-comment-text]", value=text)
    b("click", selector="[data-testid=line-comment-add]")
    b("wait_text", selector="#diff tr.comment", text=text)


def comment_then_next_round(b: Browser, gw, work: Path, wt1: Path) -> None:
    """Three line comments sent with request changes; the agent's next round moves one line and rewrites another."""
    b("wait_text", selector="#diff tr.line.add", text="return 42")
    _comment(b, 1, ON_DEF)
    _comment(b, 2, ON_RETURN)
    b("click", selector="#files li[data-path='src/app.py'] a")
    b("wait_text", selector="[data-testid=diff-path]", text="src/app.py")
    _comment(b, 1, ON_GREET)
    b("click", selector="#act-request_changes")
    b("wait_text", selector="#result", text="changes requested: t1 is WORKING (3 line comments sent)")
    # before the next round the sent comments are on their lines already (no longer drafts)
    b("wait_text", selector="#diff tr.line[data-new='1'] + tr[data-testid=earlier-comment]", text=ON_GREET)
    # all files on one page: two files marked viewed (folded away)
    b("click", selector="[data-testid=stacked]")
    for path in ("feature.txt", "src/app.py"):
        b("wait", selector=f"#diff details[data-path='{path}'] table.diff")
        b("click", selector=f"#diff details[data-path='{path}'] [data-testid=viewed]")
        b("wait_fn", js=f"!document.querySelector(\"#diff details[data-path='{path}']\").open")
    commit_file(wt1, "feature.txt", "ANSWER = 42\n\n\ndef feature():\n    return ANSWER\n", "t1: name the constant")
    assert gw("done", wt1).code == 0
    b("wait", selector="tr.worker[data-task=t1][data-state=IN_REVIEW]", timeout=20_000)
    # the file the round changed is no longer "viewed" (open again); the one it left alone stays folded
    b("wait_text", selector="#diff details[data-path='feature.txt'] tr.line.add", text="return ANSWER")
    want = '{"feature.txt":[false,true],"logo.bin":[false,true],"src/app.py":[true,false]}'
    try:  # each file's diff (and its mark) arrives on its own
        b("wait_fn", js=f"JSON.stringify({VIEWED}) === '{want}'")
    except AssertionError:
        raise AssertionError(b("eval", js=VIEWED)) from None
    b("click", selector="#diff details[data-path='src/app.py'] [data-testid=viewed]")  # unfolded to read its comment


#: per file of the stacked view: [its "viewed" mark, open]
VIEWED = ("Object.fromEntries([...document.querySelectorAll('#diff details.stacked')].map(d => [d.dataset.path,"
          " [d.querySelector('[data-testid=viewed]').checked, d.open]]))")


def _on(path: str, line: int) -> str:
    return f"#diff details[data-path='{path}'] tr.line[data-new='{line}'] + tr[data-testid=earlier-comment]"


def comments_stay_on_their_lines(b: Browser, shots: Path) -> None:
    """All files on one page, then "since your last review": each comment on the line it was made on, where that
    line is now; outdated when it moved or changed, not when it stayed."""
    if b("eval", js="document.querySelector('[data-testid=stacked]').getAttribute('aria-pressed')") != "true":
        b("click", selector="[data-testid=stacked]")
    for width in WIDTHS:
        b("viewport", width=width, height=900)
        b("wait_text", selector=_on("feature.txt", 4), text=ON_DEF)  # "def feature():" moved from line 1 to 4
        b("wait_text", selector=_on("feature.txt", 4) + " [data-testid=outdated]", text="outdated")
        b("wait_text", selector=_on("feature.txt", 4), text="the line moved (it was line 1)")
        b("wait_text", selector=_on("feature.txt", 5), text=ON_RETURN)  # "return 42" rewritten as "return ANSWER"
        b("wait_text", selector=_on("feature.txt", 5), text="the line changed since")
        b("wait_text", selector=_on("src/app.py", 1), text=ON_GREET)  # unchanged: on its line, not outdated
        assert "outdated" not in b("text", selector=_on("src/app.py", 1))
        assert max(b.overflow().values()) <= 0, (width, b.overflow())
        # the board's radar marks stay small marks (the banner's style is its own)
        marks = b("eval", js="[...document.querySelectorAll('tr.worker .mark')].map(e => e.getBoundingClientRect().height)")
        assert marks and all(h < 20 for h in marks), (width, marks)
        b("screenshot", path=str(shots / f"comments-all-files-{width}.png"))
        b("click", selector="[data-testid=since-review]")
        b("wait_text", selector="[data-testid=files-count]", text="1 file changed since your last review")
        b("wait_text", selector=_on("feature.txt", 5), text=ON_RETURN)
        b("wait_text", selector=_on("feature.txt", 4) + " [data-testid=outdated]", text="outdated")
        assert b("count", selector="#diff details[data-path='src/app.py']") == 0
        b("screenshot", path=str(shots / f"comments-since-review-{width}.png"))
        b("click", selector="[data-testid=since-review]")
        b("wait_text", selector="[data-testid=files-count]", text="3 files changed against main")
    # a "viewed" mark follows the file's content, not the view: marked in "since your last review", kept in the whole
    b("click", selector="[data-testid=since-review]")
    b("wait_text", selector="[data-testid=files-count]", text="1 file changed since your last review")
    b("wait", selector="#diff details[data-path='feature.txt'] table.diff")
    b("click", selector="#diff details[data-path='feature.txt'] [data-testid=viewed]")
    b("click", selector="[data-testid=since-review]")
    b("wait_text", selector="[data-testid=files-count]", text="3 files changed against main")
    b("wait", selector="#diff details[data-path='src/app.py'] table.diff")
    b("wait_fn", js="document.querySelector(\"#diff details[data-path='feature.txt'] [data-testid=viewed]\").checked")
    b("viewport", width=1500, height=1000)


def conflict_banner(b: Browser, gw, work: Path, wt2: Path, shots: Path) -> None:
    """t1 merged; t2 (same line) runs a command, then `done` stops on the rebase: CONFLICTED. Its banner names the
    file and the lines, prints the CLI's recipe, and "tell the agent to rebase" puts the note in its thread."""
    assert gw("approve t1", work).code == 0 and gw("merge t1", work).code == 0
    assert gw(["run", "--", "true"], wt2).code == 0
    b("eval", js="location.hash = '#/'")
    b("wait_text", selector="tr.worker[data-task=t2]", text="run true exited 0 at")  # a finished run says so
    assert "running" not in b("text", selector="tr.worker[data-task=t2]")
    done = gw("done", wt2)
    assert done.code == 6, done.err
    assert gw("conflicts --refresh", work).code in (0, 1)
    b("eval", js="location.hash = '#/task/t2/thread'")
    banner = "[data-testid=conflict-banner]"
    for width in WIDTHS:
        b("viewport", width=width, height=900)
        b("wait_text", selector=banner, text="rebase conflict with main; t2 is CONFLICTED")
        b("wait_text", selector=f"{banner} [data-testid=conflict-files]", text="Conflicting files: src/app.py")
        b("wait_text", selector=f"{banner} [data-testid=conflict-line]", text="conflict with main (the integration branch)")
        b("wait_text", selector=f"{banner} [data-testid=conflict-recipe]", text="git worker done --skip-rebase")
        assert "3. git rebase --continue" in b("text", selector=f"{banner} [data-testid=conflict-recipe]")
        assert all(step in done.err for step in ("git rebase --continue", "git worker done --skip-rebase"))
        assert max(b.overflow().values()) <= 0, (width, b.overflow())
        if width == WIDTHS[0]:
            b("click", selector=f"{banner} [data-testid=tell-rebase]")
            b("wait_text", selector="#result", text="note for t2")
        b("wait_text", selector="#told li", text="rebase onto main and resolve the conflicts")
        b("wait_text", selector="#thread .round.human", text="Your branch conflicts with main in src/app.py")
        b("screenshot", path=str(shots / f"conflict-banner-{width}.png"))
    b("viewport", width=1500, height=1000)
