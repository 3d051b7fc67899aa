"""Splitting a file into chunks at natural boundaries. Pure (no I/O).

* Markdown: one chunk per section (a heading and what follows, up to the next
  heading of any level); the chunk's title is the heading path
  (``Guide > Install``). A heading with nothing under it joins the next section.
* Code: one chunk per top-level definition or block. A new chunk starts at a
  line in column 0, outside brackets and strings, that follows a blank line,
  an indented line or a closing bracket; comments and decorators directly
  above a definition stay with it, and pieces of under three lines join the
  next one (the last one joins the one before). This one rule fits Python, the brace languages and Ruby alike.
* Anything else: windows of lines with an overlap.

A section or definition longer than :data:`MAX_LINES` is cut into overlapping
windows; no chunk holds more than :data:`MAX_CHARS` characters. Lines are
numbered from 1; ``end_line`` is inclusive; blank lines at either end of a
chunk are left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from itertools import pairwise

#: A definition or section up to this many lines stays one chunk.
MAX_LINES = 120
#: Window size and overlap (lines) for what is longer, and for plain text.
WINDOW, OVERLAP = 60, 10
TEXT_WINDOW, TEXT_OVERLAP = 40, 8
#: No chunk's text is longer than this (minified files, giant lines).
MAX_CHARS = 8000
#: Pieces of code with fewer non-blank lines than this join the next chunk.
MIN_CODE_LINES = 3

from .kinds import CODE_EXT, HASH_COMMENT_EXT, MARKDOWN_EXT, kind_of  # noqa: F401  (re-exported)

TRIPLE_QUOTE_EXT = frozenset({".py", ".pyi", ".pyw"})


@dataclass(frozen=True)
class Chunk:
    start_line: int
    end_line: int
    title: str  #: heading path (Markdown) or qualified name of the definition (code)
    text: str
    symbol: str = ""  #: the definition's own name (code parsed by tree-sitter)
    doc: str = ""  #: its docstring or the comment above it


def split_lines(text: str) -> list[str]:
    """Lines as editors count them (``\\n`` or ``\\r\\n``; a final newline opens no extra line)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln.removesuffix("\r") for ln in lines]


def chunk_file(path: str, text: str) -> list[Chunk]:
    """The chunks of one file's text."""
    lines = split_lines(text)
    kind = kind_of(path)
    if kind == "code":
        parsed = syntax_chunks(path, text, lines)
        if parsed is not None:
            return parsed
    if kind == "markdown":
        blocks = markdown_blocks(lines)
        size, overlap = WINDOW, OVERLAP
    elif kind == "code":
        ext = path[path.rfind("."):].lower()
        blocks = code_blocks(lines, hash_comments=ext in HASH_COMMENT_EXT, triple_quotes=ext in TRIPLE_QUOTE_EXT)
        size, overlap = WINDOW, OVERLAP
    else:
        single = len(lines) <= TEXT_WINDOW + TEXT_WINDOW // 2
        blocks = [(0, len(lines), "")]
        size, overlap = (len(lines) or 1, 0) if single else (TEXT_WINDOW, TEXT_OVERLAP)
    chunks: list[Chunk] = []
    for start, end, title in blocks:
        if end - start > MAX_LINES or (kind == "text" and end - start > size):
            spans = windows(lines, start, end, size, overlap)
        else:
            spans = windows(lines, start, end, end - start, 0)
        for a, b in spans:
            while a < b and not lines[a].strip():
                a += 1
            while b > a and not lines[b - 1].strip():
                b -= 1
            if a < b:
                chunks.append(Chunk(a + 1, b, title, "\n".join(lines[a:b])[:MAX_CHARS]))
    return chunks


_BRACKETS_ONLY = re.compile(r"^[\s(){}\[\];,]*$")


