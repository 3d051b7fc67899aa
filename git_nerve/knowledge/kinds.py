"""What kind of file a path names, from its extension (pure; no `re`, no dataclasses: a query ranks by it, and a
query is an agent's hot path). :mod:`.chunking` cuts by it, :mod:`.prior` ranks by it."""

from __future__ import annotations

MARKDOWN_EXT = frozenset({".md", ".markdown", ".mdx", ".mkd", ".mdown"})
HASH_COMMENT_EXT = frozenset({".py", ".pyi", ".pyw", ".rb", ".sh", ".bash", ".zsh", ".pl", ".pm", ".r", ".jl", ".ex", ".exs", ".nim", ".cr", ".tcl"})
CODE_EXT = HASH_COMMENT_EXT | frozenset(
    {
        ".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts", ".vue", ".svelte", ".go", ".rs", ".java",
        ".kt", ".kts", ".scala", ".groovy", ".gradle", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".hxx",
        ".m", ".mm", ".cs", ".fs", ".swift", ".dart", ".php", ".lua", ".erl", ".hs", ".ml", ".mli", ".clj",
        ".cljs", ".zig", ".v", ".sol", ".sql", ".proto", ".thrift", ".graphql", ".tf", ".hcl", ".nix", ".ps1",
        ".css", ".scss", ".less",
    }
)


def kind_of(path: str) -> str:
    """'markdown', 'code' or 'text', from the file name."""
    dot = path.rfind(".")
    ext = path[dot:].lower() if dot > path.rfind("/") else ""
    if ext in MARKDOWN_EXT:
        return "markdown"
    if ext in CODE_EXT:
        return "code"
    return "text"
