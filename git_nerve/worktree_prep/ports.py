"""NERVE_PORT: a block of ports per live task, distinct among live tasks, stable for the task's life.

Allocated in one bus write transaction (BEGIN IMMEDIATE), so two spawns never take one block; a task
that ends (COMPLETED, FAILED) frees its block without anything being deleted: only live tasks' blocks
count as taken (bus/prep.py).
"""

from __future__ import annotations

from ..bus import prep as busprep
from .config import PrepConfig


def allocate(bus, task_id: str, cfg: PrepConfig) -> int | None:
    first, end = cfg.port_range
    with bus.write() as conn:
        return busprep.allocate_port(conn, task_id, first, end, cfg.port_block)


def port_of(conn, task_id: str) -> int | None:
    return busprep.live_port(conn, task_id)


def env_for(conn, task_id: str) -> dict[str, str]:
    """What an agent or setup started for the task gets: NERVE_TASK_ID, and NERVE_PORT when it has one."""
    port = port_of(conn, task_id)
    return {"NERVE_TASK_ID": task_id, **({"NERVE_PORT": str(port)} if port is not None else {})}
