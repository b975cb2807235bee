"""Reading change events (docs/protocol.md, Change events): what a message
on dagnats.lease.changed.<key> says, whatever the case of its headers."""

from __future__ import annotations

from dagnats_leases import ChangeEvent, decode_change

SUBJECT = "dagnats.lease.changed.k"
RECORD = b'{"v":1,"holder":"b","ttl_ms":1000,"acquired_at":"2026-10-18T12:00:00Z","written_at":"2026-10-18T12:00:00Z","prev":7}'


def test_an_expiry_marker_is_expired() -> None:
    got = decode_change(SUBJECT, {"Nats-Sequence": "9", "Nats-Marker-Reason": "MaxAge"}, b"")
    assert got == ChangeEvent("expired", "k", 9, None)
    assert got.ends_tenure


def test_a_release_is_released_and_names_its_holder() -> None:
    tombstone = b'{"v":1,"holder":"a","released_at":"2026-10-18T12:00:00Z","prev":8}'
    for headers in (
        {"Nats-Sequence": "10", "Dagnats-Lease-Event": "released", "KV-Operation": "PURGE"},
        {"Nats-Sequence": "10", "Dagnats-Lease-Event": "released"},
        {"Nats-Sequence": "10", "KV-Operation": "DEL"},
    ):
        got = decode_change(SUBJECT, headers, tombstone)
        assert got == ChangeEvent("released", "k", 10, "a"), headers


def test_acquired_and_renewed_name_the_holder() -> None:
    for event in ("acquired", "renewed"):
        got = decode_change(SUBJECT, {"Nats-Sequence": "8", "Dagnats-Lease-Event": event}, RECORD)
        assert got == ChangeEvent(event, "k", 8, "b")
        assert got is not None and not got.ends_tenure


def test_headers_are_read_whatever_the_case_of_their_names() -> None:
    got = decode_change(SUBJECT, {"nats-sequence": "8", "DAGNATS-LEASE-EVENT": "acquired"}, RECORD)
    assert got == ChangeEvent("acquired", "k", 8, "b")


def test_a_message_that_is_not_a_change_event_is_none() -> None:
    assert decode_change("elsewhere.k", {"Nats-Sequence": "8", "Dagnats-Lease-Event": "acquired"}, RECORD) is None
    assert decode_change(SUBJECT, {"Dagnats-Lease-Event": "acquired"}, RECORD) is None
    assert decode_change(SUBJECT, {"Nats-Sequence": "x8", "Dagnats-Lease-Event": "acquired"}, RECORD) is None
    assert decode_change(SUBJECT, {"Nats-Sequence": "8"}, RECORD) is None
    assert decode_change(SUBJECT, None, RECORD) is None
