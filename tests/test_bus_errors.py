"""The bus translates its driver's errors: what leaves bus/ is the project's own BusError (exit 5, "bus error:
<the driver's words>"), BusBusy for a bus another process keeps locked; nothing above bus/ sees sqlite3's."""

from __future__ import annotations

import sqlite3

import pytest

from git_nerve.bus import workers
from git_nerve.bus.connection import Bus
from git_nerve.errors import BusBusy, BusError, ExitCode, NerveError


@pytest.fixture
def bus(tmp_path):
    b = Bus(tmp_path / "nerve" / "bus.db", ingest=False)
    yield b
    b.close()


def test_a_driver_error_leaves_the_bus_as_a_bus_error_with_exit_5(bus):
    with pytest.raises(BusError) as caught:
        bus.conn.execute("SELECT * FROM no_such_table")
    exc = caught.value
    assert isinstance(exc, NerveError) and exc.exit_code == ExitCode.DATABASE == 5
    assert exc.message == "bus error: no such table: no_such_table"
    assert isinstance(exc.driver, sqlite3.OperationalError) and exc.__cause__ is exc.driver


def test_an_error_inside_a_write_rolls_back_and_is_a_bus_error(bus):
    with pytest.raises(BusError):
        with bus.write() as conn:
            conn.execute("UPDATE workers SET state = 'X'")
            conn.execute("INSERT INTO no_such_table VALUES (1)")
    assert workers.all_workers(bus.conn) == []
    assert not bus.conn.in_transaction


def test_a_bus_another_process_keeps_locked_is_bus_busy(tmp_path, bus):
    other = sqlite3.connect(bus.path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        short = Bus(bus.path, busy_timeout=0.05, retries=2, ingest=False)
        try:
            with pytest.raises(BusBusy) as caught:
                with short.write():
                    pass
        finally:
            short.close()
        assert "stayed locked by another process" in caught.value.message and caught.value.exit_code == 5
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_a_closed_bus_is_a_bus_error_too(tmp_path):
    b = Bus(tmp_path / "nerve" / "bus.db", ingest=False)
    b.close()
    with pytest.raises(BusError, match="bus error: Cannot operate on a closed database"):
        b.conn.execute("SELECT 1")
