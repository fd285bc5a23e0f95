"""Every request of the lance-flight protocol, valid and hostile, from one seeded generator.

Messages are built field by field from the protobuf descriptors (:mod:`tests.fuzz.wire`): each
field gets a value from the pool its name calls for (datasets, columns, versions, filters, row ids,
schemas, fragment documents...), mostly plausible, sometimes hostile (out-of-range and huge
integers, negative or non-finite doubles, duplicates, very long or invalid UTF-8 strings, wrong
wire types, unknown fields, truncated or random bytes). A call is one RPC with its payload
(:class:`Call`); calls are plain data, so a failing one can be replayed and shrunk.

The generator knows the fixture datasets (:mod:`tests.fuzz.fixtures`) and learns from answers:
endpoint tickets the server planned and fragments it staged are reused, as they are or mutated.
"""

from __future__ import annotations

import decimal
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from tests.fuzz.wire import (
    DESCRIPTORS,
    WIRE_I32,
    WIRE_I64,
    WIRE_LEN,
    WIRE_VARINT,
    Entry,
    Msg,
    Raw,
    Value,
    describe,
    encode,
    varint,
    wire_type,
)

_T = TypeVar("_T")

__all__ = ["RPCS", "Call", "Context", "Generator", "PutData"]

#: The RPCs and how often each is drawn (reads dominate, as they do in production).
RPCS: dict[str, int] = {
    "do_get": 30,
    "get_flight_info": 14,
    "get_schema": 8,
    "do_action": 24,
    "do_put": 10,
    "do_exchange": 8,
    "list_flights": 3,
    "list_actions": 1,
    "replay_endpoint": 8,
    "flight_sql": 14,
}

#: Share of streaming calls (do_get, do_put, do_exchange) cancelled by the client part-way.
CANCEL_SHARE = 0.08
#: Largest row-id list a generated take carries (an 800 KB ticket): big enough to reach the
#: server's take limits, small enough that a run of 100,000 calls stays on a laptop's budget.
MAX_IDS = 100_000
U64 = (1 << 64) - 1
HUGE_INTS = (U64, 1 << 63, (1 << 63) - 1, 1 << 32, (1 << 31) - 1, 10**12, -1, -(1 << 63))
HOSTILE_DOUBLES = (float("inf"), float("-inf"), float("nan"), -1.0, 1e308, -0.0, 5e-324)
HOSTILE_STRINGS: tuple[str | bytes, ...] = (
    "",
    " ",
    "\x00",
    "a" * 300,
    "x" * 5000,
    "..",
    "../../etc",
    "/abs",
    "a/b",
    "~",
    "é✓",
    "\ud83d\ude00",
    b"\xff\xfe",
    b"\xc3\x28",
    b"ok\x80",
    "%s%n",
    "'; DROP TABLE x; --",
)
SQL_GARBAGE = (
    "",
    "(",
    "1 +",
    "id >",
    "nope = 1",
    "id IN ()",
    "s LIKE",
    "id = 'x'",
    "CAST(s AS BIGINT) > 0",
    "id / 0 > 1",
    "f > 1e400",
    "s = '\x00'",
    "NOT NOT NOT id",
    "id > 18446744073709551616",
    "id BETWEEN 5 AND 1",
    "v[0] = 1",
    "st.a = 1",
    "((((((((((((((((((((id))))))))))))))))))) > 1",
    " AND ".join(["id > 1"] * 300),
)


@dataclass
class PutData:
    """What a ``do_put`` or ``do_exchange`` sends after its descriptor."""

    table: pa.Table
    end_marker: bool = True
    junk_metadata: bytes | None = None


@dataclass
class Call:
    """One RPC: ``rpc`` with its message (``msg``), raw bytes, path, action name and data."""

    rpc: str
    msg: Msg | None = None
    raw: bytes | None = None
    path: tuple[bytes, ...] | None = None
    action: str = ""
    data: PutData | None = None
    note: str = ""
    #: Cancel the call after reading this many answers (do_get batches) or sending this many
    #: batches (do_put, do_exchange): the server must free the call's slot, memory and turn.
    cancel_after: int | None = None

    def payload(self) -> bytes:
        """The ticket, command or action body bytes."""
        if self.raw is not None:
            return self.raw
        return encode(self.msg) if self.msg is not None else b""