def syntax_chunks(path: str, text: str, lines: list[str]) -> list[Chunk] | None:
    """Chunks along the definitions tree-sitter finds (see :mod:`.syntax`); None without a grammar."""
    from .syntax import definitions, spans

    ext = path[path.rfind("."):].lower()
    defs = definitions(ext, text.encode("utf-8", "surrogatepass"))
    if defs is None:
        return None
    chunks: list[Chunk] = []
    for start, end, d in spans(defs, len(lines)):
        if chunks and end - start <= 3 and _BRACKETS_ONLY.match("".join(lines[start:end])):  # a closing brace joins the chunk before
            last = max((n for n in range(start, end) if lines[n].strip()), default=None)
            if last is not None and last + 1 > chunks[-1].end_line:
                prev = chunks[-1]
                chunks[-1] = replace(prev, end_line=last + 1, text="\n".join(lines[prev.start_line - 1:last + 1])[:MAX_CHARS])
            continue
        title, symbol, doc = (d.qualname, d.symbol, d.doc) if d is not None else ("", "", "")
        size = WINDOW if end - start > MAX_LINES else end - start
        for a, b in windows(lines, start, end, size, OVERLAP if end - start > MAX_LINES else 0):
            while a < b and not lines[a].strip():
                a += 1
            while b > a and not lines[b - 1].strip():
                b -= 1
            if a < b:
                chunks.append(Chunk(a + 1, b, title, "\n".join(lines[a:b])[:MAX_CHARS], symbol, doc[:MAX_CHARS]))
    return chunks


