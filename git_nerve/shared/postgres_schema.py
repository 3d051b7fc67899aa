"""The PostgreSQL backend's schema and connection details (:mod:`.postgres`): the versioned schema git-nerve
creates and migrates in each repository's own namespace, a transaction whose COMMIT lost its connection said as
such (its outcome unknown, never "nothing changed"), the driver's errors as one line (:func:`failing`), the connection's options (a timeout of a few seconds
unless the URL or ``PGCONNECT_TIMEOUT`` gives one) and how a connection is named in messages (host, port and
database: never the user or a password)."""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

from ..errors import DatabaseError

#: the schema version this code creates and knows
SCHEMA_VERSION = 3
#: seconds a connection may take before the command gives up (libpq's connect_timeout; PGCONNECT_TIMEOUT or
#: the URL's own connect_timeout win)
CONNECT_TIMEOUT = 5
_MIGRATIONS = {
    1: """
CREATE TABLE nerve_schema (version integer NOT NULL);
CREATE TABLE claims (
    task_id  text PRIMARY KEY,
    owner    text NOT NULL,
    machine  text NOT NULL,
    state    text NOT NULL,
    previous text,
    verb     text NOT NULL,
    version  bigint NOT NULL,
    at       timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE transitions (
    task_id  text NOT NULL,
    version  bigint NOT NULL,
    previous text,
    state    text NOT NULL,
    verb     text NOT NULL,
    machine  text NOT NULL,
    owner    text NOT NULL,
    at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, version)
);
CREATE TABLE machines (
    machine   text PRIMARY KEY,
    seen_at   timestamptz NOT NULL DEFAULT now(),
    cursor    jsonb NOT NULL DEFAULT '{}',
    published bigint NOT NULL DEFAULT 0
);
CREATE TABLE events (
    event_id text PRIMARY KEY,
    machine  text NOT NULL,
    mseq     bigint NOT NULL,
    ts       double precision NOT NULL,
    task_id  text,
    kind     text NOT NULL,
    payload  jsonb NOT NULL,
    UNIQUE (machine, mseq)
);
CREATE INDEX events_task ON events (task_id);
INSERT INTO nerve_schema VALUES (0);
""",
    # the mark of a move (`init --shared X --move`, shared/postgres_move.py): where the shared state is now
    2: """
CREATE TABLE moved (
    one     boolean PRIMARY KEY DEFAULT true CHECK (one),
    backend text NOT NULL,
    target  jsonb NOT NULL,
    machine text NOT NULL,
    at      timestamptz NOT NULL DEFAULT now()
);
""",
    # one name, one machine (issue 36, shared/identity.py): the clone (instance) each machine name belongs to
    3: """
CREATE TABLE machine_names (
    machine  text PRIMARY KEY,
    instance text NOT NULL,
    at       timestamptz NOT NULL DEFAULT now()
);
""",
}


def ensure(conn, schema: str) -> None:
    """Create or migrate ``schema`` (under an advisory lock: one machine at a time), then make it the search
    path; DatabaseError for a schema newer than this code."""
    from psycopg import sql

    conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
    found = schema_version(conn, schema)
    if found == SCHEMA_VERSION:
        return
    _refuse_newer(schema, found)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('git-nerve:' || %s))", (schema,))
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        found = schema_version(conn, schema) or 0
        _refuse_newer(schema, found)
        for step in range(found + 1, SCHEMA_VERSION + 1):
            conn.execute(_MIGRATIONS[step])
            conn.execute("UPDATE nerve_schema SET version = %s", (step,))


def _refuse_newer(schema: str, found: int | None) -> None:
    if found is not None and found > SCHEMA_VERSION:
        raise DatabaseError(f"the database's git-nerve schema {schema} is at version {found}, newer than this "
                            f"git-nerve knows ({SCHEMA_VERSION}): upgrade git-nerve on this machine; nothing changed")


