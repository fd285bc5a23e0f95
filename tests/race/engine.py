"""Two or three engine clients on one dataset, interleaved, and the invariants they must keep.

Each client is a :class:`lance_format.LanceDataset` handle with a :class:`Session` of its own (its
own object store and caches, as two processes have), left stale between its operations unless it
draws ``refresh``. A schedule (:func:`make_schedule`, seeded) is a list of steps; a step runs one
client's operation, and may run another client's operation *inside* it: at the first operation's
``k``-th call of one kind on its object store (``list``, ``write``, ``put_if_not_exists``,
``delete``), e.g. between cleanup's tag listing and its deletes, or just before a commit's manifest
put. That makes the interleavings at commit points deterministic and replayable from the seed.
:func:`run_threaded` runs the clients' operations in threads instead (not replayable, but it
reaches interleavings inside the engine that the store calls do not separate).

Invariants (:class:`Checker`), checked after every step with a reader that caches nothing:

* an operation fails only with a typed error of :mod:`lance_format.errors` (not
  :class:`CorruptFileError` nor :class:`InternalError`: those mean damage or a bug);
* a commit that returned success got a version above every version committed before it began
  (otherwise it landed in a gap of the history, under the latest, and its change is lost), and its
  rows are visible at that version (appended ids present, deleted ids gone, updated values set,
  an overwrite's rows exactly, a restore's content equal to the version it restored);
* every version still listed reads fully, and reads what it read when first seen;
* every tag that was created (and not deleted) points at a listed version, which reads fully.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

import lance_format
import lance_format.fragment
from lance_format import LanceOperation, Session
from lance_format.core.errors import CorruptFileError, InternalError, LanceError
from lance_format.io.store import ObjectStore

__all__ = [
    "HOOK_KINDS",
    "OPS",
    "ROWS",
    "TAG_NAMES",
    "Checker",
    "Clients",
    "Outcome",
    "Place",
    "RemoteOps",
    "Setup",
    "Step",
    "content_of",
    "fresh_dataset",
    "ids_of",
    "make_schedule",
    "run_schedule",
    "run_threaded",
]

#: Operations a client can draw, with weights (cleanup and restore often: they are the races).
OPS: dict[str, int] = {
    "append": 4,
    "delete": 3,
    "update": 2,
    "merge_insert": 2,
    "overwrite": 1,
    "compact": 2,
    "index": 1,
    "restore": 2,
    "tag_create": 2,
    "tag_delete": 1,
    "cleanup": 3,
    "stage_commit": 2,
    "refresh": 2,
}
#: Object-store calls a nested operation can be run at.
HOOK_KINDS = ("list", "write", "put_if_not_exists", "delete")
#: Errors that are a refusal, not damage: every LanceError but these.
_DAMAGE = (CorruptFileError, InternalError)
#: Rows per append: small, so a schedule of 30 steps runs in about a second.
ROWS = 8
TAG_NAMES = ("t0", "t1", "t2")
#: Seconds the first operation waits for a nested one before going on without it: long enough for
#: a small operation on busy cores, short enough that a blocked one costs little.
NESTED_WAIT_S = 1.0


@dataclass(frozen=True)
class Step:
    """One step: ``client`` runs ``op`` (its arguments drawn from ``seed``); with ``nested``, the
    operation ``nested[0]`` of client ``nested[1]`` runs at the ``hook_at``-th ``hook_kind`` call
    the first operation makes on its store (or after it, when it makes fewer)."""

    client: int
    op: str
    seed: int
    nested: tuple[str, int, int] | None = None  # (op, client, seed)
    hook_kind: str = "list"
    hook_at: int = 1

    def __str__(self) -> str:
        text = f"c{self.client}.{self.op}#{self.seed}"
        if self.nested is not None:
            op, client, seed = self.nested
            text += f" [at {self.hook_kind} #{self.hook_at}: c{client}.{op}#{seed}]"
        return text


def make_schedule(rng: random.Random, steps: int, clients: int, nest_share: float = 0.5) -> list[Step]:
    """A random schedule: ``steps`` steps over ``clients`` clients, ``nest_share`` of them nested."""
    names = list(OPS)
    weights = [OPS[n] for n in names]
    out = []
    for _ in range(steps):
        client = rng.randrange(clients)
        op = rng.choices(names, weights)[0]
        nested = None
        if clients > 1 and rng.random() < nest_share:
            other = rng.choice([c for c in range(clients) if c != client])
            nested = (rng.choices(names, weights)[0], other, rng.randrange(1 << 30))
        out.append(
            Step(
                client,
                op,
                rng.randrange(1 << 30),
                nested,
                rng.choice(HOOK_KINDS),
                rng.randint(1, 4),
            )
        )
    return out


@dataclass
class Outcome:
    """What one run saw: operations by result, and the invariant violations."""

    ops: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)

    def merge(self, other: Outcome) -> None:
        """Add ``other``'s counts and violations to this one."""
        self.ops.update(other.ops)
        self.errors.update(other.errors)
        self.violations.extend(other.violations)


