"""What a claim record and a log batch hold (pure: no I/O).

A claim record (``record.json`` in a commit of ``refs/nerve/claims/<task>``) says which state the task reached,
by which verb, on which machine, and which machine holds it; ``seq`` counts the chain's transitions. A log
batch (``events.jsonl`` in a commit of ``refs/nerve/log/<machine>``) holds that machine's new bus messages, one
JSON object a line, each with an id ``<machine>:<message id>`` that is never reused (so never ingested twice).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass

CLAIM_FILE = "record.json"
LOG_FILE = "events.jsonl"
CLAIMS = "refs/nerve/claims/"
LOGS = "refs/nerve/log/"
#: where a clone keeps the logs it fetched (its own log ref stays what it wrote)
PEERS = "refs/nerve/peers/"
PROBES = "refs/nerve/probe/"
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
        d = json.loads(data)
        return Record(d["task"], d["state"], d.get("previous"), d["verb"], d["machine"], d["owner"], int(d["seq"]),
                      float(d["ts"]))
    except (ValueError, KeyError, TypeError):
        return None


def machine_name(raw: str) -> str:
    """A host name made fit for a ref name (lower case; anything else but ``.``, ``_``, ``-`` becomes ``-``)."""
    name = re.sub(r"[^a-z0-9._-]+", "-", raw.strip().lower()).strip("-.")
    return name[:63] or "machine"


def valid_machine(name: str) -> bool:
    return bool(_MACHINE.match(name)) and ".." not in name and not name.endswith((".lock", "."))


def event(machine: str, msg_id: int, ts: float, task: str | None, kind: str, payload: dict) -> dict:
    return {"id": f"{machine}:{msg_id}", "machine": machine, "ts": ts, "task": task, "kind": kind, "payload": payload}


def encode_batch(events: list[dict]) -> bytes:
    return b"".join(json.dumps(e, sort_keys=True, ensure_ascii=False).encode() + b"\n" for e in events)


def decode_batch(data: bytes | None) -> list[dict]:
    out = []
    for line in (data or b"").splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict) and {"id", "machine", "ts", "kind"} <= e.keys():
            out.append(e)
    return out


def last_message_id(batch: list[dict]) -> int:
    """The highest message id a batch of one machine carries (0 for none)."""
    ids = [int(e["id"].rsplit(":", 1)[1]) for e in batch if e["id"].rsplit(":", 1)[-1].isdigit()]
    return max(ids, default=0)
