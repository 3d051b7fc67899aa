"""`git nerve knowledge sync|query|status`: the repository's own search index.

The knowledge package is imported inside each command, so other `git nerve`
commands do not pay for loading it."""

from __future__ import annotations

import sys

import click

from .. import clock
from ..errors import UsageError
from ..paths import discover
from .common import (
    CONTEXT_SETTINGS,
    NerveGroup,
    echo,
    echo_json,
    options,
    warn,
)

#: A progress bar appears only on a terminal, and only for this many files (or chunks) or more.
PROGRESS_MIN = 200


@click.group("knowledge", cls=NerveGroup, context_settings=CONTEXT_SETTINGS)
def knowledge() -> None:
    """Search this repository's code and docs (a local index, branch-aware per worktree).

    What is indexed comes from knowledge.yaml at the top of the worktree
    (include/exclude globs, .gitignore style; committed). The index lives in
    <git-common-dir>/nerve/knowledge.db, one store for the repository in which
    each worktree has its own view, so each worktree searches its own branch;
    with knowledge.yaml present, every commit refreshes it in the background.
    Optional embeddings come from [knowledge.embeddings] in nerve.toml
    (base_url, model, api_key_env: the NAME of the variable holding the key;
    or provider = "local": no network, no key, the [embeddings] extra).
    """


class _Progress:
    """click progress bars on stderr, one per stage, shown only for long runs on a terminal."""

    def __init__(self) -> None:
        self.bars: dict[str, object] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        if total < PROGRESS_MIN:
            return
        bar = self.bars.get(stage)
        if bar is None:
            bar = click.progressbar(length=total, label=stage, file=sys.stderr)
            bar.__enter__()
            self.bars[stage] = bar
        bar.update(done - bar.pos)
        if done >= total:
            self.close(stage)

    def close(self, stage: str | None = None) -> None:
        for name in [stage] if stage else list(self.bars):
            bar = self.bars.pop(name, None)
            if bar is not None:
                bar.__exit__(None, None, None)


def _skips(by_reason: dict[str, int]) -> str:
    total = sum(by_reason.values())
    detail = ", ".join(f"{n} {reason}" for reason, n in sorted(by_reason.items()) if n)
    return f"{total} skipped" + (f" ({detail})" if detail else "")


@knowledge.command("sync", context_settings=CONTEXT_SETTINGS)
@click.option("--full", is_flag=True, help="Re-read and re-chunk every file instead of only what changed.")
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def sync_command(full: bool, as_json: bool) -> None:
    """Index what changed since the last sync (by content hash).

    Files are those git does not ignore, filtered by knowledge.yaml; binary
    files and files over the size limit are skipped and counted. Prints the
    files added, changed, removed and skipped, the chunks, and the time taken.
    """
    from ..knowledge import sync as ksync

    progress = _Progress() if sys.stderr.isatty() and not as_json else None
    try:
        report = ksync.sync(
            discover(), full=full, progress=progress,
            on_wait=lambda: echo("waiting for the knowledge sync already running in this worktree...", err=True),
        )
    finally:
        if progress:
            progress.close()
    for line in report.warnings:
        warn(line)
    if as_json:
        echo_json(report.as_dict())
        return
    if report.rebuilt:
        echo("the index was built by another version of git-nerve: rebuilt from scratch")
    if report.config != "knowledge.yaml":
        echo(f"config: {report.config}")
    echo(
        f"files: {report.added} added, {report.changed} changed, {report.removed} removed, "
        f"{_skips(report.skipped)}, {report.unchanged} unchanged"
    )
    echo(f"index: {report.files} files, {report.chunks} chunks ({report.chunks_written} written) in {report.seconds:.2f}s")
    e = report.embeddings
    if e:
        echo(f"embeddings: {e['embedded']} new, {e['missing']} missing (model {e['model']})")


@knowledge.command("query", context_settings=CONTEXT_SETTINGS)
@options("nerve knowledge query")
def query_command(text: tuple[str, ...], limit: int, as_json: bool, repo: str | None, everywhere: bool) -> None:
    """Search the index; results are `path:start-end  score` with a snippet.

    Ranking is full text (BM25, identifiers split: snake_case, camelCase,
    paths), fused with embeddings by reciprocal rank fusion when nerve.toml
    configures them; the output says which. If the embedding endpoint fails
    you get a warning and the full-text ranking.
    """
    from ..knowledge import query as kquery
    from .knowledge_print import print_query

    if repo is not None and everywhere:
        raise UsageError("--repo and -g cannot be used together")
    words = " ".join(text)
    if everywhere:
        result = kquery.search_everywhere(words, limit)
    else:
        result = kquery.search(kquery.open_paths(repo), words, limit)
    print_query(result, everywhere=everywhere, as_json=as_json)


@knowledge.command("status", context_settings=CONTEXT_SETTINGS)
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def status_command(as_json: bool) -> None:
    """What is indexed here, and how stale it is."""
    from ..knowledge import status as kstatus

    s = kstatus.status(discover())
    if as_json:
        echo_json(s)
        return
    cfg = s["config"]
    echo(f"index:       {s['index']}")
    if cfg["file"]:
        include = ", ".join(cfg["include"]) if cfg["include"] is not None else "every file"
        exclude = ", ".join(cfg["exclude"]) or "nothing"
        echo(f"config:      knowledge.yaml (include {include}; exclude {exclude})")
    else:
        echo("config:      none (no knowledge.yaml: a sync indexes every tracked text file; the post-commit trigger is off)")
    if not s["indexed"]:
        echo("indexed:     nothing yet; run `git nerve knowledge sync`")
        return
    echo(f"indexed:     {s['files']} files, {s['chunks']} chunks; {_skips(s['skipped'])}")
    head = s["head"]
    at = f" at {head['at_sync'][:12]}" if head["at_sync"] else ""
    ahead = ""
    if head["commits_since"]:
        ahead = f" (HEAD is {head['commits_since']} commit{'s' if head['commits_since'] != 1 else ''} ahead)"
    elif head["at_sync"] and head["now"] and head["at_sync"] != head["now"]:
        ahead = " (HEAD has moved)"
    echo(f"last sync:   {clock.ago(s['last_sync'])} ago{at}{ahead}")
    stale = s["stale"]
    if s["config_changed"]:
        echo("stale:       knowledge.yaml changed since the last sync; run `git nerve knowledge sync`")
    elif any(stale.values()):
        echo(f"stale:       {stale['added']} added, {stale['changed']} changed, {stale['removed']} removed since the last sync")
    else:
        echo("stale:       no; the index matches the files")
    e = s["embeddings"]
    if e:
        echo(f"embeddings:  {e['embedded']} of {e['chunks']} chunks (model {e['model']} at {e['endpoint']})")
    bg = s["background"]
    state = f"running (pid {bg['running_pid']})" if bg["running_pid"] else "idle"
    last = bg["last"]
    if last:
        outcome = "ok" if last["ok"] else "FAILED"
        state += f"; last run {clock.ago(last['ts'])} ago: {outcome}: {last['message']}"
    if bg["queued_files"]:
        state += f"; {bg['queued_files']} files queued"
    echo(f"background:  {state}")


COMMANDS = [knowledge]
