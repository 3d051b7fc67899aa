"""Versioned schema migrations, tracked in ``PRAGMA user_version``.

Append a migration to :data:`MIGRATIONS` to change the schema; never edit one
that has shipped. Each runs inside the ``BEGIN IMMEDIATE`` transaction that
opened the bus, so concurrent first opens cannot apply one twice.
"""

from __future__ import annotations

MIGRATIONS: list[str] = [
    # 1: workers, the append-only message log, thread rounds, steering.
    """
    CREATE TABLE workers (
        task_id          TEXT PRIMARY KEY,
        task_key         TEXT NOT NULL UNIQUE,      -- casefolded id: ids that differ only in case collide
        state            TEXT NOT NULL,
        branch           TEXT NOT NULL,
        worktree         TEXT NOT NULL,
        base             TEXT NOT NULL,             -- the ref the task was spawned from
        integration      TEXT NOT NULL,             -- integration branch name (e.g. main)
        description      TEXT NOT NULL DEFAULT '',
        assigned_at      REAL NOT NULL,
        state_changed_at REAL NOT NULL,
        last_heartbeat   REAL,
        last_activity    REAL NOT NULL,
        approved_at      REAL,
        heartbeat_status TEXT,
        progress         REAL
    );
    CREATE INDEX workers_state ON workers(state);

    CREATE TABLE messages (
        id      INTEGER PRIMARY KEY AUTOINCREMENT,
        ts      REAL NOT NULL,
        task_id TEXT,
        kind    TEXT NOT NULL,
        payload TEXT NOT NULL DEFAULT '{}'           -- JSON object
    );
    CREATE INDEX messages_task ON messages(task_id, id);

    CREATE TABLE rounds (
        id        INTEGER PRIMARY KEY AUTOINCREMENT,
        thread_id TEXT NOT NULL,
        round     INTEGER NOT NULL,                  -- 1-based, sequential per thread, never renumbered
        ts        REAL NOT NULL,
        role      TEXT,
        metadata  TEXT,                              -- JSON object or NULL
        content   TEXT NOT NULL,
        size      INTEGER NOT NULL                   -- characters counted against a thread budget
    );
    -- keyset paging backwards reads (round, size) from this index alone
    CREATE UNIQUE INDEX rounds_thread ON rounds(thread_id, round, size);

    CREATE TABLE inbox (                             -- messages from a person to running work (`git nerve tell`)
        id      INTEGER PRIMARY KEY AUTOINCREMENT,
        ts      REAL NOT NULL,
        scope   TEXT NOT NULL,                       -- 'task' | 'all' | 'queue'
        task_id TEXT,                                -- the task addressed (scope 'task'), or NULL
        kind    TEXT NOT NULL,                       -- 'stop' | 'skip' | 'add' | 'note'
        target  TEXT,                                -- the task named by skip/add
        text    TEXT NOT NULL
    );

    CREATE TABLE cursors (                           -- one per consumer: the last inbox id it has acted on
        consumer   TEXT PRIMARY KEY,
        last_id    INTEGER NOT NULL DEFAULT 0,
        updated_at REAL NOT NULL
    );

    CREATE TABLE outbox (                            -- acknowledgements and notifications for people
        id       INTEGER PRIMARY KEY AUTOINCREMENT,
        ts       REAL NOT NULL,
        consumer TEXT,
        inbox_id INTEGER,
        kind     TEXT NOT NULL,
        text     TEXT NOT NULL
    );
    CREATE UNIQUE INDEX outbox_once ON outbox(consumer, inbox_id, kind) WHERE inbox_id IS NOT NULL;
    """,
    # 2: notes delivered to a running agent (its CLI's hook, the MCP notes tool), and acted on.
    """
    CREATE TABLE deliveries (
        inbox_id  INTEGER NOT NULL,                  -- the note (inbox kind 'note')
        task_id   TEXT NOT NULL,                     -- the task whose agent it reached (a note to 'all' reaches many)
        ts        REAL NOT NULL,                     -- when it was handed to the agent
        reader    TEXT NOT NULL,                     -- who read it: e.g. 'claude (hook)', 'mcp: claude-code 2.1'
        pid       INTEGER,                           -- the process it reached, when known
        via       TEXT NOT NULL,                     -- 'hook' | 'mcp' | 'prompt'
        acted_at  REAL,                              -- when the agent acted on it (NULL: not yet)
        acted     TEXT,                              -- how: e.g. 'commit 1a2b3c4', 'stopped'
        PRIMARY KEY (inbox_id, task_id)
    );
    CREATE INDEX deliveries_task ON deliveries(task_id, acted_at);
    """,
    # 3: what git-nerve may delete of a task's branch. `adopted`: the branch existed before the task
    # (spawn --adopt): never deleted; NULL for tasks spawned before this column (cannot tell: kept too).
    # `pushed`: git-nerve itself pushed the branch (done): only then is it deleted on the remote.
    """
    ALTER TABLE workers ADD COLUMN adopted INTEGER DEFAULT 0;
    ALTER TABLE workers ADD COLUMN pushed INTEGER NOT NULL DEFAULT 0;
    UPDATE workers SET adopted = NULL;
    UPDATE workers SET pushed = 1 WHERE task_id IN
        (SELECT task_id FROM messages WHERE kind = 'review_request' AND instr(payload, '"pushed": true') > 0);
    """,
    # 4: what a task's worktree was given (git_nerve/worktree_prep): the ignored files copied into it, salted
    # hashes of the values of its copied .env files (never the values), its NERVE_PORT block, its setup
    # command's state and log, and its measured size.
    """
    CREATE TABLE task_prep (
        task_id       TEXT PRIMARY KEY,
        copied        TEXT NOT NULL DEFAULT '[]',    -- JSON list of paths relative to the worktree
        salt          TEXT,                          -- hex, per task
        secret_hashes TEXT NOT NULL DEFAULT '[]',    -- JSON list of [length, hex hmac-sha256(salt, value), file]
        port          INTEGER,                       -- base of the task's port block (NULL: none)
        setup_state   TEXT,                          -- NULL (no setup) | running | done | failed
        setup_log     TEXT,
        setup_pid     INTEGER,
        setup_exit    INTEGER,
        setup_started REAL,
        setup_ended   REAL,
        disk_bytes    INTEGER,
        disk_at       REAL
    );
    """,
    # 5: the value git-nerve last pushed of the task's branch (done), which every write of that branch on the
    # remote leases (`--force-with-lease=refs/heads/<branch>:<pushed_sha>`): a push onto it by someone else is
    # then never overwritten or deleted. Filled for earlier rows from their last pushed review request (the tip
    # that done pushed); NULL where none says so (cannot tell: the remote branch is kept).
    """
    ALTER TABLE workers ADD COLUMN pushed_sha TEXT;
    UPDATE workers SET pushed_sha = (
        SELECT substr(payload, instr(payload, '"sha": "') + 8, 40) FROM messages
        WHERE messages.task_id = workers.task_id AND kind = 'review_request'
          AND instr(payload, '"pushed": true') > 0 AND instr(payload, '"sha": "') > 0
        ORDER BY id DESC LIMIT 1)
    WHERE pushed = 1;
    """,
    # 6: what each task's agents used (issue 39): `usage` messages, one per round and model (bus/usage.py), read
    # per task for status and over a time range for `git nerve usage` and the day's budget.
    """
    CREATE INDEX IF NOT EXISTS messages_usage ON messages(task_id, ts) WHERE kind = 'usage';
    CREATE INDEX IF NOT EXISTS messages_usage_ts ON messages(ts) WHERE kind = 'usage';
    """,
    # 7: what git-nerve made of a task's branch is said by one record, its ownership record (git/ownership.py:
    # whether it was adopted, the value last pushed): the tasks spawned before are listed once, and the first
    # reader of each writes that record from the row (worker/owned.py branch_record), then drops it from here.
    """
    CREATE TABLE IF NOT EXISTS owned_legacy (task_id TEXT PRIMARY KEY);
    INSERT OR IGNORE INTO owned_legacy SELECT task_id FROM workers;
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)
