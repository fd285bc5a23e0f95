"""The bounded fuzz run CI makes: a fixed seed, a few hundred calls, a real server subprocess.

Every call is checked (server alive, RSS under budget, no INTERNAL / code-less UNKNOWN status, no
traceback or server path in a message, the canary next to the root intact); the test fails on the
first distinct failures with their shrunk reproducers. The long run is ``python -m tests.fuzz``.
"""

from __future__ import annotations

import os
import signal

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from tests.fuzz import runner
from tests.fuzz.generate import Call, PutData
from tests.fuzz.runner import (
    Outcome,
    check,
    execute,
    refused_by_transport,
    run_fuzz,
    status_of,
    unusual_kind,
)
from tests.fuzz.server import FuzzServer, ServerLimits
from tests.fuzz.wire import WIRE_LEN, WIRE_VARINT, Entry, Msg, Raw, encode, simpler, varint

#: Calls of the CI run: every RPC and action drawn many times, ~30 s on a loaded 2-core machine.
CI_CALLS = 500
CI_SEED = 20261123
#: Seconds of the run at most, server start-up included (a slow machine runs fewer calls, never a
#: longer job: with nine processes sharing two cores, start-up alone took ~20 s).
CI_SECONDS = 40.0


def test_bounded_fuzz_run_finds_no_failure() -> None:
    lines: list[str] = []
    report = run_fuzz(
        CI_CALLS,
        CI_SEED,
        max_seconds=CI_SECONDS,
        shrink_seconds=45.0,
        stop_after=4,
        log=lines.append,
        progress_every=0,
    )
    assert not report.failures, report.summary()
    assert report.calls > 0
    assert len(report.rpcs) >= 7, report.rpcs  # every RPC kind was exercised
    assert sum(n for k, n in report.rpcs.items() if k.startswith("sql ")) > 10, report.rpcs  # Flight SQL
    assert report.statuses.get("OK", 0) > report.calls // 20, report.statuses  # not only garbage


def test_wire_encoding_matches_protobuf() -> None:
    from flight_server._proto import flight_pb2 as pb

    scan = Msg(
        "ScanRequest",
        (Entry(1, WIRE_LEN, "t0", "dataset"), Entry(7, WIRE_VARINT, 5, "limit"), Entry(12, WIRE_VARINT, 3)),
    )
    parsed = pb.Ticket.FromString(encode(Msg("Ticket", (Entry(1, WIRE_LEN, scan),))))
    assert parsed.scan.dataset == "t0"
    assert parsed.scan.limit == 5
    assert list(parsed.scan.fragment_ids) == [3]
    # A non-finite double given a length-delimited wire type by a mutation (seed 912002 crashed
    # the run at ~3,000 calls on int(nan)).
    assert encode(Msg("X", (Entry(1, WIRE_LEN, float("nan")),))) == b"\x0a\x01\x00"
    assert varint(300) == b"\xac\x02"
    assert len(varint(-1)) == 10
    # Shrinking proposes strictly smaller variants.
    variants = list(simpler(Msg("X", (Entry(1, WIRE_LEN, "abc"), Raw(b"\x01\x02")))))
    assert Msg("X", (Raw(b"\x01\x02"),)) in variants
    assert Msg("X", (Entry(1, WIRE_LEN, "abc"),)) in variants


def test_checker_flags_internal_status_and_leaks(monkeypatch: pytest.MonkeyPatch) -> None:
    server = FuzzServer(ServerLimits())
    try:
        # A call that ran out of time is a hang only if the server then answers nothing either.
        slow = Outcome("DEADLINE_EXCEEDED", "Deadline Exceeded")
        assert check(server, slow, Call("do_put", path=(b"fresh",))) is None
        monkeypatch.setattr(runner, "PROBE_TIMEOUT_S", 1.0)
        os.kill(server.proc.pid, signal.SIGSTOP)
        try:
            stuck = check(server, slow, Call("do_put", path=(b"fresh",)))
        finally:
            os.kill(server.proc.pid, signal.SIGCONT)
        assert stuck is not None
        assert stuck[0] == "hang"
        client = flight.FlightClient(server.location)
        ok = execute(client, Call("list_actions"))
        assert ok.status == "OK"
        assert check(server, ok) is None
        bad = execute(client, Call("do_get", raw=b"\xff"))
        assert bad.status == "INVALID_ARGUMENT"
        assert check(server, bad) is None
        put = execute(client, Call("do_put", path=(b"fresh",), data=PutData(pa.table({"x": [1, 2]}))))
        assert put.status == "OK", put
        assert check(server, Outcome("INTERNAL", "x")) == ("status", "INTERNAL for a client request")
        assert check(server, Outcome("UNKNOWN", "x", "ALREADY_EXISTS")) is None
        leak = Outcome("INVALID_ARGUMENT", 'boom File "/srv/x.py", line 3')
        json_error = Outcome("INVALID_ARGUMENT", "not JSON: Expecting value: line 1 column 1 (char 0)")
        assert check(server, json_error) is None
        leaked = check(server, leak)
        assert leaked is not None
        assert leaked[0] == "leak"
        assert check(server, Outcome("NOT_FOUND", f"{server.root}/t: gone")) == (
            "leak",
            "message names a server path",
        )
        # Echoing a path the client itself sent (one it guessed) reveals nothing.
        guessed = str(server.canary).encode()
        echo_call = Call("do_action", raw=b"fragments " + guessed, action="commit")
        said = Outcome("INVALID_ARGUMENT", f"not a data file name: '{server.canary}'")
        assert check(server, said, echo_call) is None
        assert check(server, said) == ("leak", "message names a server path")
        server.canary.unlink()
        assert check(server, ok) == ("data-loss", "the canary file next to the root was deleted")
        assert status_of(flight.FlightInternalError("x")).status == "INTERNAL"
        client.close()
    finally:
        server.stop()
    assert check(server, Outcome("OK")) == ("crash", f"server exited with status {server.proc.returncode}")


def test_only_transport_refusals_of_invalid_utf8_paths_are_not_status_failures() -> None:
    empty = Outcome("INTERNAL", "Flight returned internal error, with message: ")
    assert refused_by_transport(Call("get_flight_info", path=(b"ok\x80",)), empty)
    # A valid path, or a server that said something, is ours to answer properly.
    assert not refused_by_transport(Call("get_flight_info", path=(b"ok",)), empty)
    said = Outcome("INTERNAL", "internal error (ValueError); see the server log", "INTERNAL")
    assert not refused_by_transport(Call("get_flight_info", path=(b"ok\x80",)), said)


def test_internal_and_unknown_answers_are_told_apart_in_the_summary() -> None:
    bad_path = Call("get_flight_info", path=(b"\xff\xfe",))
    transport = Outcome("INTERNAL", "Flight returned internal error, with message: ")
    assert unusual_kind(bad_path, transport) == "transport"
    good_path = Call("get_flight_info", path=(b"t",))
    assert unusual_kind(good_path, transport) == "FAILURE"
    exists = Outcome("UNKNOWN", "dataset t already exists", "ALREADY_EXISTS")
    assert unusual_kind(good_path, exists) == "coded"
    assert unusual_kind(good_path, Outcome("UNKNOWN", "boom [INTERNAL]", "INTERNAL")) == "FAILURE"
    assert unusual_kind(good_path, Outcome("UNKNOWN", "boom")) == "FAILURE"
