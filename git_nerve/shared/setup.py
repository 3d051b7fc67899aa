"""`git nerve init --shared`: record shared mode in nerve.toml, after proving the remote allows it.

The probe makes ``refs/nerve/probe/<machine>-<random>`` on the remote (an atomic create), moves it by
compare-and-set, and deletes it (through the door). A host that refuses any step is quoted word for word,
with the ways forward; nothing is recorded then.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from .. import nerve_toml
from ..errors import GitError, UsageError
from ..git import destroy, remote_refs
from . import config as shared_config
from . import records


@dataclass
class SharedSetup:
    remote: str
    machine: str
    nerve_toml: Path
    written: bool


def probe(cwd: Path, remote: str, machine: str) -> None:
    """Create, compare-and-set and delete a probe ref on ``remote``; GitError quoting the host's refusal."""
    ref = f"{records.PROBES}{machine}-{secrets.token_hex(4)}"
    first = remote_refs.write_record(cwd, {"probe": b"1\n"}, None, f"git-nerve probe by {machine}")
    second = remote_refs.write_record(cwd, {"probe": b"2\n"}, first, f"git-nerve probe by {machine}")
    steps = (("create", lambda: remote_refs.cas_push(cwd, remote, [(ref, first, None)])),
             ("compare-and-set update", lambda: remote_refs.cas_push(cwd, remote, [(ref, second, first)])),
             ("delete", lambda: destroy.delete_remote_probe_ref(cwd, remote, ref, second)))
    for what, step in steps:
        res = step()
        if not res.ok:
            raise _refused(remote, ref, what, res)


def _refused(remote: str, ref: str, what: str, res: remote_refs.RemoteResult) -> GitError:
    said = [ln.strip() for ln in res.output.splitlines() if ln.strip()]
    if res.unreachable:
        return GitError(f"cannot reach {remote} to probe it: {res.message}; shared mode was not turned on", details=said)
    return GitError(
        f"{remote} refused the probe's {what} of {ref}: {res.message}; shared mode was not turned on",
        details=[*(f"  {ln}" for ln in said),
                 "ways forward: a separate bare repository that allows refs/nerve/* as the coordination remote "
                 "(`git remote add nerve <url>`, then `git nerve init --shared --remote nerve`), or stay on one machine"])


def enable(common_dir: Path, toplevel: Path, remote: str | None) -> SharedSetup:
    """Probe the coordination remote, then record ``[shared] backend = "git"`` (and the remote) in nerve.toml."""
    home = nerve_toml.main_checkout(toplevel) or toplevel
    cwd = home
    remote = remote or shared_config._git_config(cwd, "nerve.remote") or "origin"
    known = shared_config._git_config(cwd, f"remote.{remote}.url")
    if not known:
        raise UsageError(f"no git remote named {remote!r}: shared mode coordinates through a remote every machine "
                         f"can reach (`git remote add {remote} <url>`, or --remote NAME)")
    machine = shared_config.machine(cwd)
    probe(cwd, remote, machine)
    path = nerve_toml.path_in(home)
    return SharedSetup(remote, machine, path, _record(path, remote))


def _record(path: Path, remote: str) -> bool:
    """Append the [shared] table to nerve.toml (kept when it already says the same); True when written."""
    from ..fs import replace_file

    text = path.read_text(encoding="utf-8") if path.exists() else ""
    data = nerve_toml.read(path.parent) or {}
    table = data.get("shared")
    wanted = {"backend": "git", "remote": remote}
    if table == wanted:
        return False
    if table is not None:
        raise UsageError(f"{path} already has a [shared] table ({table}); edit it by hand to change it")
    block = f'\n[shared]\n# several machines coordinate through this git remote (docs/several-machines.md)\nbackend = "git"\nremote = "{remote}"\n'
    replace_file(path, (text.rstrip("\n") + "\n" if text else "") + block)
    return True
