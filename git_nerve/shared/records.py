"""What a claim record and a log batch hold (pure: no I/O).

A claim record (``record.json`` in a commit of ``refs/nerve/claims/<task>``) says which state the task reached,
by which verb, on which machine, and which machine holds it; ``seq`` counts the chain's transitions. A log
batch (``events.jsonl`` in a commit of ``refs/nerve/log/<machine>``) holds that machine's new bus records, one
JSON object a line, each with an id ``<machine>:<stream><id>`` that is never reused (so never ingested twice),
and ``cursor.json`` the last id published of each stream. A batch of a machine with nothing new holds one
``alive`` beat (stream ``a``): it only moves the log for the leases and is no bus record, so never an event.
An archive batch (``finished.jsonl`` in a commit of ``refs/nerve/finished/<machine>``) lists the finished tasks
whose claim refs that machine archived: one line each, the task, the claim's final tip and its last record.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass

CLAIM_FILE = "record.json"
LOG_FILE = "events.jsonl"
CURSOR_FILE = "cursor.json"
CLAIMS = "refs/nerve/claims/"
LOGS = "refs/nerve/log/"
#: where a clone keeps the logs it fetched (its own log ref stays what it wrote)
PEERS = "refs/nerve/peers/"
PROBES = "refs/nerve/probe/"
#: each machine name's claim: the instance (clone) that uses it (:mod:`.identity`)
MACHINES = "refs/nerve/machines/"
#: each machine's archive of finished tasks' claims (append-only; first parent: the previous batch)
FINISHED = "refs/nerve/finished/"
FINISHED_FILE = "finished.jsonl"
#: the claim states after which a claim ref is archived (FAILED may still be retried: from the archived tip)
FINISHED_STATES = ("COMPLETED", "FAILED")
#: the mark of a move (`init --shared X --move`): where this repository's shared state is now (``moved.json``)
MOVED = "refs/nerve/moved/store"
MOVED_FILE = "moved.json"
#: the verb of the record a move freezes a claim with (every later compare-and-set of the old store loses)
MOVE = "move"
#: the kind of a log line that only moves the log (lease beat): never ingested as an event
ALIVE, ALIVE_STREAM = "alive", "a"
_MACHINE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")


@dataclass(frozen=True)
class Record:
    task: str
    state: str
    previous: str | None
    verb: str
    machine: str
    owner: str
    seq: int
    ts: float

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode() + b"\n"


def decode(data: bytes | None) -> Record | None:
    if not data:
        return None
    try:
        return _record(json.loads(data))
    except ValueError:
        return None


def _record(d) -> Record | None:
    try:
        return Record(d["task"], d["state"], d.get("previous"), d["verb"], d["machine"], d["owner"], int(d["seq"]),
                      float(d["ts"]))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def machine_name(raw: str) -> str:
    """A host name made fit for a ref name (lower case; anything else but ``.``, ``_``, ``-`` becomes ``-``)."""
    name = re.sub(r"[^a-z0-9._-]+", "-", raw.strip().lower()).strip("-.")
    return name[:63] or "machine"


def valid_machine(name: str) -> bool:
    return bool(_MACHINE.match(name)) and ".." not in name and not name.endswith((".lock", "."))


def encode_batch(events: list[dict]) -> bytes:
    return b"".join(json.dumps(e, sort_keys=True, ensure_ascii=False).encode() + b"\n" for e in events)


def _objects(data: bytes | None) -> list[dict]:
    """The lines of ``data`` that are JSON objects, parsed (any other line passed over)."""
    out = []
    for line in (data or b"").splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if isinstance(d, dict):
            out.append(d)
    return out


def decode_batch(data: bytes | None) -> list[dict]:
    return [e for e in _objects(data) if {"id", "machine", "ts", "kind"} <= e.keys()]


def is_record(event: dict) -> bool:
    """Is this batch line one of the machine's bus records (an event to ingest), not an ``alive`` beat? Told by
    its id's stream (a message may well have a kind of that name)."""
    return not str(event.get("id", "")).partition(":")[2].startswith(ALIVE_STREAM)


def encode_cursor(cursor: dict[str, int], instance: str | None = None) -> bytes:
    """``cursor.json``: the last id published of each stream and, from issue 36 on, the instance (clone) that
    wrote the batch (a string: :func:`decode_cursor` keeps only the numbers)."""
    return json.dumps({**cursor, **({"instance": instance} if instance else {})}, sort_keys=True).encode() + b"\n"


def cursor_instance(data: bytes | None) -> str | None:
    """The instance that wrote a batch, as its ``cursor.json`` says (None: none named, a batch of an older
    git-nerve or of a move)."""
    try:
        d = json.loads(data or b"{}")
    except ValueError:
        return None
    return d.get("instance") if isinstance(d, dict) and isinstance(d.get("instance"), str) else None


def decode_cursor(data: bytes | None) -> dict[str, int]:
    """{stream: last id published} of a batch (empty when unreadable: everything is published again, and the
    ids keep it from being ingested twice)."""
    try:
        d = json.loads(data or b"{}")
    except ValueError:
        return {}
    return {k: int(v) for k, v in d.items() if isinstance(v, int)} if isinstance(d, dict) else {}


def encode_finished(entries: list[tuple[str, Record]]) -> bytes:
    """An archive batch: (the claim's final tip, its last record) of each task archived."""
    return b"".join(json.dumps({"task": rec.task, "tip": tip, "record": asdict(rec)}, sort_keys=True).encode() + b"\n"
                    for tip, rec in entries)


def decode_finished(data: bytes | None) -> list[tuple[str, Record]]:
    out = []
    for d in _objects(data):
        rec = _record(d.get("record"))
        if rec is not None and isinstance(d.get("tip"), str) and len(d["tip"]) >= 40:
            out.append((d["tip"], rec))
    return out


@dataclass
class Snapshot:
    """Everything a shared store holds that a move carries (:mod:`.move`): every task's claim (its last record:
    state, holder, last mover, verb, ``seq``: the version fencing compares), each machine's events in the order
    it published them, and each machine's cursor (the last id of each of its streams published)."""

    claims: dict[str, Record]
    events: dict[str, list[dict]]
    cursors: dict[str, dict[str, int]]

    def counts(self) -> dict[str, int]:
        return {"claims": len(self.claims), "events": sum(len(v) for v in self.events.values()),
                "machines": len(set(self.events) | set(self.cursors))}


def encode_mark(mark: dict) -> bytes:
    return json.dumps(mark, sort_keys=True).encode() + b"\n"


def decode_mark(data: bytes | None) -> dict | None:
    try:
        d = json.loads(data or b"null")
    except ValueError:
        return None
    return d if isinstance(d, dict) and isinstance(d.get("backend"), str) else None
