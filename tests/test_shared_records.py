"""The pure parts of shared mode: what a record holds, machine names, redaction (no repository)."""

from __future__ import annotations

from git_nerve.redact import url_credentials as redacted
from git_nerve.shared import records


def test_a_record_round_trips_and_garbage_is_no_record():
    rec = records.Record("t", "WORKING", "ASSIGNED", "start", "one", "one", 2, 1.5)
    assert records.decode(rec.encode()) == rec
    for bad in (b"", b"not json", b"{}", b'{"task": "t"}', b'[1, 2]'):
        assert records.decode(bad) is None


def test_machine_names_are_fit_for_a_ref():
    assert records.machine_name("Build-Box.local") == "build-box.local"
    assert records.machine_name("my laptop (2)") == "my-laptop-2"
    assert records.machine_name("***") == "machine"
    assert records.valid_machine("ci-7") and not records.valid_machine("a..b") and not records.valid_machine("x.lock")
    assert not records.valid_machine("Upper") and not records.valid_machine("-lead")


def test_batches_keep_only_events_and_cursors_only_numbers():
    batch = [{"id": "a:m1", "machine": "a", "ts": 1.0, "kind": "heartbeat", "task": "t", "payload": {}}]
    assert records.decode_batch(records.encode_batch(batch) + b"garbage\n{\"id\": 1}\n") == batch
    assert records.decode_cursor(records.encode_cursor({"m": 3, "r": 1})) == {"m": 3, "r": 1}
    assert records.decode_cursor(b"nonsense") == {} and records.decode_cursor(b'{"m": "x"}') == {}


def test_credentials_in_urls_are_redacted():
    said = "fatal: unable to access 'https://bob:ghp_token@example.com/x.git/': 403"
    assert redacted(said) == "fatal: unable to access 'https://***@example.com/x.git/': 403"
    assert redacted("ssh://git@host/x") == "ssh://***@host/x" and redacted("no url here") == "no url here"


def test_a_spawn_never_moves_back_a_claim_its_machine_holds_in_another_state():
    """Found by the 64-process race: a spawn's claim (new task, this machine takes it) over a claim this machine
    already holds as WORKING moved it back to ASSIGNED; on both backends (the same judge)."""
    from git_nerve.shared import judge

    working = records.Record("t", "WORKING", "ASSIGNED", "start", "one", "one", 2, 1.5)
    refused = judge.refusal("t", working, None, True, "one")
    assert refused is not None and "held by machine one (WORKING" in refused.message
    assigned = records.Record("t", "ASSIGNED", None, "takeover", "one", "one", 3, 2.0)
    assert judge.taken_here(assigned, None, "ASSIGNED", True, "one")  # the spawn after a takeover goes on
    # a takeover expects the holder it judged: another taker got there first
    taken = records.Record("t", "ASSIGNED", "WORKING", "takeover", "three", "three", 4, 3.0)
    assert judge.refusal("t", taken, "ASSIGNED", True, "two", holder="one") is not None
    assert judge.refusal("t", assigned, "ASSIGNED", True, "two", holder="one") is None


def test_an_archive_batch_round_trips_and_skips_what_it_cannot_read():
    rec = records.Record("t", "COMPLETED", "APPROVED", "merge", "one", "one", 6, 1.5)
    data = records.encode_finished([("a" * 40, rec)]) + b"not json\n" + b'{"tip": "short", "record": {}}\n'
    assert records.decode_finished(data) == [("a" * 40, rec)]
    assert records.decode_finished(None) == [] and records.decode_finished(b'{"tip": "' + b"b" * 40 + b'", "record": 3}\n') == []


def test_a_peers_record_is_judged_by_its_form_the_state_machine_and_this_machines_lease():
    from git_nerve.shared import vet

    working = records.Record("t", "WORKING", "ASSIGNED", "start", "one", "one", 2, 1.0)

    def rec(**kw):
        return records.Record(**{**working.__dict__, "previous": "WORKING", "seq": 3, **kw})

    for task in ("a\nb", "../x", "other"):
        assert vet.step(None, rec(task=task), "t", "one") is not None  # the ref's own name, a task id
    assert vet.step(None, rec(machine="a b"), "t", "one") is not None
    assert vet.step(None, rec(state="DONE"), "t", "one") is not None
    assert vet.step(None, rec(state="COMPLETED", verb="merge", machine="evil"), "t", "one") is None  # first sight
    assert "WORKING -> COMPLETED" in vet.step(working, rec(state="COMPLETED", verb="merge", machine="evil"), "t", "one")
    assert "moved a task machine one holds" in vet.step(working, rec(state="FAILED", verb="cancel", machine="two"),
                                                        "t", "one")
    assert vet.step(working, rec(state="IN_REVIEW", verb="done"), "t", "one") is None  # the holder's own
    review = rec(state="IN_REVIEW", verb="done")
    assert vet.step(review, rec(state="APPROVED", verb="approve", machine="two"), "t", "one") is None  # any machine
    taken = rec(state="ASSIGNED", verb="takeover", machine="two", owner="two")
    assert "not by a takeover" in vet.step(working, rec(state="ASSIGNED", verb="start", machine="two", owner="two"),
                                           "t", "one")
    assert "before its lease ran out here" in vet.step(working, taken, "t", "one", lambda: 5.0, lease=600)
    assert vet.step(working, taken, "t", "one", lambda: 601.0, lease=600) is None
    assert vet.step(working, taken, "t", "three", lambda: 5.0, lease=600) is None  # not this machine's task
    assert vet.event_fault({"id": "two:m1", "machine": "one", "ts": 1.0, "kind": "x"}, "two") is not None
    assert vet.event_fault({"id": "two:m1", "machine": "two", "ts": 1.0, "kind": "x", "task": "a\nb"}, "two")
    assert vet.event_fault({"id": "two:m1", "machine": "two", "ts": 1.0, "kind": "x", "task": "t"}, "two") is None