def ids_of(table: pa.Table) -> set[int]:
    return set(table.column("id").to_pylist())


def content_of(table: pa.Table) -> tuple[tuple[int, int], ...]:
    """The rows as sorted ``(id, v)`` pairs: what a version holds, order aside."""
    ids = table.column("id").to_numpy()
    vs = table.column("v").to_numpy()
    order = np.lexsort((vs, ids))
    return tuple(zip(ids[order].tolist(), vs[order].tolist(), strict=True))


def _values(table: pa.Table, ids: list[int]) -> dict[int, list[int]]:
    """``{id: [v, ...]}`` of the rows of ``table`` whose id is in ``ids`` (every row, duplicates too)."""
    out: dict[int, list[int]] = {}
    for i, v in content_of(table):
        if i in ids:
            out.setdefault(i, []).append(v)
    return out


class Checker:
    """Reads the dataset with no caches and holds what each version read when first seen."""

    def __init__(self, uri: str, storage_options: dict[str, str] | None = None) -> None:
        self.uri = uri
        self.storage_options = storage_options
        self.session = Session(metadata_cache_bytes=0, decoded_cache_bytes=0)
        self.contents: dict[int, tuple[tuple[int, int], ...]] = {}
        self.tags: dict[str, int] = {}  # tags created successfully and not deleted since
        self.max_committed = 0
        self.lock = threading.Lock()
        self.cleanups_started = 0

    def listed(self) -> list[int]:
        """The versions the dataset lists now."""
        return [int(v["version"]) for v in self.open().versions()]

    def open(self, version: int | None = None) -> lance_format.LanceDataset:
        """The dataset at ``version`` (the latest when omitted), read with no caches."""
        return lance_format.dataset(
            self.uri, version, session=self.session, storage_options=self.storage_options
        )

    def planned_ids(self, version: int, ids: list[int]) -> set[int]:
        """Those of ``ids`` in the version the commit of ``version`` was planned on (its
        transaction's read version); all of them when that version cannot be read any more.

        A change owes its effect only to those: a row another client inserts concurrently is not
        its to change (an insert commutes with an update or a delete, as in Lance).
        """
        try:
            txn = self.open(version).read_transaction()
        except LanceError:
            txn = None
        planned = None if txn is None else self.content_at(txn.read_version)
        return set(ids) if planned is None else {i for i, _ in planned} & set(ids)

    def read(self, version: int) -> pa.Table:
        """Version ``version`` read in full."""
        return self.open(version).to_table(columns=["id", "v"])

    def content_at(self, version: int | None) -> tuple[tuple[int, int], ...] | None:
        """What ``version`` holds: as first seen, else read now; ``None`` if it cannot be read."""
        if version is None:
            return None
        with self.lock:
            seen = self.contents.get(version)
        if seen is not None:
            return seen
        try:
            content = content_of(self.read(version))
        except LanceError:
            return None
        with self.lock:
            return self.contents.setdefault(version, content)

    def record(self, version: int, out: Outcome, what: str) -> pa.Table | None:
        """Read ``version``: it must read fully and equal what it read before; ``None`` if not listed."""
        try:
            table = self.read(version)
        except LanceError as e:
            if version not in self.listed():
                return None
            out.violations.append(
                f"{what}: version {version} is listed but unreadable: {type(e).__name__}: {e}"
            )
            return None
        content = content_of(table)
        with self.lock:
            seen = self.contents.setdefault(version, content)
        if seen != content:
            out.violations.append(
                f"{what}: version {version} changed: {len(seen)} rows then, {len(content)} now"
            )
        return table

    def committed(self, version: int, floor: int, out: Outcome, what: str) -> pa.Table | None:
        """A commit of ``what`` returned ``version``; ``floor`` was the newest committed version when
        it began. Returns the version's rows (``None`` if a cleanup already removed it)."""
        if version <= floor:
            out.violations.append(
                f"{what}: committed as version {version}, not above version {floor} committed before it "
                "began (a gap in the history: its change is not in the latest version)"
            )
        with self.lock:
            self.max_committed = max(self.max_committed, version)
        table = self.record(version, out, what)
        if table is None and self.cleanups_started == 0:
            out.violations.append(f"{what}: committed version {version} is not in the history")
        return table

    def sweep(self, out: Outcome, what: str, *, full: bool = True) -> None:
        """Every listed version (only those not seen yet unless ``full``: only a cleanup removes
        files) and every tag reads fully and as before."""
        try:
            versions = self.listed()
        except LanceError as e:
            out.violations.append(f"{what}: the dataset cannot be listed: {type(e).__name__}: {e}")
            return
        for v in versions:
            if full or v not in self.contents:
                self.record(v, out, what)
        try:
            found = {n: int(t["version"]) for n, t in self.open().tags.list().items()}
        except LanceError as e:
            out.violations.append(f"{what}: tags cannot be listed: {type(e).__name__}: {e}")
            return
        for name, version in self.tags.items():
            if found.get(name) != version:
                out.violations.append(
                    f"{what}: tag {name} created at version {version} is now {found.get(name)}"
                )
            elif version not in versions:
                out.violations.append(f"{what}: tag {name} points at version {version}, which is gone")


