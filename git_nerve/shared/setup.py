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
import sys
from dataclasses import dataclass
from pathlib import Path

from .. import nerve_toml
from ..errors import DatabaseError, GitError, UsageError
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


def probe(cwd: Path, remote: str, machine: str) -> list[str]:
    """Create, compare-and-set and delete a probe ref on ``remote``; GitError quoting the host's refusal (the
    probe ref deleted again when it was made). A host that refuses only the deletion works in the degraded mode
    (finished claims stay live): a warning saying so, and that the probe ref stays, is returned."""
    ref = f"{records.PROBES}{machine}-{secrets.token_hex(4)}"
    first = remote_refs.write_record(cwd, {"probe": b"1\n"}, None, f"git-nerve probe by {machine}")
    second = remote_refs.write_record(cwd, {"probe": b"2\n"}, first, f"git-nerve probe by {machine}")
    res = remote_refs.cas_push(cwd, remote, [(ref, first, None)])
    if not res.ok:
        raise _refused(remote, ref, "create", res)
    res = remote_refs.cas_push(cwd, remote, [(ref, second, first)])
    if not res.ok:
        gone = destroy.delete_remote_probe_ref(cwd, remote, ref, first)
        left = "" if gone.ok else f" (its probe ref {ref} stays there: it could not be deleted)"
        raise _refused(remote, ref, "compare-and-set update", res, left)
    res = destroy.delete_remote_probe_ref(cwd, remote, ref, second)
    if res.ok:
        return []
    if not (res.policy or (res.answered and res.refused)):  # not the host's own no: out of reach, or unknown
        raise _refused(remote, ref, "delete", res, f" (its probe ref {ref} may stay there)")
    return [f"{remote} refuses deletions of refs/nerve/* ({res.message}): shared mode works without them, finished "
            f"claims stay live claim refs (docs/several-machines.md, \"What the host must allow\"); the probe ref {ref} "
            "stays on the remote (delete it by hand where the host allows)"]


def _refused(remote: str, ref: str, what: str, res: remote_refs.RemoteResult, left: str = "") -> GitError:
    said = [ln.strip() for ln in res.output.splitlines() if ln.strip()]
    if res.unreachable:
        return GitError(f"cannot reach {remote} to probe it: {res.message}; shared mode was not turned on{left}",
                        details=said)
    how = " by policy (the host's rules, not the network)" if res.policy else ""
    return GitError(
        f"{remote} refused the probe's {what} of {ref}{how}: {res.message}; shared mode was not turned on{left}",
        details=[*(f"  {ln}" for ln in said),
                 "ways forward: a separate bare repository that allows refs/nerve/* as the coordination remote "
                 "(`git remote add nerve <url>`, then `git nerve init --shared --remote nerve`), or stay on one machine"])


def join(toplevel: Path, backend: str | None, remote: str | None) -> list[str]:
    """Before `git nerve init` writes anything: the shared store this clone joins (``backend``: being turned on;
    None: nerve.toml's), probed when shared mode is being turned on on the git remote; this machine's name
    claimed there for this clone (:mod:`.identity`; on PostgreSQL a row of ``machine_names``, where nerve.toml
    names the schema already): HeldElsewhere (exit 8) when another clone holds it, nothing written. Only then are
    the clone's instance id and, without ``nerve.machine``, its default name (host name and a short suffix)
    recorded in its git config. Warnings to print (a store out of reach: the first sync claims the name)."""
    import socket

    from . import identity

    home = nerve_toml.home(toplevel)
    turning_on = backend is not None
    table = shared_config.table_of_checkout(home)
    if backend is None:
        backend = table.get("backend") if isinstance(table.get("backend"), str) else "local"
        remote = table.get("remote") if isinstance(table.get("remote"), str) else None
    if backend not in ("git", "postgres"):
        return []
    named = shared_config._git_config(home, "nerve.machine")
    machine = shared_config.machine(home) if named else identity.default_name(
        home, records.machine_name(socket.gethostname()))
    mine = identity.instance(home, create=False) or secrets.token_hex(8)
    warnings: list[str] = []
    try:
        if backend == "git":
            remote = _remote(home, remote)
            warnings += probe(home, remote, machine) if turning_on else []
            identity.claim(home, remote, machine, mine)
        elif table.get("backend") == "postgres":  # (a schema named: the first machine's is made by enable_postgres)
            from .postgres import PostgresState

            schema = table.get("schema", shared_config.DEFAULT_SCHEMA)
            if isinstance(schema, str) and shared_config.valid_schema(schema):
                cfg = shared_config.SharedConfig("postgres", None, machine, home, home, schema=schema)
                PostgresState(cfg).prepare_schema(instance=mine)
    except (GitError, DatabaseError) as exc:
        if turning_on:
            raise
        warnings.append(f"{exc.message}; the first `git nerve sync` that reaches it claims the name {machine}")
    from ..git import config as gitconfig

    if identity.instance(home, create=False) != mine:
        gitconfig.set_value(home, identity.INSTANCE_KEY, mine, scope="local")
    if not named:
        gitconfig.set_value(home, "nerve.machine", machine, scope="local")
    return warnings


