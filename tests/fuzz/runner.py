"""Run generated calls against the server, check each answer, and shrink what fails.

After every call the checker asks: is the server process alive, is its resident size under the
budget, did the call end in a status a client can act on (never INTERNAL, or UNKNOWN without a
machine-readable code: each of those is a server bug, whatever the input was), and does no message
carry a Python traceback or a server path (the root, the canary next to it)? The canary file next
to the root must also survive every call.

A failure is shrunk on a fresh server holding only the fixture datasets: entries are removed and
values simplified while the same failure (same check, same status) still happens, so the printed
case is small and reproduces on its own.
"""

from __future__ import annotations

import contextlib
import random
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import pyarrow as pa
import pyarrow.flight as flight

from flight_server.errors import ERROR_CODES
from flight_server.requests import END_OF_WRITE
from tests.fuzz.generate import Call, Context, Generator, PutData
from tests.fuzz.server import FuzzServer, ServerLimits, bound_datasets, memory_report, populate
from tests.fuzz.wire import Entry, Msg, describe, parse_text, simpler, sql_handle

__all__ = ["Failure", "FuzzReport", "Outcome", "execute", "run_fuzz"]

#: Seconds one fuzz call may take: every call is on a small dataset, so a call that needs more is
#: stuck (or doing unbounded work), which is a finding in itself.
CALL_TIMEOUT_S = 30.0
#: Calls between checks that the fixture datasets are still small (:func:`bound_datasets`): a
#: check is a few ``stats`` calls, and 500 calls append to one dataset a handful of times at most.
BOUND_EVERY = 500
#: Seconds a probe of the server may take after a call ran out of time: a server that answers a
#: cheap call on the same dataset within this is busy with big work (a 300-column write split
#: into hundreds of files, a compaction), not stuck; one that does not is hung.
PROBE_TIMEOUT_S = 20.0
#: Seconds to wait for the server to exit after an UNAVAILABLE answer (it may be dying).
UNAVAILABLE_GRACE_S = 1.0
#: Calls tried while shrinking one failure (each a round trip; a crash costs a server restart).
SHRINK_ATTEMPTS = 150
#: The message a raw payload of each RPC is meant to be.
PAYLOAD_TYPES = {
    "do_get": "Ticket",
    "do_action": "ActionRequest",
    "get_flight_info": "Command",
    "get_schema": "Command",
    "do_put": "Command",
    "do_exchange": "Ticket",
}
#: Payloads longer than this are described, not printed as hex.
REPRO_HEX_BYTES = 2048
#: Text that only a Python traceback or source location puts in a message.
LEAK_PATTERNS = (
    re.compile(r"Traceback"),
    re.compile(r'File "'),
    re.compile(r'\.py"'),
    # A frame's location (`File "x.py", line 12, in f`), not any "line 1" (JSON errors say that).
    re.compile(r'", line \d+'),
)

_STATUS_BY_CLASS: tuple[tuple[type[BaseException], str], ...] = (
    (flight.FlightInternalError, "INTERNAL"),
    (flight.FlightTimedOutError, "DEADLINE_EXCEEDED"),
    (flight.FlightCancelledError, "CANCELLED"),
    (flight.FlightUnauthenticatedError, "UNAUTHENTICATED"),
    (flight.FlightUnauthorizedError, "PERMISSION_DENIED"),
    (flight.FlightUnavailableError, "UNAVAILABLE"),
    (flight.FlightServerError, "UNKNOWN"),
    (pa.ArrowKeyError, "NOT_FOUND"),
    (pa.ArrowNotImplementedError, "UNIMPLEMENTED"),
    (pa.ArrowInvalid, "INVALID_ARGUMENT"),
    (pa.ArrowCapacityError, "RESOURCE_EXHAUSTED"),
)


@dataclass(frozen=True)
class Outcome:
    """How one call ended: ``status`` OK or a gRPC code name, the message and the error code."""

    status: str
    message: str = ""
    code: str | None = None
    elapsed_s: float = 0.0