class _Hook:
    """Runs ``action`` once, at the ``at``-th call of ``kind`` a store makes inside :meth:`armed`."""

    def __init__(self, store: ObjectStore, kind: str, at: int, action: Callable[[], None]) -> None:
        self.store, self.kind, self.at, self.action = store, kind, at, action
        self.calls = 0
        self.fired = False
        self.owner = threading.get_ident()
        self.thread = threading.Thread()

    def _fire(self) -> None:
        # In a thread of its own: the first operation may hold this process's commit lock for the
        # dataset, which the nested one then waits for (two processes would race instead). It
        # then goes on after NESTED_WAIT_S, and the nested operation finishes when it can.
        self.fired = True
        self.thread = threading.Thread(target=self.action, name="race-nested")
        self.thread.start()
        self.thread.join(NESTED_WAIT_S)

    def _wrap(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if not self.fired and threading.get_ident() == self.owner:
                self.calls += 1
                if self.calls == self.at:
                    self._fire()
            return real(*args, **kwargs)

        return call

    @contextmanager
    def armed(self) -> Iterator[None]:
        real = getattr(self.store, self.kind)
        setattr(self.store, self.kind, self._wrap(real))
        try:
            yield
        finally:
            delattr(self.store, self.kind)  # the instance attribute hid the class's method
            if not self.fired:
                self._fire()
            self.thread.join()


#: What an operation committed: its version and a check of that version's rows (a problem or None).
Check = tuple[int, Callable[[pa.Table], str | None]] | None


class RemoteOps(Protocol):
    """Operations of some clients run elsewhere (through a Flight server: :mod:`tests.race.remote`)."""

    clients: frozenset[int]
    #: The operations the remote clients can run; any other is an append for them.
    ops: frozenset[str]

    def run(self, client: int, op: str, rng: random.Random) -> Check:
        """Run ``op`` for ``client``; what it committed, as the engine clients' operations return."""
        ...

    def refusal(self, error: Exception) -> tuple[str, bool] | None:
        """``(label, damage)`` of an error the remote client raised; ``None`` when it is untyped."""
        ...


class Clients:
    """The engine handles of one run, the operations they perform and the checks after each."""

    def __init__(self, uri: str, n: int, checker: Checker, remote: RemoteOps | None = None) -> None:
        self.uri = uri
        self.checker = checker
        self.storage_options = checker.storage_options
        self.remote = remote
        self.sessions = [Session() for _ in range(n)]
        self.handles = [
            lance_format.dataset(uri, session=s, storage_options=self.storage_options) for s in self.sessions
        ]
        self.next_id = 1_000_000
        self.next_marker = 1
        self.id_lock = threading.Lock()

    def fresh_ids(self, n: int) -> list[int]:
        with self.id_lock:
            start = self.next_id
            self.next_id += n
        return list(range(start, start + n))

    def marker(self) -> int:
        with self.id_lock:
            self.next_marker += 1
            return self.next_marker

    def run(self, client: int, op: str, seed: int, out: Outcome, hook: _Hook | None = None) -> None:
        """Run one operation and check what it committed; errors are counted, damage is a violation."""
        remote = self.remote if self.remote is not None and client in self.remote.clients else None
        if remote is not None and op not in remote.ops:
            op = "append"
        rng = random.Random(seed)
        what = f"c{client}.{op}#{seed}"
        with self.checker.lock:
            floor = self.checker.max_committed
        if op == "cleanup":
            with self.checker.lock:
                self.checker.cleanups_started += 1
        try:
            with hook.armed() if hook is not None else _nothing():
                check = remote.run(client, op, rng) if remote else getattr(self, f"_{op}")(client, rng)
        except LanceError as e:
            if isinstance(e, _DAMAGE):
                out.violations.append(f"{what}: {type(e).__name__}: {e}")
            out.errors[f"{op}:{type(e).__name__}"] += 1
            return
        except Exception as e:  # an untyped error is what the run looks for
            refusal = None if remote is None else remote.refusal(e)
            if refusal is None:
                out.violations.append(f"{what}: untyped {type(e).__name__}: {e}")
                return
            label, damage = refusal
            if damage:
                out.violations.append(f"{what}: {label}: {e}")
            out.errors[f"{op}:{label}"] += 1
            return
        out.ops[op] += 1
        if check is not None:
            version, expect = check
            table = self.checker.committed(version, floor, out, what)
            if table is not None:
                problem = expect(table)
                if problem:
                    out.violations.append(f"{what}: at version {version}: {problem}")

    # -- operations: each returns (committed version, check of its rows) or None ----------------

    def _rows(self, rng: random.Random, ids: list[int]) -> pa.Table:
        return pa.table(
            {"id": pa.array(ids, pa.int64()), "v": pa.array([rng.randrange(100) for _ in ids], pa.int64())}
        )

    def _visible(self, client: int, rng: random.Random, n: int) -> list[int]:
        """Up to ``n`` ids the client's handle sees (it may be stale, or its version cleaned up)."""
        ids = sorted(ids_of(self.handles[client].to_table(columns=["id"])))
        return rng.sample(ids, min(n, len(ids)))

    def _append(self, client: int, rng: random.Random) -> Check:
        ids = self.fresh_ids(ROWS)
        h = self.handles[client]
        h.insert(self._rows(rng, ids))
        return h.version, lambda t: None if set(ids) <= ids_of(t) else "appended rows missing"

    def _stage_commit(self, client: int, rng: random.Random) -> Check:
        ids = self.fresh_ids(ROWS)
        h = self.handles[client]
        frags = lance_format.fragment.write_fragments(
            self._rows(rng, ids), self.uri, storage_options=self.storage_options
        )
        assert isinstance(frags, list)
        new = lance_format.LanceDataset.commit(
            self.uri,
            LanceOperation.Append(frags),
            read_version=h.version,
            storage_options=self.storage_options,
        )
        return new.version, lambda t: None if set(ids) <= ids_of(t) else "staged rows missing"

    def _delete(self, client: int, rng: random.Random) -> Check:
        ids = self._visible(client, rng, 3)
        if not ids:
            return None
        h = self.handles[client]
        h.delete(f"id IN ({', '.join(map(str, ids))})")
        # As an update (below): a row another client inserts concurrently is not its to delete.
        owed = self.checker.planned_ids(h.version, ids)
        return (
            h.version,
            lambda t: f"deleted rows {sorted(owed & ids_of(t))} still there" if owed & ids_of(t) else None,
        )

    def _update(self, client: int, rng: random.Random) -> Check:
        ids = self._visible(client, rng, 3)
        if not ids:
            return None
        mark = 1000 + self.marker()
        h = self.handles[client]
        h.update({"v": str(mark)}, where=f"id IN ({', '.join(map(str, ids))})")
        # The update owes its value only to the rows of the version it was planned on (the last
        # plan, after any retry): a row another client inserts concurrently is not its to change
        # (an insert commutes with an update, as in Lance), so it may keep the inserter's value.
        owed = sorted(self.checker.planned_ids(h.version, ids))

        def expect(t: pa.Table) -> str | None:
            got = _values(t, owed)
            if set(got) != set(owed) or any(v != [mark] * len(v) for v in got.values()):
                return f"update not applied: wanted {owed} = {mark}, got {got}"
            return None

        return h.version, expect

    def _merge_insert(self, client: int, rng: random.Random) -> Check:
        ids = self._visible(client, rng, 2) + self.fresh_ids(2)
        mark = 1000 + self.marker()
        source = pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([mark] * len(ids), pa.int64())})
        h = self.handles[client]
        h.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(source)

        def expect(t: pa.Table) -> str | None:
            # Another client's concurrent upsert may insert the same new id beside this one's row
            # (two inserts commute): this one's value must be there, not alone.
            got = _values(t, ids)
            if set(got) != set(ids) or any(mark not in v for v in got.values()):
                return f"upsert not visible: wanted {ids} = {mark}, got {got}"
            return None

        return h.version, expect

    def _overwrite(self, client: int, rng: random.Random) -> Check:
        ids = self.fresh_ids(ROWS)
        h = self.handles[client]
        h.insert(self._rows(rng, ids), mode="overwrite")
        return h.version, lambda t: None if ids_of(t) == set(ids) else "overwrite's rows are not the table"

    def _compact(self, client: int, rng: random.Random) -> Check:
        h = self.handles[client]
        stats = h.compact_files(target_rows_per_fragment=rng.choice([4, 64]))
        # With nothing to compact, nothing is committed (the handle may still move to the latest).
        return (h.version, lambda t: None) if stats["fragments_removed"] else None

    def _index(self, client: int, rng: random.Random) -> Check:
        h = self.handles[client]
        h.create_scalar_index("id", rng.choice(["BTREE", "ZONEMAP"]), replace=True)
        return h.version, lambda t: None

    def _restore(self, client: int, rng: random.Random) -> Check:
        h = self.handles[client]
        versions = [int(v["version"]) for v in h.versions()]
        target = rng.choice(versions)
        old = h.checkout_version(target)
        want = content_of(old.to_table(columns=["id", "v"]))
        old.restore()
        self.handles[client] = old
        return (
            old.version,
            lambda t: None if content_of(t) == want else f"restore of version {target} reads other rows",
        )

    def _tag_create(self, client: int, rng: random.Random) -> Check:
        h = self.handles[client]
        name = rng.choice(TAG_NAMES)
        versions = [int(v["version"]) for v in h.versions()]
        target = rng.choice(versions)
        want = content_of(h.checkout_version(target).to_table(columns=["id", "v"]))
        h.tags.create(name, target)
        with self.checker.lock:
            self.checker.tags[name] = target
            self.checker.contents.setdefault(target, want)
        return None

    def _tag_delete(self, client: int, rng: random.Random) -> Check:
        name = rng.choice(TAG_NAMES)
        with self.checker.lock:
            self.checker.tags.pop(name, None)  # from the moment it is asked: it may be gone
        self.handles[client].tags.delete(name)
        return None

    def _cleanup(self, client: int, rng: random.Random) -> Check:
        h = self.handles[client]
        if rng.random() < 0.5:
            h.cleanup_old_versions(older_than=timedelta(0), error_if_tagged_old_versions=False)
        else:
            h.cleanup_old_versions(retain_versions=rng.randint(1, 3), error_if_tagged_old_versions=False)
        return None

    def _refresh(self, client: int, rng: random.Random) -> Check:
        self.handles[client] = self.handles[client].checkout_latest()
        return None


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def _create(uri: str) -> None:
    ids = list(range(4 * ROWS))
    table = pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([0] * len(ids), pa.int64())})
    lance_format.write_dataset(table, uri, max_rows_per_file=ROWS)


