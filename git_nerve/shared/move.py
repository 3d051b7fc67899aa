"""`git nerve init --shared git|postgres --move`: move a repository's shared state from the store its nerve.toml
names to the other one, without losing a task.

It is `init --shared` because that is what records a backend in nerve.toml; ``--move`` says "from the one
recorded now, carrying everything" (without it, init refuses a nerve.toml whose [shared] table names the other
store). In order, each step a rerun makes again or finds made:

1. the new store is made ready (PostgreSQL: this machine's connection, the schema created; the git remote:
   probed as `init --shared` probes it). A rerun after a kill moves to the store the old one's mark names;
2. the old store is marked moved and frozen (:mod:`.move_git`, :mod:`.postgres_move`): from then on a clone
   still on the old configuration is refused by it with one line (exit 2: pull the new nerve.toml), nothing
   changed; a transition that committed before is in what step 3 reads;
3. everything the old store holds is read (every claim: state, holder, last mover and verb, version; every
   machine's events and cursor) and written into the new one in one step (one transaction, or one atomic
   push), keyed so that a rerun neither loses nor doubles anything;
4. nerve.toml's [shared] table names the new store (its other settings kept; never the database's URL).

Leases start afresh on the new store: no task there can be taken over before a lease has passed.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from .. import faults, nerve_toml
from ..errors import UsageError
from . import config as shared_config
from . import postgres_move, records
from .move_git import GitStore


@dataclass
class Moved:
    source: dict
    target: dict
    machine: str
    nerve_toml: Path
    written: bool
    counts: dict
    already: bool = False


class PgStore:
    """One PostgreSQL schema, through :class:`.postgres.PostgresState`'s connection."""

    backend = "postgres"

    def __init__(self, home: Path, common_dir: Path, machine: str, schema: str):
        from .postgres import PostgresState

        cfg = shared_config.SharedConfig("postgres", None, machine, home, Path(common_dir), schema=schema)
        self.state, self.schema, self.machine = PostgresState(cfg), schema, machine

    def describe(self) -> dict:
        return {"backend": "postgres", "schema": self.schema}

    def prepare(self) -> str:
        return self.state.prepare_schema()

    def read_mark(self) -> dict | None:
        with self.state.session("nothing was moved") as conn:
            return postgres_move.read_mark(conn)

    def freeze(self, target: dict) -> None:
        with self.state.session("nothing was moved") as conn:
            postgres_move.set_mark(conn, target, self.machine)

    def dump(self) -> records.Snapshot:
        with self.state.session("nothing was moved") as conn, conn.transaction():
            return postgres_move.dump(conn)

    def load(self, snap: records.Snapshot) -> dict:
        with self.state.session("nothing was written there; run the move again") as conn:
            return postgres_move.load(conn, snap)


def move(common_dir: Path, toplevel: Path, to: str, remote: str | None = None) -> Moved:
    """Move the shared state to ``to`` ("git" or "postgres"; see the module)."""
    home = nerve_toml.home(toplevel)
    path = nerve_toml.path_in(home)
    old = shared_config.load(Path(common_dir))
    if old.backend == "local":
        raise UsageError(f"nothing to move: {path} names no shared store (`git nerve init --shared {to}` turns "
                         "shared mode on)")
    if remote and to != "git":
        raise UsageError("--remote goes with --shared git")
    source = _store(old.backend, home, common_dir, old.machine, schema=old.schema, remote=old.remote)
    if old.backend == to:
        return Moved(source.describe(), source.describe(), old.machine, path, False, {}, already=True)
    mark = source.read_mark()  # a rerun: the store the first run chose
    target = _store(to, home, common_dir, old.machine, mark=mark, remote=remote)
    _prepare(target)
    source.freeze(target.describe())
    faults.point("move.after-freeze")
    snap = source.dump()
    counts = {**snap.counts(), **target.load(snap)}
    faults.point("move.after-load")
    written = _rewrite(path, {"backend": "git", "remote": target.remote} if to == "git"
                       else {"backend": "postgres", "schema": target.schema})
    return Moved(source.describe(), target.describe(), old.machine, path, written, counts)


def _store(backend: str, home: Path, common_dir: Path, machine: str, *, schema: str | None = None,
           remote: str | None = None, mark: dict | None = None):
    if backend == "git":
        named = mark.get("remote") if mark and mark.get("backend") == "git" else None
        return GitStore(home, remote or named or shared_config._git_config(home, "nerve.remote") or "origin", machine)
    if schema is None:
        from .setup import _new_schema

        named = (mark or {}).get("schema") if (mark or {}).get("backend") == "postgres" else None
        schema = named if isinstance(named, str) and shared_config.valid_schema(named) else _new_schema(home)
    return PgStore(home, Path(common_dir), machine, schema)


def _prepare(target) -> None:
    if isinstance(target, PgStore):
        target.prepare()
        return
    from .setup import probe

    if not shared_config._git_config(target.cwd, f"remote.{target.remote}.url"):
        raise UsageError(f"no git remote named {target.remote!r} to move to (`git remote add {target.remote} <url>`, "
                         "or --remote NAME)")
    probe(target.cwd, target.remote, target.machine)


#: the keys of [shared] that say which store (replaced by a move; every other setting is kept)
_STORE_KEYS = ("backend", "remote", "schema")


def _rewrite(path: Path, wanted: dict) -> bool:
    """nerve.toml's [shared] table names ``wanted``'s store, its other lines kept; True when written."""
    from ..git.destroy import replace_work_tree_file

    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    start = next((i for i, ln in enumerate(lines) if re.match(r"\s*\[\s*shared\s*\]\s*(#.*)?$", ln)), None)
    if start is None:
        raise UsageError(f"{path}: no [shared] table line to rewrite; set {wanted} in it by hand")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
    kept = [ln for ln in lines[start + 1:end]
            if ln.split("=", 1)[0].strip() not in _STORE_KEYS and not ln.lstrip().startswith("# several machines")]
    comment = ("# several machines coordinate through PostgreSQL (docs/several-machines.md); each machine: git config "
               "nerve.database <url>\n" if wanted["backend"] == "postgres" else
               "# several machines coordinate through this git remote (docs/several-machines.md)\n")
    new = "".join([*lines[:start + 1], comment, *(f'{k} = "{v}"\n' for k, v in wanted.items()), *kept, *lines[end:]])
    if new == text:
        return False
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    table = tomllib.loads(new).get("shared", {})
    if any(table.get(k) != v for k, v in wanted.items()):
        raise UsageError(f"{path}: could not rewrite its [shared] table; set {wanted} there by hand")
    replace_work_tree_file(path, new, keep_mode=True)  # nerve.toml, a file of the work tree
    return True