def _remote(home: Path, remote: str | None) -> str:
    remote = remote or shared_config._git_config(home, "nerve.remote") or "origin"
    if not shared_config._git_config(home, f"remote.{remote}.url"):
        raise UsageError(f"no git remote named {remote!r}: shared mode coordinates through a remote every machine "
                         f"can reach (`git remote add {remote} <url>`, or --remote NAME)")
    return remote


def enable(common_dir: Path, toplevel: Path, remote: str | None, *, probed: bool = False) -> SharedSetup:
    """Probe the coordination remote (unless :func:`join` just did), then record ``[shared] backend = "git"``
    (and the remote) in nerve.toml."""
    home = nerve_toml.home(toplevel)
    remote = _remote(home, remote)
    machine = shared_config.machine(home)
    if not probed:
        for line in probe(home, remote, machine):
            print(f"git-nerve: {line}", file=sys.stderr)
    path = nerve_toml.path_in(home)
    return SharedSetup(remote, machine, path, _record(path, {"backend": "git", "remote": remote},
                                                      "several machines coordinate through this git remote "
                                                      "(docs/several-machines.md)"))


def enable_postgres(common_dir: Path, toplevel: Path) -> SharedSetup:
    """Connect to this machine's database, create git-nerve's schema there, then record ``[shared] backend =
    "postgres"`` and the schema in nerve.toml (a table already saying postgres keeps its schema)."""
    from .postgres import PostgresState

    home = nerve_toml.home(toplevel)
    path = nerve_toml.path_in(home)
    table = (nerve_toml.read(home) or {}).get("shared")
    if table is not None and (not isinstance(table, dict) or table.get("backend") != "postgres"):
        raise UsageError(f"{path} already has a [shared] table ({table}); edit it by hand to change it")
    schema = table.get("schema", shared_config.DEFAULT_SCHEMA) if table else _new_schema(home)
    if not isinstance(schema, str) or not shared_config.valid_schema(schema):
        raise UsageError(f"{path} [shared] schema = {schema!r} is not a PostgreSQL schema name")
    machine = shared_config.machine(home)
    cfg = shared_config.SharedConfig("postgres", None, machine, home, Path(common_dir), schema=schema)
    from .identity import instance

    where = PostgresState(cfg).prepare_schema(instance=instance(home))
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
    from ..git.destroy import replace_work_tree_file

    text = path.read_text(encoding="utf-8") if path.exists() else ""
    data = nerve_toml.read(path.parent) or {}
    table = data.get("shared")
    if table == wanted:
        return False
    if table is not None:
        raise UsageError(f"{path} already has a [shared] table ({table}); edit it by hand to change it")
    lines = "".join(f'{key} = "{value}"\n' for key, value in wanted.items())
    block = f"\n[shared]\n# {comment}\n{lines}"
    replace_work_tree_file(path, (text.rstrip("\n") + "\n" if text else "") + block, keep_mode=True)
    return True