def status_of(exc: BaseException) -> Outcome:
    """The gRPC status a client-side exception stands for."""
    message = str(exc)
    match = re.search(r"gRPC client debug context: ([A-Z_]+):", message)
    status = "UNKNOWN"
    for cls, name in _STATUS_BY_CLASS:
        if isinstance(exc, cls):
            status = name
            break
    else:
        if match:
            status = match.group(1)
        elif message.startswith("Flight returned timeout error"):
            status = "DEADLINE_EXCEEDED"  # get_schema raises a bare OSError for its timeout
        elif "RESOURCE_EXHAUSTED" in message or "larger than max" in message:
            status = "RESOURCE_EXHAUSTED"
    extra = getattr(exc, "extra_info", b"") or b""
    code = extra.decode("ascii", "replace") if isinstance(extra, bytes) else str(extra)
    return Outcome(status, message, code if code in ERROR_CODES else None)


@dataclass
class Failure:
    """One check that failed: which, on which call, and what was seen."""

    check: str
    call: Call
    outcome: Outcome | None
    detail: str
    index: int
    shrunk: Call | None = None
    reproduces_alone: bool | None = None

    def signature(self) -> tuple[str, ...]:
        status = self.outcome.status if self.outcome else ""
        first = re.sub(r"\d+|'[^']*'", "#", (self.outcome.message if self.outcome else self.detail)[:60])
        return (self.check, self.call.rpc, self.call.action, status, first)

    def render(self, location: str = "grpc://127.0.0.1:<port>") -> str:
        case = self.shrunk or self.call
        lines = [
            f"[{self.check}] call #{self.index}: {case.rpc}"
            + (f" action={case.action!r}" if case.action else "")
            + (f" ({case.note})" if case.note else "")
            + (f" [client cancels after {case.cancel_after}]" if case.cancel_after is not None else ""),
            f"  seen: {self.detail}",
        ]
        if self.outcome is not None:
            out = self.outcome
            lines.append(f"  status: {out.status} code={out.code} message={out.message[:300]!r}")
        if case.msg is not None:
            lines.append(f"  message: {describe(case.msg)[:1500]}")
        elif case.raw is not None and case.rpc in PAYLOAD_TYPES:
            lines.append(f"  payload as protobuf parses it: {parse_text(PAYLOAD_TYPES[case.rpc], case.raw)}")
        if self.reproduces_alone is False:
            lines.append("  (did not reproduce alone on a fresh server: depends on earlier calls)")
        lines.append("  reproduce: " + reproducer(case, location))
        return "\n".join(lines)


def reproducer(call: Call, location: str) -> str:
    """Python that sends ``call`` with a bare pyarrow Flight client (fixture datasets assumed)."""
    head = f"c = pyarrow.flight.FlightClient({location!r}); "
    payload = call.payload()
    if len(payload) > REPRO_HEX_BYTES:
        return f"{call.rpc} with a {len(payload)}-byte payload (too long to print; see the message above)"
    if call.path is not None:
        desc = f"pyarrow.flight.FlightDescriptor.for_path(*{list(call.path)!r})"
    else:
        desc = f"pyarrow.flight.FlightDescriptor.for_command(bytes.fromhex({payload.hex()!r}))"
    if call.rpc == "do_get":
        return head + f"c.do_get(pyarrow.flight.Ticket(bytes.fromhex({payload.hex()!r}))).read_all()"
    if call.rpc == "do_action":
        return (
            head
            + f"list(c.do_action(pyarrow.flight.Action({call.action!r}, bytes.fromhex({payload.hex()!r}))))"
        )
    if call.rpc in ("get_flight_info", "get_schema"):
        return head + f"c.{call.rpc}({desc})"
    if call.rpc == "list_flights":
        return head + f"list(c.list_flights({payload!r}))"
    if call.rpc == "list_actions":
        return head + "list(c.list_actions())"
    table = call.data.table if call.data else None
    columns = ", ".join(f"{f.name}: {f.type}" for f in table.schema) if table is not None else ""
    if len(columns) > 300:
        columns = f"{columns[:300]}... ({table.num_columns if table is not None else 0} columns)"
    rows = table.num_rows if table is not None else 0
    return head + f"c.{call.rpc}({desc}, ...) sending {rows} rows of schema [{columns}]"


def _descriptor(call: Call) -> flight.FlightDescriptor:
    if call.path is not None:
        return flight.FlightDescriptor.for_path(*call.path)
    return flight.FlightDescriptor.for_command(call.payload())


