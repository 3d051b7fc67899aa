"""`git nerve init --shared`: record shared mode in nerve.toml, after proving the store allows it.

``--shared`` (``git``): the git remote, probed as below. ``--shared postgres``: this machine's database
connection (``git config nerve.database`` or ``NERVE_DATABASE_URL``) is opened and git-nerve's schema created
or migrated there (:mod:`.postgres`); nerve.toml records the backend and the schema, never the connection.

The probe makes ``refs/nerve/probe/<machine>-<random>`` on the remote (an atomic create), moves it by
compare-and-set, and deletes it (through the door). A host that refuses any step is quoted word for word,
with the ways forward; nothing is recorded then.
"""

from __future__ import annotations

import re
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
    backend: str = "git"
    #: postgres: this repository's schema in the database
    schema: str | None = None


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
    return SharedSetup(remote, machine, path, _record(path, {"backend": "git", "remote": remote},
                                                      "several machines coordinate through this git remote "
                                                      "(docs/several-machines.md)"))


def enable_postgres(common_dir: Path, toplevel: Path) -> SharedSetup:
    """Connect to this machine's database, create git-nerve's schema there, then record ``[shared] backend =
    "postgres"`` and the schema in nerve.toml (a table already saying postgres keeps its schema)."""
    from .postgres import PostgresState

    home = nerve_toml.main_checkout(toplevel) or toplevel
    path = nerve_toml.path_in(home)
    table = (nerve_toml.read(home) or {}).get("shared")
    if table is not None and (not isinstance(table, dict) or table.get("backend") != "postgres"):
        raise UsageError(f"{path} already has a [shared] table ({table}); edit it by hand to change it")
    schema = table.get("schema", shared_config.DEFAULT_SCHEMA) if table else _new_schema(home)
    if not isinstance(schema, str) or not shared_config.valid_schema(schema):
        raise UsageError(f"{path} [shared] schema = {schema!r} is not a PostgreSQL schema name")
    machine = shared_config.machine(home)
    cfg = shared_config.SharedConfig("postgres", None, machine, home, Path(common_dir), schema=schema)
    where = PostgresState(cfg).prepare_schema()
    written = False if table else _record(path, {"backend": "postgres", "schema": schema},
                                          "several machines coordinate through PostgreSQL (docs/several-machines.md); "
                                          "each machine: git config nerve.database <url>")
    return SharedSetup(where, machine, path, written, backend="postgres", schema=schema)


def _new_schema(home: Path) -> str:
    """``nerve_<directory name>_<6 random hex>``: the repository's own namespace, unique in a shared database."""
    base = re.sub(r"[^a-z0-9_]+", "_", home.name.lower()).strip("_")[:40]
    return f"nerve_{base + '_' if base else ''}{secrets.token_hex(3)}"


def _record(path: Path, wanted: dict, comment: str) -> bool:
    """Append the [shared] table to nerve.toml (kept when it already says the same); True when written."""
    from ..fs import replace_file

    text = path.read_text(encoding="utf-8") if path.exists() else ""
    data = nerve_toml.read(path.parent) or {}
    table = data.get("shared")
    if table == wanted:
        return False
    if table is not None:
        raise UsageError(f"{path} already has a [shared] table ({table}); edit it by hand to change it")
    lines = "".join(f'{key} = "{value}"\n' for key, value in wanted.items())
    block = f"\n[shared]\n# {comment}\n{lines}"
    replace_file(path, (text.rstrip("\n") + "\n" if text else "") + block, create_mode=0o666, keep_mode=True)
    return True
