"""Floor 1: the bus, the single source of truth. The only place SQL lives.

Standard library only (sqlite3): the hooks and ``git worker heartbeat`` load
it on every call.

* :mod:`.connection`: opening the database (WAL, busy timeout, retry,
  ``BEGIN IMMEDIATE``), refusing network filesystems and newer schemas.
* :mod:`.schema`: versioned migrations.
* :mod:`.workers`, :mod:`.messages`, :mod:`.rounds`, :mod:`.steer`: one small
  module per table family.
"""

from .connection import Bus, open_bus

__all__ = ["Bus", "open_bus"]