@dataclass(frozen=True)
class Setup:
    """Where a run's dataset lives and how its clients reach it.

    ``s3_root`` (``s3://bucket``, with ``storage_options``): the dataset is under a fresh prefix
    there, else in a local temporary directory. ``flight``: that many clients (the last ones) go
    through a Flight server this process starts on the dataset's root (:mod:`tests.race.remote`);
    the others are engine handles.
    """

    s3_root: str | None = None
    storage_options: dict[str, str] | None = None
    flight: int = 0


@dataclass(frozen=True)
class Place:
    """A fresh dataset: ``uri`` is ``{root}/{name}``."""

    root: str
    name: str
    storage_options: dict[str, str] | None = None

    @property
    def uri(self) -> str:
        return f"{self.root}/{self.name}"


def _create(place: Place) -> None:
    ids = list(range(4 * ROWS))
    table = pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([0] * len(ids), pa.int64())})
    lance_format.write_dataset(
        table, place.uri, max_rows_per_file=ROWS, storage_options=place.storage_options
    )


@contextmanager
def fresh_dataset(setup: Setup | None = None) -> Iterator[Place]:
    """A new dataset (ids 0..31 in four fragments, all ``v`` 0) where ``setup`` says; a local one is
    removed afterwards (an S3 one goes with its server's data)."""
    setup = setup or Setup()
    if setup.s3_root is not None:
        place = Place(f"{setup.s3_root.rstrip('/')}/race-{uuid.uuid4().hex[:12]}", "t", setup.storage_options)
        _create(place)
        yield place
        return
    root = tempfile.mkdtemp(prefix="race-")
    try:
        place = Place(root, "t")
        _create(place)
        yield place
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def _clients(place: Place, n: int, setup: Setup | None) -> Iterator[tuple[Checker, Clients]]:
    """The checker and the ``n`` clients of a run on ``place`` (the last ``setup.flight`` remote)."""
    checker = Checker(place.uri, place.storage_options)
    flight = 0 if setup is None else min(setup.flight, n)
    with ExitStack() as stack:
        remote = None
        if flight:
            from tests.race.remote import FlightOps

            remote = stack.enter_context(FlightOps.serving(place, frozenset(range(n - flight, n)), checker))
        cl = Clients(place.uri, n, checker, remote)
        try:
            yield checker, cl
        finally:
            for s in cl.sessions:
                s.close()
            checker.session.close()