def windows(lines: list[str], start: int, end: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """Half-open line spans covering ``lines[start:end]``: at most ``size`` lines and about
    :data:`MAX_CHARS` characters each, consecutive spans sharing up to ``overlap`` lines."""
    if end - start <= max(size, 1) and sum(map(len, lines[start:end])) + (end - start) <= MAX_CHARS:
        return [(start, end)] if end > start else []  # the common case: one span, without the line-by-line walk
    spans: list[tuple[int, int]] = []
    i = start
    while i < end:
        j, chars = i, 0
        while j < min(end, i + max(size, 1)):
            chars += len(lines[j]) + 1
            if chars > MAX_CHARS and j > i:
                break
            j += 1
        spans.append((i, j))
        if j >= end:
            break
        i = max(j - min(overlap, (j - i) // 4), i + 1)
    return spans


# -- Markdown ---------------------------------------------------------------------------------------

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_NOT_SETEXT_TEXT = re.compile(r"^ {0,3}(?:[-*+>]|\d+[.)]|#|`{3}|~{3}|\||<)")


def markdown_blocks(lines: list[str]) -> list[tuple[int, int, str]]:
    """(start, end, heading path) of each section; the text before the first heading has no title."""
    heads: list[tuple[int, int, str, int]] = []  # (line, level, title, lines the heading takes)
    fence: str | None = None
    i = _frontmatter_end(lines)
    while i < len(lines):
        line = lines[i]
        fm = _FENCE.match(line)
        if fence is not None:
            if fm and fm.group(1)[0] == fence[0] and len(fm.group(1)) >= len(fence) and not line.strip()[len(fm.group(1)):].strip():
                fence = None
        elif fm:
            fence = fm.group(1)
        elif (m := _ATX.match(line)) is not None:
            heads.append((i, len(m.group(1)), (m.group(2) or "").strip(), 1))
        elif (
            i + 1 < len(lines)
            and line.strip()
            and (i == 0 or not lines[i - 1].strip())
            and not _NOT_SETEXT_TEXT.match(line)
            and (s := _SETEXT.match(lines[i + 1])) is not None
        ):
            heads.append((i, 1 if s.group(1)[0] == "=" else 2, line.strip(), 2))
            i += 1
        i += 1

    sections: list[list] = []  # [start, end, title, has body]
    if not heads or heads[0][0] > 0:
        first = heads[0][0] if heads else len(lines)
        sections.append([0, first, "", True])
    stack: list[tuple[int, str]] = []
    for n, (line_no, level, title, taken) in enumerate(heads):
        end = heads[n + 1][0] if n + 1 < len(heads) else len(lines)
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        path = " > ".join(t for _, t in stack if t)
        has_body = any(ln.strip() for ln in lines[line_no + taken:end])
        sections.append([line_no, end, path, has_body])

    merged: list[tuple[int, int, str]] = []
    carry: int | None = None
    for n, (start, end, title, has_body) in enumerate(sections):
        if not has_body and n + 1 < len(sections):
            carry = start if carry is None else carry
            continue
        merged.append((start if carry is None else carry, end, title))
        carry = None
    return merged


def _frontmatter_end(lines: list[str]) -> int:
    """The first line after a YAML front matter block (0 when there is none)."""
    if lines and lines[0].strip() == "---":
        for i in range(1, len(lines)):
            if lines[i].strip() in ("---", "..."):
                return i + 1
    return 0


# -- code ---------------------------------------------------------------------------------------------

_STRINGS = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`(?:\\.|[^`\\])*`')
_LINE_COMMENT = re.compile(r"//.*$|/\*.*?\*/")
_HASH_COMMENT = re.compile(r"#.*$")
_CLOSE = ")]}"
_DEF = re.compile(
    r"^(?:export\s+|pub(?:\([^)]*\))?\s+|public\s+|private\s+|protected\s+|static\s+|async\s+|default\s+|abstract\s+|final\s+)*"
    r"(?:def|class|function|func|fn|struct|enum|trait|interface|type|impl|module|object|record|namespace|macro|const|let|var|package|import)\b"
)
_TITLE = re.compile(
    r"\b(?:def|class|function|func|fn|struct|enum|trait|interface|type|impl|module|object|record|namespace|macro)"
    r"\s*\*?\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)"
)
_ASSIGNED_FUNCTION = re.compile(r"\b(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*(?::[^=]+)?=\s*(?:async\s*)?(?:function\b|\()")
_CALL_LIKE = re.compile(r"(?<![\w:~])([A-Za-z_][\w:~]*)\s*\(")
#: Boundaries and names are read from this many characters of a line (regexes stay linear on giant lines).
SCAN_CHARS = 2000
_COMMENT_START = ("#", "//", "/*", "*", "--", ";", "@")


def code_blocks(lines: list[str], *, hash_comments: bool, triple_quotes: bool = False) -> list[tuple[int, int, str]]:
    """(start, end, name) of each top-level block of code (see the module docstring)."""
    starts = [0]
    depth = 0
    in_triple: str | None = None
    prev_blank = prev_indented = prev_closed = False
    for i, line in enumerate(lines):
        stripped = line.strip()
        if in_triple is not None:
            if line.count(in_triple) % 2 == 1:
                in_triple = None
            prev_blank = prev_closed = False
            prev_indented = bool(stripped) and line[0].isspace()
            continue
        if not stripped:
            prev_blank = True
            continue
        col0 = not line[0].isspace()
        if (
            i > 0
            and col0
            and stripped[0] not in _CLOSE
            and (prev_blank or prev_indented or prev_closed)
            and (depth <= 0 or _DEF.match(stripped))
        ):
            starts.append(i)
            depth = 0
        if triple_quotes and ('"""' in line or "'''" in line):
            for quote in ('"""', "'''"):
                if line.count(quote) % 2 == 1:
                    in_triple = quote
                    break
        code = line[:SCAN_CHARS]
        if '"' in code or "'" in code or "`" in code:
            code = _STRINGS.sub("", code)
        if "/" in code:
            code = _LINE_COMMENT.sub("", code)
        if hash_comments and "#" in code:
            code = _HASH_COMMENT.sub("", code)
        before = depth
        opened = code.count("(") + code.count("[") + code.count("{")
        closed = code.count(")") + code.count("]") + code.count("}")
        depth = max(0, depth + opened - closed)
        prev_blank, prev_indented, prev_closed = False, not col0, before > 0 and depth == 0
    starts.append(len(lines))
    return [(a, b, code_title(lines[a:b])) for a, b in _merge_small(lines, starts)]


def _merge_small(lines: list[str], starts: list[int]) -> list[tuple[int, int]]:
    """The blocks between ``starts``, a block of fewer than MIN_CODE_LINES code lines joined to its neighbour."""
    spans = [(a, b) for a, b in pairwise(starts) if b > a]
    merged: list[tuple[int, int]] = []
    pending: int | None = None
    for n, (a, b) in enumerate(spans):
        start = a if pending is None else pending
        small = sum(1 for ln in lines[a:b] if ln.strip()) < MIN_CODE_LINES
        if small and n + 1 < len(spans) and spans[n + 1][1] - start <= MAX_LINES:
            pending = start
            continue
        if small and merged and b - merged[-1][0] <= MAX_LINES:  # a small tail joins the chunk before it
            merged[-1] = (merged[-1][0], b)
        else:
            merged.append((start, b))
        pending = None
    return merged


def code_title(lines: list[str]) -> str:
    """The name a block of code defines (its first top-level definition), else ''."""
    top = [ln[:SCAN_CHARS].strip() for ln in lines if ln.strip() and not ln[0].isspace() and not ln.lstrip().startswith(_COMMENT_START)]
    for line in top:
        m = _TITLE.search(line) or _ASSIGNED_FUNCTION.search(line)
        if m:
            return m.group(1)
    m = _CALL_LIKE.search(top[0]) if top else None
    return m.group(1) if m else ""