@dataclass
class DatasetInfo:
    """What the generator knows of one dataset (it may have changed since)."""

    schema: pa.Schema
    versions: int = 1
    rows: int = 0
    fragments: int = 1
    tags: tuple[str, ...] = ()
    substrait: tuple[bytes, ...] = ()


@dataclass
class Context:
    """The server's world as far as the generator knows it."""

    datasets: dict[str, DatasetInfo]
    actions: tuple[str, ...] = ()
    canary: str = ""
    tickets: list[bytes] = field(default_factory=list)
    staged: list[bytes] = field(default_factory=list)
    committed_paths: list[str] = field(default_factory=list)
    #: Flight SQL statement handles the server issued (prepared statements, bound parameters).
    sql_handles: list[bytes] = field(default_factory=list)

    def remember_ticket(self, ticket: bytes) -> None:
        self.tickets.append(ticket)
        del self.tickets[:-200]

    def remember_sql_handle(self, handle: bytes) -> None:
        self.sql_handles.append(handle)
        del self.sql_handles[:-100]

    def remember_staged(self, fragments: Sequence[bytes]) -> None:
        self.staged.extend(fragments)
        del self.staged[:-100]


def _utf8(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")


class Generator:
    """Draws :class:`Call` values from ``rng`` (seeded: the same seed gives the same calls)."""

    def __init__(self, rng: random.Random, ctx: Context, hostile: float = 0.25) -> None:
        self.rng = rng
        self.ctx = ctx
        #: Chance that a field gets a hostile value instead of a plausible one.
        self.hostile = hostile

    # -- small draws -----------------------------------------------------------------------------
    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pick(self, seq: Sequence[_T]) -> _T:
        return seq[self.rng.randrange(len(seq))]

    def dataset_name(self) -> str | bytes:
        if self.chance(self.hostile / 2):
            return self.pick((*HOSTILE_STRINGS, "missing", "t0.", "-t0", "T0"))
        return self.pick(sorted(self.ctx.datasets))

    def info(self, name: str | bytes) -> DatasetInfo:
        if isinstance(name, str) and name in self.ctx.datasets:
            return self.ctx.datasets[name]
        return self.ctx.datasets[self.pick(sorted(self.ctx.datasets))]

    def u64(self, plausible: Sequence[int]) -> int:
        if self.chance(self.hostile):
            return int(self.pick(HUGE_INTS))
        return int(self.pick(plausible))

    def column_names(self, info: DatasetInfo) -> list[str | bytes]:
        names: list[str | bytes] = list(info.schema.names)
        n = self.rng.randrange(0, min(len(names), 6) + 1)
        out: list[str | bytes] = [self.pick(names) for _ in range(n)] if names else []
        if self.chance(self.hostile):
            out.append(self.pick((*HOSTILE_STRINGS, "_rowid", "_rowaddr", "nope", "st.a", "v.item")))
        if self.chance(self.hostile / 3) and out:
            out = out * self.rng.choice((2, 50, 2000))
        return out

    def sql(self, info: DatasetInfo) -> str | bytes:
        if self.chance(self.hostile):
            return self.pick((*SQL_GARBAGE, *HOSTILE_STRINGS))
        cols = [f.name for f in info.schema if pa.types.is_integer(f.type) or pa.types.is_floating(f.type)]
        strs = [f.name for f in info.schema if pa.types.is_string(f.type)]
        parts = []
        if cols:
            c = self.pick(cols)
            parts.append(f"{c} {self.pick(('>', '<', '=', '>=', '!=', '<>'))} {self.rng.randrange(-5, 2000)}")
            parts.append(f"{c} IN ({', '.join(str(self.rng.randrange(100)) for _ in range(3))})")
            parts.append(f"{c} IS NOT NULL")
        if strs:
            s = self.pick(strs)
            parts.append(f"{s} {self.pick(('LIKE', 'NOT LIKE', 'ILIKE'))} '{self.pick(('a%', '%1', '_'))}'")
            parts.append(f"{s} = 'v{self.rng.randrange(50)}'")
        if not parts:
            return "true"
        n = self.rng.randrange(1, 3)
        return f" {self.pick(('AND', 'OR'))} ".join(self.pick(parts) for _ in range(n))

    def substrait(self, info: DatasetInfo) -> bytes:
        if info.substrait and not self.chance(self.hostile):
            return bytes(self.pick(info.substrait))
        any_blob = [b for d in self.ctx.datasets.values() for b in d.substrait]
        choice = self.rng.randrange(4)
        if choice == 0 and any_blob:
            return bytes(self.pick(any_blob))  # compiled against another dataset's schema
        if choice == 1 and any_blob:
            blob = bytes(self.pick(any_blob))
            return blob[: self.rng.randrange(len(blob))]
        if choice == 2 and any_blob:
            mutable = bytearray(self.pick(any_blob))
            for _ in range(3):
                mutable[self.rng.randrange(len(mutable))] = self.rng.randrange(256)
            return bytes(mutable)
        return self.rng.randbytes(self.rng.randrange(64))

    def ids(self, info: DatasetInfo, kind: str) -> bytes:
        rows = max(info.rows, 1)
        n = self.pick((0, 1, 3, 10, 100, 1000, self.rng.randrange(MAX_IDS)))
        if kind == "row_ids":
            # Stable ids count from 0; addresses put the fragment id in the high 32 bits.
            frag = self.rng.randrange(info.fragments + 1)
            base = np.array([0, frag << 32], dtype=np.uint64)[self.rng.randrange(2)]
            values = base + np.asarray(
                [self.rng.randrange(rows) for _ in range(min(n, 50))] or [0], dtype=np.uint64
            )
            arr = np.resize(values, n).astype(np.uint64)
        else:
            arr = np.resize(np.asarray([self.rng.randrange(rows) for _ in range(min(n, 50))] or [0]), n)
            arr = arr.astype(np.uint64)
        if self.chance(self.hostile) and n:
            arr[self.rng.randrange(n)] = self.pick((U64, 1 << 63, rows, rows + 1, 1 << 32))
        data = arr.astype("<u8").tobytes()
        if self.chance(self.hostile / 4):
            data = data[: max(0, len(data) - self.rng.randrange(1, 8))]  # not a multiple of 8
        return data

    def schema_bytes(self, info: DatasetInfo) -> bytes:
        r = self.rng.randrange(6)
        if r < 3:
            return bytes(info.schema.serialize())
        if r == 3:
            return bytes(random_table(self.rng, max_cols=8, max_rows=0).schema.serialize())
        blob = bytes(info.schema.serialize())
        if r == 4:
            return blob[: self.rng.randrange(len(blob))]
        return self.rng.randbytes(self.rng.randrange(100))

    def fragment_doc(self, dataset: str | bytes) -> bytes:
        if self.ctx.staged and self.chance(0.6):
            blob = bytes(self.pick(self.ctx.staged))
            if not self.chance(self.hostile):
                return blob
            doc = json.loads(blob)
        else:
            doc = {
                "id": 0,
                "files": [{"path": "x.lance", "fields": [0], "file_major_version": 2}],
                "physical_rows": 10,
            }
        mutation = self.rng.randrange(8)
        files = doc.get("files") or [{}]
        if mutation == 0:
            files[0]["path"] = self.pick(
                (
                    f"../../{self.ctx.canary.rsplit('/', 1)[-1]}",
                    self.ctx.canary,
                    "../_versions/1.manifest",
                    *self.ctx.committed_paths[-5:],
                    "a" * 300,
                )
            )
        elif mutation == 1:
            doc["physical_rows"] = self.pick(HUGE_INTS)
        elif mutation == 2:
            files[0]["fields"] = self.pick(([], [-1], [10**6], [0, 0, 0], "x"))
        elif mutation == 3:
            doc["deletion_file"] = {"file_type": "bitmap", "read_version": 1, "id": self.pick(HUGE_INTS)}
        elif mutation == 4:
            files[0]["file_major_version"] = self.pick((0, 1, 3, 99, -1))
            files[0]["file_minor_version"] = self.pick((0, 5, 99))
        elif mutation == 5:
            return self.rng.randbytes(self.rng.randrange(40))
        elif mutation == 6:
            return json.dumps(self.pick(([], None, 1, "s", {"files": None}))).encode()
        else:
            doc["id"] = self.pick(HUGE_INTS)
        return json.dumps(doc).encode()

    # -- messages from descriptors ---------------------------------------------------------------
    def field_value(self, msg_name: str, fd: Any, dataset: str | bytes) -> list[Value]:
        """Values for field ``fd`` of ``msg_name``: one for a singular field, 0..n for repeated."""
        name = fd.name
        info = self.info(dataset)
        if name == "dataset":
            return [dataset if not self.chance(self.hostile / 4) else self.dataset_name()]
        if name in ("version", "read_version"):
            return [self.u64(range(1, info.versions + 1))]
        if name == "tag":
            return [
                self.pick((*info.tags, "nope", *HOSTILE_STRINGS[:6]) if info.tags else HOSTILE_STRINGS[:6])
            ]
        if name in ("names", "columns") and fd.type != fd.TYPE_MESSAGE:
            return list(self.column_names(info))
        if name == "filter_sql":
            return [self.sql(info)]
        if name == "filter_substrait":
            return [self.substrait(info)]
        if name in ("limit", "offset"):
            return [self.u64((0, 1, 5, 10, 100, info.rows, info.rows + 7))]
        if name == "batch_size":
            return [self.u64((1, 7, 100, 1024, 65536))]
        if name == "fragment_ids":
            ids = [self.rng.randrange(info.fragments + 2) for _ in range(self.rng.randrange(4))]
            if self.chance(self.hostile / 2) and ids:
                ids = ids * self.pick((2, 100, 20_000))
            if self.chance(self.hostile / 2):
                ids.append(self.pick(HUGE_INTS))
            return list(ids)
        if name in ("row_start", "row_end"):
            return [self.u64((0, 1, 5, info.rows // 2, info.rows, info.rows + 1))]
        if name == "max_rows_per_endpoint":
            return [self.u64((0, 1, 3, 100, 1000))]
        if name in ("row_ids", "indices"):
            return [self.ids(info, name)]
        if name in ("mode",):
            return [
                self.pick((0, 1, 2, 3, 4))
                if not self.chance(self.hostile)
                else self.pick((5, 99, -1, 1 << 40))
            ]
        if name == "max_rows_per_file":
            return [self.u64((0, 1, 10, 100, 1024))]
        if name == "data_storage_version":
            return [self.pick(("", "2.0", "2.1", "2.2", "stable", "legacy", "0.1", "3.0", "next", "2.10"))]
        if name == "target_rows_per_fragment":
            return [self.u64((0, 1, 10, 1000))]
        if name == "older_than_seconds":
            return [self.pick((0.0, 1.0, 3600.0, 1e9) if not self.chance(self.hostile) else HOSTILE_DOUBLES)]
        if name == "schema":
            return [self.schema_bytes(info)]
        if name == "fragments":
            return [self.fragment_doc(dataset) for _ in range(self.rng.randrange(0, 4))]
        if name == "transforms":
            entries = []
            for _ in range(self.rng.randrange(0, 3)):
                key = self.pick(
                    ("c_new", f"c{self.rng.randrange(1000)}", *info.schema.names[:2], "", "a" * 300)
                )
                expr = self.pick(("1", "id * 2", "s || 'x'", "CAST(id AS DOUBLE)", "nope + 1", "(", "NULL"))
                entries.append(
                    Msg(
                        "TransformsEntry", (Entry(1, WIRE_LEN, key, "key"), Entry(2, WIRE_LEN, expr, "value"))
                    )
                )
            return list(entries)
        if fd.type == fd.TYPE_BOOL:
            return [self.pick((0, 1)) if not self.chance(self.hostile / 4) else self.pick((2, U64))]
        if fd.type == fd.TYPE_MESSAGE:
            return [self.message(fd.message_type.name, dataset)]
        if fd.type in (fd.TYPE_STRING, fd.TYPE_BYTES):
            return [self.pick(HOSTILE_STRINGS)]
        return [self.u64((0, 1, 2))]

    def message(self, name: str, dataset: str | bytes | None = None, keep: float = 0.5) -> Msg:
        """A ``name`` message: each field present with chance ``keep`` (oneofs: one member)."""
        desc = DESCRIPTORS.get(name)
        if desc is None:
            return Msg(name)
        dataset = dataset if dataset is not None else self.dataset_name()
        entries: list[Entry | Raw] = []
        chosen_oneof: dict[str, str] = {}
        for group in desc.oneofs:
            chosen_oneof[group.name] = self.pick([f.name for f in group.fields])
        for fd in desc.fields:
            oneof = fd.containing_oneof
            if oneof is not None and not oneof.name.startswith("_"):
                if chosen_oneof[oneof.name] != fd.name and not self.chance(self.hostile / 6):
                    continue
            elif fd.name != "dataset" and not self.chance(keep):
                continue
            for value in self.field_value(name, fd, dataset):
                wire = wire_type(fd)
                if isinstance(value, float) and wire != WIRE_I64:
                    value = int(value) if value == value and abs(value) != float("inf") else 0
                entries.append(Entry(fd.number, wire, value, fd.name))
        return self.mutate_wire(Msg(name, tuple(entries)))

    def mutate_wire(self, msg: Msg) -> Msg:
        """Now and then, a wire-level mutation: wrong wire type, duplicate, unknown field, junk."""
        if not self.chance(self.hostile / 3):
            return msg
        entries = list(msg.entries)
        r = self.rng.randrange(5)
        if r == 0 and entries:
            i = self.rng.randrange(len(entries))
            e = entries[i]
            if isinstance(e, Entry):
                wrong = self.pick([w for w in (WIRE_VARINT, WIRE_I64, WIRE_LEN, WIRE_I32) if w != e.wire])
                value: Value = e.value if wrong == WIRE_LEN or isinstance(e.value, int | float) else 7
                entries[i] = Entry(e.number, wrong, value, e.label)
        elif r == 1 and entries:
            entries.append(self.pick(entries))
        elif r == 2:
            entries.append(
                Entry(self.rng.randrange(18, 1 << 29), self.pick((WIRE_VARINT, WIRE_LEN)), 5, "unknown")
            )
        elif r == 3:
            body = encode(Msg(msg.name, tuple(entries)))
            return Msg(msg.name, (Raw(body[: self.rng.randrange(len(body) + 1)]),))
        else:
            entries.append(
                Raw(self.pick((varint(1 << 3 | 2) + varint(1 << 40), b"\xff" * 11, self.rng.randbytes(9))))
            )
        return Msg(msg.name, tuple(entries))

    def garbage(self) -> bytes:
        return self.pick((b"", b"\x00", b"\xff" * 16, self.rng.randbytes(self.rng.randrange(1, 200))))

    # -- calls -----------------------------------------------------------------------------------
    def wrapper(self, outer: str, inner: str, number: int, dataset: str | bytes) -> Msg:
        body = self.message(inner, dataset)
        entry = Entry(
            number, WIRE_LEN, body, {1: "scan", 2: "take" if outer == "Ticket" else "write"}[number]
        )
        return self.mutate_wire(Msg(outer, (entry,)))

    def call(self) -> Call:
        rpc = self.rng.choices(list(RPCS), weights=list(RPCS.values()))[0]
        made: Call = getattr(self, f"_call_{rpc}")()
        if made.rpc in ("do_get", "do_put", "do_exchange") and self.chance(CANCEL_SHARE):
            made.cancel_after = self.pick((0, 1, 1, 2))
        return made

    def _dataset(self) -> str | bytes:
        return self.dataset_name()

    def _call_do_get(self) -> Call:
        if self.chance(0.05):
            return Call("do_get", raw=self.garbage())
        which = self.rng.randrange(2) + 1
        return Call(
            "do_get",
            msg=self.wrapper("Ticket", ("ScanRequest", "TakeRequest")[which - 1], which, self._dataset()),
        )

    def _call_replay_endpoint(self) -> Call:
        if not self.ctx.tickets:
            return self._call_get_flight_info()
        ticket = bytes(self.pick(self.ctx.tickets))
        if self.chance(0.5):
            return Call("do_get", raw=ticket, note="a planned endpoint ticket")
        # Protobuf merges a repeated embedded message: this overrides fields of the planned scan.
        extra = self.message("ScanRequest", None, keep=0.2)
        return Call(
            "do_get",
            raw=ticket + encode(Msg("Ticket", (Entry(1, WIRE_LEN, extra, "scan"),))),
            note="planned ticket + override " + describe(extra)[:200],
        )

    def _descriptor_call(self, rpc: str) -> Call:
        r = self.rng.random()
        if r < 0.2:
            n = self.pick((1, 1, 1, 0, 2, 3))
            path = tuple(_utf8(self._dataset()) for _ in range(n))
            return Call(rpc, path=path)
        if r < 0.25:
            return Call(rpc, raw=self.garbage())
        which = 2 if self.chance(0.1) else 1
        return Call(
            rpc,
            msg=self.wrapper("Command", ("ScanRequest", "WriteRequest")[which - 1], which, self._dataset()),
        )

    def _call_get_flight_info(self) -> Call:
        return self._descriptor_call("get_flight_info")

    def _call_get_schema(self) -> Call:
        return self._descriptor_call("get_schema")

    def _call_do_action(self) -> Call:
        names = list(self.ctx.actions) or ["health"]
        if self.chance(self.hostile / 4):
            name = self.pick(("", "nope", "CREATE", "a" * 1000, "drop ", "health\x00"))
        else:
            name = self.pick(names)
        if self.chance(0.05):
            return Call("do_action", action=name, raw=self.garbage())
        return Call("do_action", action=name, msg=self.message("ActionRequest", self._dataset(), keep=0.4))

    def _call_do_put(self) -> Call:
        dataset = self._dataset()
        info = self.info(dataset)
        if self.chance(0.6):
            table = conforming_table(self.rng, info.schema, self.rng.randrange(0, 200))
        else:
            table = random_table(self.rng, max_cols=self.pick((3, 8, 600)), max_rows=self.pick((0, 5, 300)))
        data = PutData(table, end_marker=self.chance(0.85))
        if self.chance(self.hostile / 3):
            data.junk_metadata = self.garbage()
        if self.chance(0.2):
            return Call("do_put", path=(_utf8(dataset),), data=data)
        if self.chance(0.05):
            return Call("do_put", raw=self.garbage(), data=data)
        outer = (
            self.wrapper("Command", "WriteRequest", 2, dataset)
            if not self.chance(0.05)
            else self.wrapper("Command", "ScanRequest", 1, dataset)
        )
        return Call("do_put", msg=outer, data=data)

    def _call_do_exchange(self) -> Call:
        dataset = self._dataset()
        info = self.info(dataset)
        col = (
            self.pick(("row_id", "index"))
            if not self.chance(self.hostile / 2)
            else self.pick(("id", "", "row_ids"))
        )
        batches = []
        for _ in range(self.rng.randrange(0, 4)):
            raw = self.ids(info, "row_ids" if col == "row_id" else "indices")
            ids = np.frombuffer(raw[: len(raw) // 8 * 8], dtype="<u8")
            batches.append(pa.record_batch([pa.array(ids, pa.uint64())], names=[col]))
        if self.chance(self.hostile / 2):
            table = random_table(self.rng, max_cols=3, max_rows=20)
        else:
            table = pa.Table.from_batches(batches, pa.schema([(col, pa.uint64())]))
        if self.chance(0.1):
            return Call("do_exchange", path=(_utf8(dataset),), data=PutData(table))
        msg = self.wrapper("Ticket", "TakeRequest", 2, dataset)
        return Call("do_exchange", msg=msg, data=PutData(table))

    def _call_flight_sql(self) -> Call:
        from tests.fuzz.flightsql import flight_sql_call

        return flight_sql_call(self)

    def _call_list_flights(self) -> Call:
        return Call("list_flights", raw=self.pick((b"", b"t", b"\xff", b"zzz", self.garbage())))

    def _call_list_actions(self) -> Call:
        return Call("list_actions")


# -- tables ----------------------------------------------------------------------------------------

_TYPES: tuple[pa.DataType, ...] = (
    pa.int8(),
    pa.int32(),
    pa.int64(),
    pa.uint64(),
    pa.float16(),
    pa.float32(),
    pa.float64(),
    pa.bool_(),
    pa.string(),
    pa.large_string(),
    pa.binary(),
    pa.large_binary(),
    pa.binary(3),
    pa.date32(),
    pa.timestamp("us", tz="UTC"),
    pa.time64("ns"),
    pa.duration("s"),
    pa.decimal128(10, 2),
    pa.null(),
    pa.list_(pa.int32()),
    pa.large_list(pa.string()),
    pa.list_(pa.float32(), 4),
    pa.struct([("a", pa.int32()), ("b", pa.string())]),
    pa.struct([]),
    pa.map_(pa.string(), pa.int64()),
    pa.dictionary(pa.int32(), pa.string()),
    pa.list_(pa.list_(pa.int8())),
)


def _array(rng: random.Random, typ: pa.DataType, n: int) -> pa.Array:
    """``n`` values of ``typ`` (a few nulls), built without per-type Python value tables."""
    if n == 0 or pa.types.is_null(typ):
        return pa.nulls(n, typ)
    if pa.types.is_dictionary(typ):
        return pa.array([f"v{rng.randrange(5)}" for _ in range(n)]).dictionary_encode().cast(typ)
    if pa.types.is_integer(typ) or pa.types.is_floating(typ):
        values = np.asarray([rng.randrange(-100, 100) for _ in range(min(n, 64))], dtype=np.int64)
        arr = pa.array(np.resize(values, n)).cast(pa.int64())
        if pa.types.is_unsigned_integer(typ):
            arr = pa.array(np.abs(np.resize(values, n)))
        return arr.cast(typ, safe=False)
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return pa.array([rng.choice(("a", "", "é✓", "v1", "x" * rng.randrange(50))) for _ in range(n)], typ)
    if pa.types.is_binary(typ) or pa.types.is_large_binary(typ):
        return pa.array([rng.randbytes(rng.randrange(8)) for _ in range(n)], typ)
    if pa.types.is_fixed_size_binary(typ):
        return pa.array([rng.randbytes(typ.byte_width) for _ in range(n)], typ)
    if pa.types.is_boolean(typ):
        return pa.array([rng.random() < 0.5 for _ in range(n)])
    if pa.types.is_fixed_size_list(typ):
        flat = _array(rng, typ.value_type, n * typ.list_size)
        return pa.FixedSizeListArray.from_arrays(flat, typ.list_size)
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        lengths = [rng.randrange(3) for _ in range(n)]
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(
            np.int64 if pa.types.is_large_list(typ) else np.int32
        )
        values = _array(rng, typ.value_type, int(offsets[-1]))
        cls = pa.LargeListArray if pa.types.is_large_list(typ) else pa.ListArray
        return cls.from_arrays(pa.array(offsets), values)
    if pa.types.is_map(typ):
        return pa.array([[("k", rng.randrange(9))] for _ in range(n)], typ)
    if pa.types.is_struct(typ):
        if typ.num_fields == 0:
            return pa.array([{}] * n, typ)
        children = [_array(rng, typ.field(i).type, n) for i in range(typ.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(typ))
    # dates, times, durations, decimals: small integers cast to the type
    base = pa.array([rng.randrange(0, 10_000) for _ in range(n)], pa.int64())
    if pa.types.is_decimal(typ):
        return pa.array([decimal.Decimal(v) / 100 for v in base.to_pylist()], typ)
    if pa.types.is_date32(typ) or pa.types.is_time32(typ):
        return base.cast(pa.int32()).cast(typ)
    return base.cast(typ)


def random_table(rng: random.Random, max_cols: int, max_rows: int) -> pa.Table:
    """A table of random columns (names may repeat or be empty; wide when ``max_cols`` is)."""
    ncols = rng.randrange(0, max_cols + 1)
    nrows = rng.randrange(0, max_rows + 1) if max_rows else 0
    names = [
        rng.choice(("id", "s", "", "é", f"c{i}", "a.b", "_rowid")) if rng.random() < 0.2 else f"c{i}"
        for i in range(ncols)
    ]
    arrays = [_array(rng, rng.choice(_TYPES), nrows) for _ in range(ncols)]
    return pa.Table.from_arrays(arrays, names=names) if ncols else pa.table({}).slice(0, 0)


def conforming_table(rng: random.Random, schema: pa.Schema, rows: int) -> pa.Table:
    """``rows`` random rows of ``schema`` (what a correct appender sends)."""
    arrays = []
    for f in schema:
        arr = _array(rng, f.type, rows)
        if not f.nullable and arr.null_count:
            arr = arr.fill_null(0) if pa.types.is_integer(f.type) else arr
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, schema=schema)
