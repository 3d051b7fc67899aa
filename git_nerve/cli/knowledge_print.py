"""What `git nerve knowledge query` prints (click-free: the command and :mod:`.entry`'s fast path share it)."""

from __future__ import annotations

from . import plain


def print_query(result, *, everywhere: bool, as_json: bool) -> None:
    """The warnings on stderr, then the results: JSON, or ``path:start-end  score`` and a snippet each."""
    for text in result.warnings:
        plain.warning(text)
    if as_json:
        plain.json_out(result.as_dict())
        return
    if not result.hits:
        plain.line("no results")
    for hit in result.hits:
        where = f"{hit.repo}/{hit.path}" if everywhere else hit.path
        plain.line(f"{plain.paint(where, fg='cyan')}:{hit.start_line}-{hit.end_line}  {hit.score:.4g}")
        if hit.snippet:
            plain.line(f"    {hit.snippet}")
    plain.line(plain.paint(f"(ranked by {result.ranking_description})", dim=True))