def _send(client: flight.FlightClient, call: Call, ctx: Context | None) -> None:
    opts = flight.FlightCallOptions(timeout=CALL_TIMEOUT_S)
    rpc = call.rpc
    if rpc == "do_get":
        reader = client.do_get(flight.Ticket(call.payload()), opts)
        for read, _ in enumerate(reader, 1):
            if call.cancel_after is not None and read >= call.cancel_after:
                break
        if call.cancel_after is not None:
            reader.cancel()
    elif rpc in ("get_flight_info",):
        info = client.get_flight_info(_descriptor(call), opts)
        if ctx is not None:
            for ep in list(info.endpoints)[:20]:
                ctx.remember_ticket(ep.ticket.ticket)
                _remember_handle(ctx, ep.ticket.ticket)
    elif rpc == "get_schema":
        client.get_schema(_descriptor(call), opts)
    elif rpc == "do_action":
        for result in client.do_action(flight.Action(call.action, call.payload()), opts):
            if ctx is not None:
                _remember_handle(ctx, result.body.to_pybytes())
    elif rpc == "list_flights":
        list(client.list_flights(call.payload(), opts))
    elif rpc == "list_actions":
        list(client.list_actions(opts))
    elif rpc == "do_put":
        _put(client, call, opts, ctx)
    elif rpc == "do_exchange":
        _exchange(client, call, opts)
    else:
        raise ValueError(f"unknown rpc {rpc}")


def _put(
    client: flight.FlightClient, call: Call, opts: flight.FlightCallOptions, ctx: Context | None
) -> None:
    data = call.data or PutData(pa.table({}))
    writer, meta = client.do_put(_descriptor(call), data.table.schema, opts)
    try:
        for sent, batch in enumerate(data.table.to_batches()):
            if call.cancel_after is not None and sent >= call.cancel_after:
                return  # closed without done_writing: the server sees the stream end abruptly
            writer.write_batch(batch)
        if data.junk_metadata is not None:
            writer.write_metadata(pa.py_buffer(data.junk_metadata))
        if data.end_marker:
            writer.write_metadata(pa.py_buffer(END_OF_WRITE))
        writer.done_writing()
        buf = meta.read()
    finally:
        writer.close()
    if ctx is not None and buf is not None:
        from flight_server._serde import decode_write_result

        _remember_handle(ctx, buf.to_pybytes())
        with contextlib.suppress(ValueError):
            ctx.remember_staged(decode_write_result(buf.to_pybytes()).fragments)


def _remember_handle(ctx: Context, answer: bytes) -> None:
    handle = sql_handle(answer)
    if handle is not None:
        ctx.remember_sql_handle(handle)


def _exchange(client: flight.FlightClient, call: Call, opts: flight.FlightCallOptions) -> None:
    data = call.data or PutData(pa.table({}))
    writer, reader = client.do_exchange(_descriptor(call), opts)
    try:
        writer.begin(data.table.schema)
        for sent, batch in enumerate(data.table.to_batches()):
            if call.cancel_after is not None and sent >= call.cancel_after:
                reader.cancel()
                return
            writer.write_batch(batch)
            reader.read_chunk()
        writer.done_writing()
        for _ in reader:
            pass
    finally:
        writer.close()


def execute(client: flight.FlightClient, call: Call, ctx: Context | None = None) -> Outcome:
    """Send ``call``; how it ended."""
    start = time.monotonic()
    try:
        _send(client, call, ctx)
    except (flight.FlightError, pa.ArrowException, OSError) as exc:
        out = status_of(exc)
        return replace(out, elapsed_s=time.monotonic() - start)
    return Outcome("OK", elapsed_s=time.monotonic() - start)


def _pattern(message: str) -> str:
    """A message with its numbers and quoted parts blanked, cut short: answers of one kind group."""
    text = message.split(". gRPC client debug context", 1)[0]
    return re.sub(r"\d+|'[^']*'|\"[^\"]*\"", "#", text)[:90]


