"""Where an answer is likely to live: a prior on a chunk's path, by the question's intent. Pure (no I/O).

"Where / how is X done" questions want the implementing source; the docs and the tests that mention X
use the same words and would otherwise win (they explain it in prose, the source names it). So full-text
scores are multiplied by a factor by the kind of file: source code ahead, then docs, then tests,
examples and generated or packaging files. A question about *using* something ("how do I", "how to",
"example", "usage", "install", "tutorial") keeps the docs at par with the source.
"""

from __future__ import annotations

import re

from .kinds import kind_of

#: factor by kind of file, for implementation questions and for usage questions
PRIOR = {
    "source": (1.0, 1.0),
    "docs": (0.55, 1.15),
    "tests": (0.45, 0.6),
    "other": (0.5, 0.7),
    "header": (0.8, 1.0),  # C/C++ headers declare and document; the implementation lives in the .c/.cc
    "changelog": (0.4, 0.5),  # names every feature once, explains none
}
_USAGE = re.compile(
    r"\b(how (do|can|should) (i|we|you)|how to|example|examples|usage|tutorial|install|installing|getting started|"
    r"quickstart|configure|supported)\b", re.IGNORECASE,
)
_TESTS = re.compile(r"(^|/)(tests?|testing|spec|specs|__tests__|test_?data|fixtures|benchmarks?)(/|$)|(^|/)(test_[^/]*|[^/]*_test\.[a-z]+|[^/]*\.(test|spec)\.[a-z]+|conftest\.py)$")
_DOCS = re.compile(r"(^|/)(docs?|documentation|man|guides?)(/|$)|\.(md|markdown|rst|txt|adoc)$|(^|/)README[^/]*$", re.IGNORECASE)
_CHANGELOG = re.compile(r"(^|/)(CHANGES|CHANGELOG|HISTORY|NEWS|RELEASES?)[^/]*$|(^|/)(changes|changelog|history)\.[a-z]+$", re.IGNORECASE)
_HEADER = re.compile(r"\.(h|hh|hpp|hxx)$")
_OTHER = re.compile(r"(^|/)(examples?|samples?|vendor|third_party|\.github|build|dist)(/|$)|\.(json|ya?ml|toml|cfg|ini|lock|in)$|(^|/)(PKG-INFO|setup\.py|Makefile)$")


def usage_question(text: str) -> bool:
    return _USAGE.search(text) is not None


def kind_of_path(path: str) -> str:
    if _TESTS.search(path):
        return "tests"
    if _CHANGELOG.search(path):
        return "changelog"
    if _DOCS.search(path):
        return "docs"
    if _OTHER.search(path):
        return "other"
    if kind_of(path) != "code":
        return "other"
    return "header" if _HEADER.search(path) else "source"


def factor(path: str, usage: bool) -> float:
    return PRIOR[kind_of_path(path)][1 if usage else 0]