def schema_version(conn, schema: str) -> int | None:
    """The version of git-nerve's schema ``schema`` (None: not there yet)."""
    exists = conn.execute("SELECT to_regclass(format('%%I.nerve_schema', %s::text)) IS NOT NULL", (schema,)).fetchone()
    if not exists[0]:
        return None
    row = conn.execute("SELECT max(version) FROM nerve_schema").fetchone()
    return row[0] if row else None


#: SQLSTATEs and libpq's words of a connection refused for its credentials (not a database out of reach)
_AUTH_STATES = ("28P01", "28000")
_AUTH_WORDS = ("password authentication failed", "authentication failed", "no password supplied",
               "no pg_hba.conf entry", "role \"", "peer authentication failed")


def connect_failed(where: str, exc, unchanged: str):
    """The DatabaseError of a connection that failed: its credentials refused (``kind`` "auth", named as such),
    else the database out of reach."""
    from ..errors import DatabaseError

    said = first_line(exc)
    if getattr(exc, "sqlstate", None) in _AUTH_STATES or any(w in str(exc).lower() for w in _AUTH_WORDS):
        err = DatabaseError(f"the database {where} refused this machine's credentials: {said} (its user and password: "
                            f"git config nerve.database, ~/.pgpass, PGPASSWORD); {unchanged}")
        err.kind = "auth"
        return err
    return DatabaseError(f"cannot reach the database {where}: {said}; {unchanged}")


def connect_options(url: str) -> dict:
    from psycopg.conninfo import conninfo_to_dict

    options: dict = {"autocommit": True, "application_name": "git-nerve"}
    try:
        given = conninfo_to_dict(url)
    except Exception:  # a malformed URL: psycopg.connect says so itself
        given = {}
    if "connect_timeout" not in given and not os.environ.get("PGCONNECT_TIMEOUT"):
        options["connect_timeout"] = CONNECT_TIMEOUT
    return options


def where(url: str) -> str:
    """host:port/dbname of ``url``, never its password or user."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        d = conninfo_to_dict(url)
    except Exception:
        return "(a connection string libpq cannot read)"
    host = d.get("host") or d.get("hostaddr") or os.environ.get("PGHOST") or "localhost"
    port = d.get("port") or os.environ.get("PGPORT") or "5432"
    return f"{host}:{port}/{d.get('dbname') or os.environ.get('PGDATABASE') or '(default)'}"


def first_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


def lost_at_commit(where: str, what: str, exc: BaseException) -> DatabaseError:
    return DatabaseError(f"the connection to the database {where} was lost while committing {what} "
                         f"({first_line(exc)}): whether it was recorded is unknown; running the command again is safe "
                         "(a claim that already records it counts as done)")


@contextmanager
def transaction(conn, where: str, what: str) -> Iterator[None]:
    """``conn.transaction()``, except that a connection lost during its COMMIT is a DatabaseError saying the
    outcome is unknown and a rerun safe (``what``: what was being committed)."""
    import psycopg

    tx = conn.transaction()
    tx.__enter__()
    try:
        yield
    except BaseException as exc:
        if not tx.__exit__(type(exc), exc, exc.__traceback__):
            raise
        return
    try:
        tx.__exit__(None, None, None)
    except psycopg.OperationalError as exc:
        raise lost_at_commit(where, what, exc) from None


def commit(conn, where: str, what: str) -> None:
    """COMMIT a transaction begun by hand (``BEGIN``), a lost connection said as in :func:`transaction`."""
    import psycopg

    try:
        conn.execute("COMMIT")
    except psycopg.OperationalError as exc:
        raise lost_at_commit(where, what, exc) from None


@contextmanager
def failing(where: str, unchanged: str) -> Iterator[None]:
    """The driver's errors inside as one line (DatabaseError) saying ``unchanged``; the caller's own pass."""
    import psycopg

    try:
        yield
    except psycopg.Error as exc:
        raise DatabaseError(f"the database {where} failed: {first_line(exc)}; {unchanged}") from None