def unusual_kind(call: Call | None, outcome: Outcome) -> str:
    """Why an INTERNAL or UNKNOWN answer is or is not a failure, for the run's summary:
    ``transport`` (gRPC refused an invalid UTF-8 descriptor path before any server code ran),
    ``coded`` (a documented error code: ALREADY_EXISTS, COMMIT_CONFLICT, CORRUPT_DATA...) or
    ``FAILURE`` (what :func:`check` reports)."""
    if refused_by_transport(call, outcome):
        return "transport"
    if outcome.status == "UNKNOWN" and outcome.code not in (None, "INTERNAL"):
        return "coded"
    return "FAILURE"


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def refused_by_transport(call: Call | None, outcome: Outcome) -> bool:
    """Whether gRPC's C++ layer refused ``call`` before any server code ran: a descriptor path is a
    protobuf ``string``, and invalid UTF-8 there fails parsing in Arrow's C++ Flight server, which
    answers INTERNAL (or UNKNOWN on streams) with no message. pyarrow gives Python no hook there
    (docs/flight-protocol.md says so); such calls are checked for everything but their status."""
    if call is None or call.path is None or all(_utf8(p) for p in call.path):
        return False
    server_said = outcome.message.split(". gRPC client debug context", 1)[0]
    return outcome.status in ("INTERNAL", "UNKNOWN") and server_said in (
        "Flight returned internal error, with message: ",
        "Flight returned internal error, with message: . Detail: Internal",
        "Stream finished before first message sent",
    )


def _dataset_of(call: Call | None) -> bytes | None:
    """The dataset name a call names first (its path, or a ``dataset`` field anywhere)."""
    if call is None:
        return None
    if call.path:
        return call.path[0]
    todo = [call.msg] if call.msg is not None else []
    while todo:
        msg = todo.pop()
        for entry in msg.entries:
            if isinstance(entry, Entry) and isinstance(entry.value, Msg):
                todo.append(entry.value)
            elif (
                isinstance(entry, Entry) and entry.label == "dataset" and isinstance(entry.value, str | bytes)
            ):
                value = entry.value
                return value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
    return None


def responsive(server: FuzzServer, call: Call | None) -> bool:
    """Whether the server answers a cheap call on the dataset ``call`` named (any answer: NOT_FOUND
    is one) within :data:`PROBE_TIMEOUT_S`: busy with the slow call, not stuck."""
    if not server.alive:
        return False
    dataset = _dataset_of(call)
    probe = Call("get_schema", path=(dataset,)) if dataset else Call("list_actions")
    client = flight.FlightClient(server.location)
    try:
        opts = flight.FlightCallOptions(timeout=PROBE_TIMEOUT_S)
        try:
            if probe.path is not None:
                client.get_schema(flight.FlightDescriptor.for_path(*probe.path), opts)
            else:
                list(client.list_actions(opts))
        except (flight.FlightError, pa.ArrowException, OSError) as exc:
            return status_of(exc).status not in ("DEADLINE_EXCEEDED", "UNAVAILABLE")
        return True
    finally:
        client.close()


def check(server: FuzzServer, outcome: Outcome, call: Call | None = None) -> tuple[str, str] | None:
    """The first check ``outcome`` (and the server after it) fails, as (check, detail)."""
    if outcome.status == "UNAVAILABLE":
        # A dropped connection may be a dying server: give the kernel a moment to reap it.
        server.wait_exit(UNAVAILABLE_GRACE_S)
    if not server.alive:
        return "crash", f"server exited with status {server.proc.returncode}"
    if outcome.status == "DEADLINE_EXCEEDED" and not responsive(server, call):
        return "hang", f"no answer within {CALL_TIMEOUT_S:.0f}s, nor to a probe within {PROBE_TIMEOUT_S:.0f}s"
    bad_status = outcome.status == "INTERNAL" or (
        outcome.status == "UNKNOWN" and outcome.code in (None, "INTERNAL")
    )
    if bad_status and not refused_by_transport(call, outcome):
        return "status", f"{outcome.status} for a client request"
    for pattern in LEAK_PATTERNS:
        if pattern.search(outcome.message):
            return "leak", f"message matches {pattern.pattern!r}"
    sent = b"" if call is None else call.payload() + b"".join(call.path or ())
    for secret in (str(server.base), str(server.root)):
        # Echoing what the client itself sent (a path it guessed) reveals nothing.
        if secret in outcome.message and secret.encode() not in sent:
            return "leak", "message names a server path"
    if not server.canary.exists():
        return "data-loss", "the canary file next to the root was deleted"
    rss = server.rss()
    if rss > server.limits.rss_budget:
        return "memory", f"RSS {rss >> 20} MiB over the budget of {server.limits.rss_budget >> 20} MiB"
    return None


