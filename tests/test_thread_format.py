"""The thread's text view (pure): header, YAML frontmatter, content, hints."""

from __future__ import annotations

import calendar
import time

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from git_nerve.thread.format import ShownRound, render, render_round
from git_nerve.thread.select import Gap


def ts(iso: str) -> float:
    return float(calendar.timegm(time.strptime(iso, "%Y-%m-%dT%H:%M:%SZ")))


SEED_EXAMPLE = """\
[#1 analyzer] 2026-04-23T13:00:00Z
---
exit_code: 0
files_changed: 3
---
Analysis complete. Found 3 files that need updating...

... 3 messages omitted (use --before 5 to load) ...

[#5 tester] 2026-04-23T13:00:12Z
---
exit_code: 0
assertions_passed: 3
---
All tests passed, sense validates correctly."""

ANALYZER = ShownRound(
    1, "analyzer", ts("2026-04-23T13:00:00Z"), {"exit_code": 0, "files_changed": 3},
    "Analysis complete. Found 3 files that need updating...",
)
TESTER = ShownRound(
    5, "tester", ts("2026-04-23T13:00:12Z"), {"exit_code": 0, "assertions_passed": 3},
    "All tests passed, sense validates correctly.",
)


def test_golden_the_seed_example():
    assert render([ANALYZER, TESTER], [Gap(2, 4)]) == SEED_EXAMPLE


def test_rounds_are_ordered_and_the_gap_sits_between_them_whatever_the_input_order():
    assert render([TESTER, ANALYZER], [Gap(2, 4)]) == SEED_EXAMPLE


def test_no_metadata_means_no_frontmatter():
    r = ShownRound(3, "coder", ts("2026-04-23T13:00:05Z"), {}, "Done.")
    assert render_round(r) == "[#3 coder] 2026-04-23T13:00:05Z\nDone."


def test_reserved_keys_never_reach_the_frontmatter():
    r = ShownRound(2, "coder", ts("2026-04-23T13:00:05Z"),
                   {"type": "role_result", "role": "x", "content": "y", "ok": True}, "Done.")
    assert render_round(r) == "[#2 coder] 2026-04-23T13:00:05Z\n---\nok: true\n---\nDone."
    only_reserved = ShownRound(2, "coder", r.ts, {"type": "role_result"}, "Done.")
    assert render_round(only_reserved) == "[#2 coder] 2026-04-23T13:00:05Z\nDone."
    assert only_reserved.as_dict()["metadata"] == {}


def test_a_round_without_a_role_shows_unknown():
    r = ShownRound(4, None, ts("2026-04-23T13:00:05Z"), {}, "hi")
    assert render_round(r).splitlines()[0] == "[#4 unknown] 2026-04-23T13:00:05Z"
    assert r.as_dict()["role"] is None


def test_multi_line_content_keeps_its_lines_and_blank_lines():
    content = "first line\n\n---\n  indented\nlast\n\n"
    r = ShownRound(2, "coder", ts("2026-04-23T13:00:05Z"), {}, content)
    assert render_round(r) == "[#2 coder] 2026-04-23T13:00:05Z\nfirst line\n\n---\n  indented\nlast"
    # trailing newlines are trimmed so rounds stay one blank line apart
    two = render([r, ShownRound(3, "tester", r.ts, {}, "ok\n")], [])
    assert two == (
        "[#2 coder] 2026-04-23T13:00:05Z\nfirst line\n\n---\n  indented\nlast\n\n"
        "[#3 tester] 2026-04-23T13:00:05Z\nok"
    )


def test_unicode_role_content_and_metadata_are_printed_as_is():
    r = ShownRound(7, "тестер", ts("2026-04-23T13:00:05Z"), {"note": "ça va ✓", "émoji": "🌍"}, "日本語のテキスト\n🌍 ok")
    assert render_round(r) == (
        "[#7 тестер] 2026-04-23T13:00:05Z\n---\nnote: ça va ✓\némoji: 🌍\n---\n日本語のテキスト\n🌍 ok"
    )


def test_nested_metadata_is_block_yaml_in_stored_order():
    meta = {"zeta": 1, "checks": {"lint": {"ok": True, "warnings": 2}, "files": ["a.py", "b/c.py"]}, "alpha": None}
    r = ShownRound(2, "ci", ts("2026-04-23T13:00:05Z"), meta, "done")
    assert render_round(r) == (
        "[#2 ci] 2026-04-23T13:00:05Z\n---\n"
        "zeta: 1\n"
        "checks:\n"
        "  lint:\n"
        "    ok: true\n"
        "    warnings: 2\n"
        "  files:\n"
        "  - a.py\n"
        "  - b/c.py\n"
        "alpha: null\n"
        "---\ndone"
    )


