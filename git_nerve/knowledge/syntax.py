"""Code-aware chunking with tree-sitter: one chunk per function, class and method. Pure (no I/O).

Where a prebuilt grammar is installed (the ``tree-sitter-<language>`` wheels, see pyproject.toml), a code
file is parsed and cut along its definitions: every function, class, struct, method (a class's methods
each get their own chunk; the class keeps its header, docstring and attributes) carries its symbol name,
its qualified name (``Class.method``, ``namespace::fn``) and its docstring or the comment above it. The
lines between definitions (imports, module-level code) become chunks of their own. A definition longer
than :data:`~.chunking.MAX_LINES` is cut into windows that keep its names.

:func:`definitions` returns None when the file's language has no grammar installed, or the parser is
missing: the caller falls back to :func:`~.chunking.code_blocks`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache

#: extension -> (grammar module, function giving its language)
GRAMMARS: dict[str, tuple[str, str]] = {
    ".py": ("tree_sitter_python", "language"), ".pyi": ("tree_sitter_python", "language"),
    ".js": ("tree_sitter_javascript", "language"), ".jsx": ("tree_sitter_javascript", "language"),
    ".mjs": ("tree_sitter_javascript", "language"), ".cjs": ("tree_sitter_javascript", "language"),
    ".ts": ("tree_sitter_typescript", "language_typescript"), ".mts": ("tree_sitter_typescript", "language_typescript"),
    ".tsx": ("tree_sitter_typescript", "language_tsx"),
    ".c": ("tree_sitter_c", "language"), ".h": ("tree_sitter_cpp", "language"),
    ".cc": ("tree_sitter_cpp", "language"), ".cpp": ("tree_sitter_cpp", "language"), ".cxx": ("tree_sitter_cpp", "language"),
    ".hpp": ("tree_sitter_cpp", "language"), ".hh": ("tree_sitter_cpp", "language"), ".hxx": ("tree_sitter_cpp", "language"),
    ".go": ("tree_sitter_go", "language"), ".rs": ("tree_sitter_rust", "language"),
}

#: Definitions: each one a chunk.
DEFINITIONS = frozenset({
    "function_definition", "class_definition", "function_declaration", "generator_function_declaration",
    "class_declaration", "abstract_class_declaration", "method_definition", "interface_declaration",
    "enum_declaration", "type_alias_declaration", "struct_specifier", "class_specifier", "enum_specifier",
    "union_specifier", "method_declaration", "type_declaration", "function_item", "struct_item", "enum_item",
    "trait_item", "impl_item", "mod_item", "macro_definition", "namespace_definition", "preproc_function_def",
})
#: Definitions whose body holds further definitions (methods): the body is walked, not kept whole.
CONTAINERS = frozenset({
    "class_definition", "class_declaration", "abstract_class_declaration", "class_specifier", "struct_specifier",
    "impl_item", "trait_item", "mod_item", "namespace_definition", "interface_declaration",
})
#: Wrappers around a definition (decorators, export, template<>): the chunk starts at the wrapper.
WRAPPERS = frozenset({"decorated_definition", "export_statement", "template_declaration"})
#: Blocks walked through as if their children stood at their level.
TRANSPARENT = frozenset({
    "preproc_ifdef", "preproc_if", "preproc_else", "preproc_elif", "linkage_specification", "declaration_list",
    "lexical_declaration",
})
#: Declarations that name a function by assignment (``const f = () => ...``).
_ASSIGNED = frozenset({"variable_declarator"})
_NAME_TYPES = ("identifier", "field_identifier", "qualified_identifier", "type_identifier", "property_identifier",
               "destructor_name", "operator_name", "namespace_identifier")


@dataclass(frozen=True)
class Definition:
    start: int  #: first line, 0-based
    end: int  #: line after the last, 0-based
    qualname: str
    symbol: str
    doc: str


@cache
def parser_for(ext: str):
    """A tree-sitter parser for the extension, None when its grammar (or tree-sitter) is not installed."""
    spec = GRAMMARS.get(ext)
    if spec is None:
        return None
    try:
        import tree_sitter

        module = importlib.import_module(spec[0])
        return tree_sitter.Parser(tree_sitter.Language(getattr(module, spec[1])()))
    except (ImportError, AttributeError, ValueError, TypeError):
        return None


def definitions(ext: str, source: bytes) -> list[Definition] | None:
    """The definitions of a file, outermost first; None when no grammar parses this extension."""
    parser = parser_for(ext)
    if parser is None:
        return None
    tree = parser.parse(source)
    found: list[Definition] = []
    _walk(tree.root_node, "", found, "::" if ext in (".cc", ".cpp", ".cxx", ".hpp", ".hh", ".hxx", ".h", ".rs") else ".")
    return found


def _walk(node, prefix: str, found: list[Definition], sep: str) -> None:
    for child in node.named_children:
        kind = child.type
        if kind in TRANSPARENT:
            if kind == "lexical_declaration":
                _assigned(child, prefix, found, sep)
            else:
                _walk(child, prefix, found, sep)
            continue
        outer, inner = child, child
        while inner.type in WRAPPERS:
            defs = [c for c in inner.named_children if c.type in DEFINITIONS or c.type in WRAPPERS or c.type == "lexical_declaration"]
            if not defs:
                break
            inner = defs[-1]
        if inner.type == "lexical_declaration":
            _assigned(inner, prefix, found, sep, outer)
            continue
        if inner.type not in DEFINITIONS:
            continue
        name = _name(inner)
        if inner.type in ("struct_specifier", "enum_specifier", "union_specifier", "class_specifier") and inner.child_by_field_name("body") is None:
            continue  # a use of the type (``struct S *p``), not its definition
        qual = f"{prefix}{sep}{name}" if prefix and name else (name or prefix)
        start = _doc_start(outer)
        found.append(Definition(start, outer.end_point[0] + 1, qual, name, _doc(inner, outer)))
        if inner.type in CONTAINERS:
            body = inner.child_by_field_name("body") or next(
                (c for c in inner.named_children if c.type in ("declaration_list", "field_declaration_list", "class_body", "block")), None)
            if body is not None:
                _walk(body, qual, found, sep)


def _assigned(decl, prefix: str, found: list[Definition], sep: str, outer=None) -> None:
    """``const name = function / arrow`` declarations, as functions."""
    for var in decl.named_children:
        value = var.child_by_field_name("value")
        if var.type in _ASSIGNED and value is not None and value.type in ("arrow_function", "function_expression", "function", "class"):
            name = _text(var.child_by_field_name("name"))
            qual = f"{prefix}{sep}{name}" if prefix else name
            top = outer or decl
            found.append(Definition(_doc_start(top), top.end_point[0] + 1, qual, name, _doc(value, top)))


def _name(node) -> str:
    named = node.child_by_field_name("name")
    if named is not None:
        return _text(named)
    declarator = node.child_by_field_name("declarator")
    while declarator is not None:  # C/C++: int *foo(int) -> function_declarator -> identifier
        if declarator.type in _NAME_TYPES:
            return _text(declarator)
        declarator = declarator.child_by_field_name("declarator") or next(
            (c for c in declarator.named_children if c.type in _NAME_TYPES), None)
    if node.type == "impl_item":
        return _text(node.child_by_field_name("type"))
    if node.type == "type_declaration":
        spec = next(iter(node.named_children), None)
        return _text(spec.child_by_field_name("name")) if spec is not None else ""
    return ""


def _text(node) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""


def _doc_start(node) -> int:
    """The first line of the comments directly above ``node`` (its own first line when there are none)."""
    start = node.start_point[0]
    prev = node.prev_named_sibling
    while prev is not None and prev.type == "comment" and prev.end_point[0] >= start - 1:
        start = prev.start_point[0]
        prev = prev.prev_named_sibling
    return start


def _doc(inner, outer) -> str:
    """A Python docstring, else the comments directly above the definition."""
    body = inner.child_by_field_name("body")
    if body is not None and body.type == "block" and body.named_children:
        first = body.named_children[0]
        if first.type == "expression_statement" and first.named_children and first.named_children[0].type == "string":
            return _text(first.named_children[0]).strip("\"' \n")
    comments: list[str] = []
    start = outer.start_point[0]
    prev = outer.prev_named_sibling
    while prev is not None and prev.type == "comment" and prev.end_point[0] >= start - 1:
        comments.insert(0, _text(prev))
        start = prev.start_point[0]
        prev = prev.prev_named_sibling
    return "\n".join(comments)


def spans(defs: list[Definition], line_count: int) -> list[tuple[int, int, Definition | None]]:
    """Half-open line spans covering the file: each line goes to the innermost definition holding it
    (a class keeps its header and attributes, its methods go to their own spans); lines outside every
    definition form spans of their own (None). Spans holding nothing but brackets are left out."""
    owner: list[int] = [-1] * line_count
    for i, d in enumerate(defs):  # outermost first: an inner definition overwrites its lines
        for line in range(max(0, d.start), min(line_count, d.end)):
            owner[line] = i
    out: list[tuple[int, int, Definition | None]] = []
    start = 0
    for line in range(1, line_count + 1):
        if line == line_count or owner[line] != owner[start]:
            out.append((start, line, defs[owner[start]] if owner[start] >= 0 else None))
            start = line
    return out