@dataclass
class FuzzReport:
    """What a run did and found."""

    seed: int
    calls: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    #: INTERNAL and UNKNOWN answers by (kind, rpc, action, status, error code, message pattern):
    #: which calls produced them, including those no check counts as failures (kinds of
    #: :func:`unusual_kind`).
    odd: dict[tuple[str, ...], int] = field(default_factory=dict)
    rpcs: dict[str, int] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    restarts: int = 0
    #: Fixture datasets rewritten small again (:func:`bound_datasets`).
    rewrites: int = 0
    #: Calls that ran out of time while the server stayed responsive (big work, not a hang).
    slow: int = 0
    slow_kinds: set[str] = field(default_factory=set)
    max_rss: int = 0
    elapsed_s: float = 0.0
    unique: dict[tuple[str, ...], Failure] = field(default_factory=dict)

    def summary(self) -> str:
        lines = [
            f"fuzz: seed={self.seed} calls={self.calls} failures={len(self.failures)} "
            f"(distinct {len(self.unique)}) slow={self.slow} restarts={self.restarts} "
            f"rewrites={self.rewrites} max_rss={self.max_rss >> 20}MiB "
            f"in {self.elapsed_s:.0f}s",
            "  rpcs: " + ", ".join(f"{k}={v}" for k, v in sorted(self.rpcs.items())),
            "  statuses: " + ", ".join(f"{k}={v}" for k, v in sorted(self.statuses.items())),
        ]
        for key, count in sorted(self.odd.items(), key=lambda kv: -kv[1]):
            lines.append(f"  {count:6d} x " + " | ".join(key))
        for failure in self.unique.values():
            lines.append(failure.render())
        return "\n".join(lines)


class _Session:
    """A server with the fixture datasets and a client on it; restarted when it dies."""

    def __init__(self, limits: ServerLimits) -> None:
        self.limits = limits
        self.server = FuzzServer(limits)
        try:
            self.ctx = populate(self.server.location, str(self.server.canary))
        except BaseException:
            self.server.stop()
            raise
        self.client = flight.FlightClient(self.server.location)

    def close(self) -> None:
        self.client.close()
        self.server.stop()


def shrink(
    failure: Failure, limits: ServerLimits, log: Callable[[str], None], seconds: float | None = None
) -> Failure:
    """``failure`` with its call made small on a fresh server (same check, same status).

    Stops after :data:`SHRINK_ATTEMPTS` calls or ``seconds``, with the smallest case found so far.
    """
    deadline = None if seconds is None else time.monotonic() + seconds
    session = _Session(limits)
    wanted = (failure.check, failure.outcome.status if failure.outcome else None)

    def fails(call: Call) -> bool:
        nonlocal session
        if not session.server.alive:
            session.close()
            session = _Session(limits)
        outcome = execute(session.client, call)
        got = check(session.server, outcome, call)
        return got is not None and (got[0], outcome.status if got[0] != "crash" else None) == (
            wanted[0],
            wanted[1] if wanted[0] != "crash" else None,
        )

    try:
        best = failure.call
        if not fails(best):
            return replace(failure, reproduces_alone=False)
        attempts = 0
        improved = True
        while improved and attempts < SHRINK_ATTEMPTS and (deadline is None or time.monotonic() < deadline):
            improved = False
            for candidate in _candidates(best):
                attempts += 1
                if fails(candidate):
                    best = candidate
                    improved = True
                    break
                if attempts >= SHRINK_ATTEMPTS or (deadline is not None and time.monotonic() > deadline):
                    improved = False
                    break
        log(f"  shrunk in {attempts} attempts")
        return replace(failure, shrunk=best, reproduces_alone=True)
    finally:
        session.close()


