"""The round's log (what the person reads live in the console): lines intact, secrets out, identities in."""

from __future__ import annotations

import os

from git_nerve import redact
from git_nerve.workflow import runlog


def _tee(tmp_path, env):
    fd = os.open(tmp_path / "r.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    return runlog.Tee(tmp_path / "r.log", fd, redact.Redactor.of_env(env))


def test_a_line_on_stdout_and_one_on_stderr_never_cut_into_each_other(tmp_path):
    # an unbuffered agent writes "second line" and its newline in two writes; a secret begins with "ne"
    tee = _tee(tmp_path, {"NERVE_API_KEY": "nevermind-the-key"})
    tee.write("stdout", b"second line")
    tee.write("stderr", b"on stderr\n")
    tee.write("stdout", b"\n")
    tee.close()
    assert (tmp_path / "r.log").read_bytes() == b"on stderr\nsecond line\n"


def test_a_secret_split_across_reads_is_still_redacted_and_an_unfinished_line_is_kept_at_the_end(tmp_path):
    tee = _tee(tmp_path, {"SERVICE_TOKEN": "tok-123456789"})
    tee.write("stdout", b"using tok-12")
    tee.write("stdout", b"3456789 now\nprompt> ")
    tee.close()
    assert (tmp_path / "r.log").read_bytes() == b"using [redacted] now\nprompt> "


def test_the_author_identity_is_not_taken_for_a_secret_but_an_auth_variable_is():
    found = redact.env_secrets({"GIT_AUTHOR_EMAIL": "nerve@example.invalid", "GIT_AUTHOR_NAME": "Nerve Test",
                               "HTTP_AUTH": "basic-abcdef", "OPENAI_API_KEY": "sk-0123456789"})
    assert found == ["sk-0123456789", "basic-abcdef"]
