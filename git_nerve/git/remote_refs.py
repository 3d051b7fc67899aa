"""git-nerve's shared refs on a remote (``refs/nerve/claims/*``, ``refs/nerve/log/*``, ``refs/nerve/probe/*``):
records as small commits, an atomic compare-and-set push, the fetch of ``refs/nerve/*``, ``ls-remote``.

A record is a commit whose tree holds one file (``record.json`` for a claim, ``events.jsonl`` for a batch of
events); its parent is the previous record of the same chain, so a chain is the history of one ref.
``push --atomic --force-with-lease=<ref>:<expected>`` is a true compare-and-set on the remote: every ref of
the push lands, or none (the remote refuses a lease that no longer holds).
Deleting a ref (the probe's, a finished task's claim) goes through :mod:`.destroy`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from ..redact import url_credentials
from . import cli
from .remote import _config_args, relative_url_config

#: who a record commit says made it (records are data, not anyone's work)
IDENTITY = {"GIT_AUTHOR_NAME": "git-nerve", "GIT_AUTHOR_EMAIL": "git-nerve@localhost",
            "GIT_COMMITTER_NAME": "git-nerve", "GIT_COMMITTER_EMAIL": "git-nerve@localhost"}
#: a transition fails fast when the remote cannot be reached (seconds, not minutes)
TIMEOUT = float(os.environ.get("NERVE_REMOTE_TIMEOUT", "20"))
#: settings that make an unreachable remote fail fast rather than hang (http: give up on a stalled transfer)
FAST = {"http.lowSpeedLimit": "1000", "http.lowSpeedTime": "10", "core.sshCommand": "ssh -o ConnectTimeout=5 -o BatchMode=yes"}
#: a lease that no longer holds, or a ref another push locked or created a moment before: a race lost
_LOST_RACE = ("stale info", "fetch first", "non-fast-forward", "already exists", "cannot lock ref",
              "failed to update ref", "atomic transaction failed", "but expected")
#: the host's own refusal (a hook, a hidden or denied ref, a permission): never a race
_REFUSALS = ("hook declined", "deny", "hidden", "not allowed", "permission", "forbidden", "protected")
_UNREACHABLE = ("could not read from remote", "unable to connect", "connection refused", "does not appear to be a git",
                "could not resolve host", "timed out", "unable to access", "failed to connect", "no such file or directory",
                "connection reset", "network is unreachable", "unable to look up", "remote end hung up")

#: words of a failure before anything reached the remote (the push surely did not land)
_NOT_SENT = ("could not resolve host", "connection refused", "unable to connect", "network is unreachable",
             "failed to connect", "unable to look up", "does not appear to be a git", "no such file or directory",
             "could not read from remote", "unable to access")


def may_have_landed(output: str) -> bool:
    """Could a push that failed with these words have reached the remote (no rejection line for a ref, no
    refusal, nothing saying it never connected)?"""
    low = output.lower()
    if any(ln.startswith("!\t") for ln in output.splitlines()) or any(w in low for w in _REFUSALS):
        return False
    return not any(w in low for w in _NOT_SENT)


def write_record(cwd, files: dict[str, bytes], parent: str | None, message: str, *, keep: tuple[str, ...] = ()) -> str:
    """A new record commit holding ``files`` ({name: content}), on top of ``parent``; its sha. Nothing is moved.
    ``keep``: more parents (an archive batch keeps the claims it archived reachable)."""
    entries = "".join(f"100644 blob {_hash(cwd, data)}\t{name}\n" for name, data in sorted(files.items()))
    tree = cli.out(["mktree"], cwd=cwd, input=entries)
    parents = [p for p in (parent, *keep) if p]
    args = ["commit-tree", tree, "-m", message, *(a for p in parents for a in ("-p", p))]
    return cli.out(args, cwd=cwd, env=cli.clean_env(IDENTITY))


def _hash(cwd, data: bytes) -> str:
    proc = cli.run(["hash-object", "-w", "--stdin"], cwd=cwd, input=data, text=False)
    return proc.stdout.decode().strip()


def read_files(cwd, shas: list[str], name: str) -> list[bytes | None]:
    """File ``name`` of each commit in ``shas`` (None where it has none), through one ``cat-file --batch``."""
    if not shas:
        return []
    proc = cli.run(["cat-file", "--batch"], cwd=cwd, input="".join(f"{s}:{name}\n" for s in shas).encode(), text=False)
    out, pos, found = proc.stdout, 0, []
    for _ in shas:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        pos = end + 1
        if len(header) < 3 or header[1] == b"missing":
            found.append(None)
            continue
        size = int(header[2])
        found.append(out[pos:pos + size])
        pos += size + 1
    return found


def chain(cwd, tip: str, since: str | None = None, *, first_parent: bool = False) -> list[str]:
    """The commits of a chain from after ``since`` (None: its start) to ``tip``, oldest first (``first_parent``:
    an archive's own batches, not the claims they keep)."""
    spec = [tip, f"^{since}"] if since else [tip]
    out = cli.out(["rev-list", "--reverse", "--topo-order", *(["--first-parent"] if first_parent else []), *spec], cwd=cwd)
    return out.split() if out else []


def local_refs(cwd, prefix: str) -> dict[str, str]:
    """{ref name: sha} of the local refs under ``prefix`` (``refs/nerve/claims/``)."""
    out = cli.out(["for-each-ref", "--format=%(objectname) %(refname)", prefix], cwd=cwd)
    return {ln.split(" ", 1)[1]: ln.split(" ", 1)[0] for ln in out.splitlines() if " " in ln}


@dataclass(frozen=True)
class RemoteResult:
    ok: bool
    #: a lease no longer held (another machine moved the ref first): the compare-and-set lost
    stale: bool = False
    #: the remote could not be reached: nothing was sent
    unreachable: bool = False
    #: the remote refused (its hook, a hidden-ref rule, a permission): its own words
    refused: bool = False
    message: str = ""
    output: str = ""
    #: the host's words say its rules refused it (a hook declined, a denied or hidden ref, a permission): policy,
    #: never a race nor a network failure
    policy: bool = False
    #: the remote answered for the refs (a rejection line per ref): the push surely did not land; False with a
    #: failure means no answer came (the connection dropped: it may have landed)
    answered: bool = False

    @property
    def maybe_landed(self) -> bool:
        """A push that failed with no answer for its refs, and not before anything could be sent (the connection
        dropped once the remote had it): the remote may have taken it; only reading it back tells."""
        if self.ok or self.stale or self.answered or self.policy:
            return False
        return may_have_landed(self.output)


def cas_push(cwd, remote: str, updates: list[tuple[str, str, str | None]], *, timeout: float = TIMEOUT) -> RemoteResult:
    """One atomic push of ``updates`` (ref, new sha, expected sha or None for "must not exist yet") to ``remote``:
    every ref moves, or none. No pre-push hook runs (these are git-nerve's own records, not work). Never a
    deletion (that is :func:`.destroy.delete_remote_probe_ref`'s)."""
    if any(not new for _, new, _ in updates):
        raise ValueError("cas_push never deletes a ref")
    return atomic_push(cwd, remote, updates, timeout=timeout)


def atomic_push(cwd, remote: str, updates: list[tuple[str, str, str | None]], *, timeout: float = TIMEOUT) -> RemoteResult:
    """:func:`cas_push` without its guard; only :mod:`.destroy` passes an empty new sha."""
    args = [*_config_args({**FAST, **relative_url_config(cwd, remote)}), "push", "--atomic", "--porcelain", "--no-verify"]
    args += [f"--force-with-lease={ref}:{expected or ''}" for ref, _, expected in updates]
    args += [remote, *(f"{new}:{ref}" for ref, new, _ in updates)]
    return _result(_run(args, cwd, timeout))


def lease_push(cwd, remote: str, updates: list[tuple[str, str, str | None]], *, timeout: float = TIMEOUT) -> RemoteResult:
    """:func:`cas_push` ref by ref (no ``--atomic``): each ref whose lease holds moves, the others stay (the
    result is then ``stale``). A move's freeze of many claims, retried for those another push moved first."""
    if any(not new for _, new, _ in updates):
        raise ValueError("lease_push never deletes a ref")
    args = [*_config_args({**FAST, **relative_url_config(cwd, remote)}), "push", "--porcelain", "--no-verify"]
    args += [f"--force-with-lease={ref}:{expected or ''}" for ref, _, expected in updates]
    args += [remote, *(f"{new}:{ref}" for ref, new, _ in updates)]
    return _result(_run(args, cwd, timeout))


def fetch(cwd, remote: str, refspecs: list[str], *, timeout: float = TIMEOUT) -> RemoteResult:
    """``git fetch <remote> <refspecs>`` (forced refspecs: the remote's value is the truth for these refs)."""
    args = [*_config_args({**FAST, **relative_url_config(cwd, remote)}), "fetch", "--quiet", "--no-tags",
            "--no-write-fetch-head", remote, *refspecs]
    for attempt in range(3):
        proc = _run(args, cwd, timeout)
        if proc.returncode == 0 or "cannot lock ref" not in proc.stderr:
            break
        time.sleep(0.1 * (attempt + 1))  # another fetch of ours (a background sync) updated the same refs
    return _result(proc)


def ls_remote(cwd, remote: str, pattern: str, *, timeout: float = TIMEOUT) -> tuple[RemoteResult, dict[str, str]]:
    """{ref: sha} of the remote's refs matching ``pattern`` (``refs/nerve/claims/*``)."""
    args = [*_config_args({**FAST, **relative_url_config(cwd, remote)}), "ls-remote", remote, pattern]
    proc = _run(args, cwd, timeout)
    res = _result(proc)
    found = {}
    if res.ok:
        for ln in proc.stdout.splitlines():
            sha, _, ref = ln.partition("\t")
            if ref:
                found[ref] = sha
    return res, found


class _Timeout:
    returncode = 1
    stdout = ""

    def __init__(self, what: str):
        self.stderr = what


def _run(args: list[str], cwd, timeout: float):
    from ..errors import GitError

    try:
        return cli.run(args, cwd=cwd, check=False, timeout=timeout)
    except GitError as exc:  # the timeout: an unreachable remote that did not say so
        return _Timeout(f"fatal: {exc.message} (timed out)")


def _result(proc) -> RemoteResult:
    proc.stdout, proc.stderr = url_credentials(proc.stdout), url_credentials(proc.stderr)
    text = proc.stdout + proc.stderr
    if proc.returncode == 0:
        return RemoteResult(True, output=text)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("!\t")]
    said = [ln.rstrip() for ln in proc.stderr.splitlines() if ln.startswith("remote:") and ln[7:].strip()]
    if lines:
        summaries = [ln.split("\t")[-1] for ln in lines]
        everything = " ".join(summaries) + " " + proc.stderr
        refused = any(w in everything for w in _REFUSALS)
        stale = not refused and any(w in everything for w in _LOST_RACE)
        why = "; ".join(dict.fromkeys(s for s in summaries if "atomic push failed" not in s)) or summaries[0]
        return RemoteResult(False, stale=stale, refused=refused or not stale,
                            message="; ".join([why, *[s[7:].strip() for s in said]]), output=text, policy=refused,
                            answered=True)
    msg = cli.message(proc.stderr) or cli.last_line(proc.stdout) or f"git exited {proc.returncode}"
    low = text.lower()
    if any(w in low for w in _UNREACHABLE):
        return RemoteResult(False, unreachable=True, message=msg, output=text)
    return RemoteResult(False, refused=True, message=msg, output=text, policy=any(w in low for w in _REFUSALS))