def _candidates(call: Call) -> Iterator[Call]:
    if call.msg is not None:
        for m in simpler(call.msg):
            yield replace(call, msg=m)
    if call.raw is not None and len(call.raw) > 1:
        yield replace(call, raw=call.raw[: len(call.raw) // 2])
    if call.data is not None and call.data.table.num_rows > 1:
        t = call.data.table
        yield replace(call, data=replace(call.data, table=t.slice(0, t.num_rows // 2)))
    if call.data is not None and call.data.table.num_columns > 1:
        t = call.data.table
        yield replace(call, data=replace(call.data, table=t.select(range(t.num_columns // 2))))


def run_fuzz(
    calls: int,
    seed: int,
    *,
    limits: ServerLimits | None = None,
    max_seconds: float | None = None,
    shrink_failures: bool = True,
    shrink_seconds: float | None = None,
    stop_after: int | None = None,
    log: Callable[[str], None] = print,
    progress_every: int = 1000,
) -> FuzzReport:
    """Send ``calls`` generated calls (seeded) and check each one; the report of the run."""
    limits = limits or ServerLimits()
    report = FuzzReport(seed)
    rng = random.Random(seed)
    start = time.monotonic()
    session = _Session(limits)
    try:
        gen = Generator(rng, session.ctx)
        for index in range(calls):
            if max_seconds is not None and time.monotonic() - start > max_seconds:
                log(f"fuzz: time budget of {max_seconds:.0f}s reached after {index} calls")
                break
            call = gen.call()
            outcome = execute(session.client, call, session.ctx)
            report.calls += 1
            rpc_key = f"sql {call.rpc}" if call.note.startswith("flight-sql") else call.rpc
            report.rpcs[rpc_key] = report.rpcs.get(rpc_key, 0) + 1
            report.statuses[outcome.status] = report.statuses.get(outcome.status, 0) + 1
            if outcome.status in ("INTERNAL", "UNKNOWN"):
                key = (unusual_kind(call, outcome), call.rpc, call.action or "-", outcome.status)
                key += (outcome.code or "-", _pattern(outcome.message))
                report.odd[key] = report.odd.get(key, 0) + 1
            report.max_rss = max(report.max_rss, session.server.rss())
            bad = check(session.server, outcome, call)
            if bad is None and outcome.status == "DEADLINE_EXCEEDED":
                report.slow += 1
                kind = f"{call.rpc} {call.action}".strip()
                if kind not in report.slow_kinds:  # the first of each kind, for the record
                    report.slow_kinds.add(kind)
                    what = describe(call.msg)[:300] if call.msg else ""
                    log(f"[slow, server responsive] call #{index}: {kind}: {what}")
            if bad is not None:
                failure = Failure(bad[0], call, outcome if bad[0] != "crash" else None, bad[1], index)
                if bad[0] == "crash":
                    failure.detail += "; log: " + session.server.log_tail(600).replace("\n", " | ")
                report.failures.append(failure)
                sig = failure.signature()
                if sig not in report.unique:
                    report.unique[sig] = failure
                    log(failure.render(session.server.location))
                if bad[0] in ("crash", "memory", "data-loss") or not session.server.alive:
                    session.close()
                    session = _Session(limits)
                    gen.ctx = session.ctx
                    report.restarts += 1
                if stop_after is not None and len(report.unique) >= stop_after:
                    break
            if (index + 1) % BOUND_EVERY == 0 and session.server.alive:
                report.rewrites += bound_datasets(session.server.location)
            if progress_every and (index + 1) % progress_every == 0:
                log(
                    f"fuzz: {index + 1} calls, {len(report.failures)} failures "
                    f"({len(report.unique)} distinct), rss {session.server.rss() >> 20} MiB, "
                    f"{time.monotonic() - start:.0f}s"
                )
                if session.server.alive:
                    log("  " + memory_report(session.server.location))
    finally:
        session.close()
    if shrink_failures:
        shrink_start = time.monotonic()
        for sig, failure in list(report.unique.items()):
            if failure.check == "memory":
                continue  # cumulative: no single call to shrink
            if shrink_seconds is not None and time.monotonic() - shrink_start > shrink_seconds:
                log("fuzz: shrink time budget reached; later failures are reported unshrunk")
                break
            log(f"shrinking [{failure.check}] {failure.call.rpc} {failure.call.action}")
            left = None if shrink_seconds is None else shrink_seconds - (time.monotonic() - shrink_start)
            report.unique[sig] = shrink(failure, limits, log, left)
    report.elapsed_s = time.monotonic() - start
    return report