def test_multi_line_and_control_characters_in_metadata_stay_inside_the_frontmatter():
    meta = {"log": "line 1\n---\nline 3", "sep": "a\u2028b\x85c", "tab": "a\tb"}
    r = ShownRound(2, "ci", 0.0, meta, "body")
    text = render_round(r)
    assert text == (
        "[#2 ci] 1970-01-01T00:00:00Z\n---\n"
        "log: |-\n  line 1\n  ---\n  line 3\n"
        'sep: "a\\Lb\\Nc"\n'
        'tab: "a\\tb"\n'
        "---\nbody"
    )
    assert text.split("\n").count("---") == 2
    assert len(text.splitlines()) == len(text.split("\n"))


def test_long_metadata_strings_are_not_folded():
    long = "word " * 60
    r = ShownRound(2, "ci", 0.0, {"summary": long.strip()}, "x")
    lines = render_round(r).splitlines()
    assert lines[2] == f"summary: {long.strip()}"


def test_before_mode_ends_with_the_hint_for_older_rounds():
    rounds = [ShownRound(n, "coder", ts("2026-04-23T13:00:05Z"), {}, f"r{n}") for n in (8, 9)]
    text = render(rounds, [Gap(1, 7)])
    assert text.endswith("r9\n\n... 7 messages omitted (use --before 8 to load) ...")
    assert text.startswith("[#8 coder]")


def test_one_omitted_round_keeps_the_fixed_wording():
    text = render([ANALYZER, TESTER.__class__(3, "t", TESTER.ts, {}, "x")], [Gap(2, 2)])
    assert "... 1 messages omitted (use --before 3 to load) ..." in text


def test_nothing_to_show_renders_empty():
    assert render([], []) == ""


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=20) | st.sampled_from(["a\n---\nb", "x\n", "\u2028", "\x85\r\n", "# not a comment"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(min_size=1, max_size=8), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(meta=st.dictionaries(st.text(min_size=1, max_size=10).filter(lambda k: k not in {"type", "role", "content"}),
                            json_values, min_size=1, max_size=4))
def test_the_frontmatter_reads_back_as_the_metadata(meta):
    r = ShownRound(2, "ci", 0.0, meta, "body")
    lines = render_round(r).split("\n")
    assert lines[1] == "---"
    end = lines.index("---", 2)
    assert lines.count("---") == 2
    assert yaml.safe_load("".join(line + "\n" for line in lines[2:end])) == meta
    assert "\n".join(lines[end + 1:]) == "body"


# -- the usual metadata without yaml (issue 37: importing yaml cost `git nerve thread` about a Python start) -----

_TRICKY = st.sampled_from(["yes", "No", "on", "OFF", "true", "null", "Null", "~", "", "0755", "0x1f", "1_000", "1:30",
                           "1e5", ".inf", "-.inf", ".nan", "2026-04-23", "a b", "x: y", "#c", "-a", "a-", "v1.2", "src/a.py",
                           "_x", "=", "<<", "3f2a9c0d1e", "1234567", "0123456", "deadbeef" * 5, "é", "a\nb", "1.5"])
_PLAIN_VALUES = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | _TRICKY
                 | st.text(alphabet="abcxyz019_./-: #", max_size=12))


@settings(max_examples=400, deadline=None)
@given(meta=st.dictionaries(st.one_of(_TRICKY, st.text(alphabet="abkz_09.-", min_size=1, max_size=6)),
                            _PLAIN_VALUES | st.lists(_PLAIN_VALUES, max_size=3), min_size=1, max_size=5))
def test_the_frontmatter_written_without_yaml_is_byte_for_byte_yamls(meta):
    from git_nerve.thread.format import _dumper, _plain_yaml

    plain = _plain_yaml(meta)
    if plain is not None:
        assert plain == yaml.dump(meta, Dumper=_dumper(), sort_keys=False, allow_unicode=True, default_flow_style=False,
                                  width=2**31 - 1).removesuffix("\n")


def test_a_workflow_rounds_metadata_is_written_without_yaml():
    from git_nerve.thread.format import _plain_yaml

    meta = {"done": True, "files_changed": 3, "adapter": "claude", "duration_s": 12.5, "workflow": "develop",
            "head": "3f2a9c0d1e" * 4, "commits": ["a1b2c3d4e5" * 4, "0f" * 20], "extract_retries": 1, "note": None}
    assert _plain_yaml(meta) == (
        "done: true\nfiles_changed: 3\nadapter: claude\nduration_s: 12.5\nworkflow: develop\n"
        f"head: {'3f2a9c0d1e' * 4}\ncommits:\n- {'a1b2c3d4e5' * 4}\n- {'0f' * 20}\nextract_retries: 1\nnote: null")
    assert _plain_yaml({"summary": "two words"}) is None  # yaml's