def run_schedule(schedule: list[Step], clients: int, setup: Setup | None = None) -> Outcome:
    """Run ``schedule`` on a fresh dataset; the outcome's violations name the failing step."""
    out = Outcome()
    with fresh_dataset(setup) as place, _clients(place, clients, setup) as (checker, cl):
        checker.sweep(out, "create")
        for i, step in enumerate(schedule):
            before = len(out.violations)
            hook = None
            if step.nested is not None:
                op, other, seed = step.nested
                store = cl.handles[step.client].store

                def nested(op: str = op, other: int = other, seed: int = seed) -> None:
                    cl.run(other, op, seed, out)

                hook = _Hook(store, step.hook_kind, step.hook_at, nested)
            cl.run(step.client, step.op, step.seed, out, hook)
            cleaned = "cleanup" in (step.op, step.nested[0] if step.nested else "")
            checker.sweep(out, f"after step {i}", full=cleaned or i == len(schedule) - 1)
            if len(out.violations) > before:
                out.violations[before:] = [f"step {i} ({step}): {v}" for v in out.violations[before:]] + [
                    f"  schedule: {'; '.join(map(str, schedule[: i + 1]))}"
                ]
                break
    return out


def run_threaded(rng: random.Random, steps: int, clients: int, setup: Setup | None = None) -> Outcome:
    """Each client runs ``steps`` random operations in its own thread; the checks run as they commit
    and once more at the end."""
    out = Outcome()
    names = list(OPS)
    weights = [OPS[n] for n in names]
    plans = [
        [(rng.choices(names, weights)[0], rng.randrange(1 << 30)) for _ in range(steps)]
        for _ in range(clients)
    ]
    with fresh_dataset(setup) as place, _clients(place, clients, setup) as (checker, cl):
        outs = [Outcome() for _ in range(clients)]

        def worker(c: int) -> None:
            for op, seed in plans[c]:
                cl.run(c, op, seed, outs[c])
                time.sleep(0)

        threads = [
            threading.Thread(target=worker, args=(c,), name=f"race-client-{c}") for c in range(clients)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for o in outs:
            out.merge(o)
        checker.sweep(out, "after the threads")
        if out.violations:
            out.violations.append(f"  plans: {plans}")
    return out
