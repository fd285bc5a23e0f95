"""Multi-base datasets: data files under other roots than the dataset's own (pylance's
``DatasetBasePath``, ``initial_bases=``, ``target_bases=``, ``add_bases``).

A manifest lists its base paths (id, optional name, path, whether the path is another dataset's
root); a data file with a ``base_id`` lives under that base: ``{path}/data/{file}`` for a dataset
root, ``{path}/{file}`` otherwise. Writers name target bases (by name or path) and spread their new
files over them in turn, as pylance does; deletion files and manifests stay in the dataset's root.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lance_format.core.errors import InvalidInputError, InvalidTypeError
from lance_format.io.runtime import IORuntime
from lance_format.io.store import ObjectStore, store_for_uri
from lance_format.table.commit import commit_transaction
from lance_format.table.model import BasePath, Manifest, Transaction, UpdateBases
from lance_format.table.naming import ManifestNaming
from lance_format.table.transaction import assign_base_ids

__all__ = [
    "BaseStoreParams",
    "DatasetBasePath",
    "WriteTarget",
    "add_bases",
    "as_base_paths",
    "base_paths",
    "base_store_options",
    "check_base_store_params",
    "new_bases",
    "resolve_targets",
]


@dataclass(frozen=True)
class WriteTarget:
    """Where new data files go: ``{prefix}{name}`` in ``store``, recorded with ``base_id``."""

    store: ObjectStore
    prefix: str
    base_id: int | None


@dataclass(frozen=True)
class DatasetBasePath:
    """A base path of a dataset (pylance's ``lance.DatasetBasePath``).

    ``id`` is assigned when the base is committed (``None`` until then).
    """

    path: str
    name: str | None = None
    is_dataset_root: bool = False
    id: int | None = None

    def to_model(self) -> BasePath:
        """The manifest's form (id 0: to be assigned)."""
        return BasePath(self.id or 0, self.name, bool(self.is_dataset_root), str(self.path))

    @staticmethod
    def of(base: BasePath) -> DatasetBasePath:
        """The base path of a manifest entry."""
        return DatasetBasePath(base.path, base.name, base.is_dataset_root, base.id)


def as_base_paths(items: Iterable[Any] | None) -> tuple[BasePath, ...]:
    """Manifest base paths from ours or pylance's ``DatasetBasePath`` objects (same fields)."""
    out = []
    for item in items or ():
        if isinstance(item, DatasetBasePath):
            out.append(item.to_model())
            continue
        path = getattr(item, "path", None)
        if not isinstance(path, str) or not path:
            raise InvalidInputError(f"expected a DatasetBasePath, got {item!r}")
        name = getattr(item, "name", None)
        out.append(BasePath(int(getattr(item, "id", None) or 0), name, bool(item.is_dataset_root), path))
    return tuple(out)


def new_bases(initial: Iterable[Any] | None) -> tuple[BasePath, ...]:
    """``initial`` bases of a new dataset with their ids (1, 2, ... as pylance numbers them)."""
    return assign_base_ids((), as_base_paths(initial))


#: pylance's ``base_store_params``: object-store options by base path URI.
BaseStoreParams = Mapping[str, Mapping[str, str]]


def check_base_store_params(params: object) -> dict[str, dict[str, str]] | None:
    """``params`` as a copy (``None`` for none): a dict of base path URI to a dict of options."""
    if params is None:
        return None
    if not isinstance(params, Mapping):
        raise InvalidTypeError(f"base_store_params must be a dict, got {type(params).__name__}")
    out = {}
    for uri, options in params.items():
        if not isinstance(uri, str) or not isinstance(options, Mapping):
            raise InvalidTypeError("base_store_params maps base path URIs to dicts of storage options")
        out[uri] = {str(k): str(v) for k, v in options.items()}
    return out


def base_store_options(
    path: str, storage_options: dict[str, str] | None, params: BaseStoreParams | None
) -> dict[str, str] | None:
    """The options of the store of the base at ``path``: its entry of ``params`` (matched by the
    exact URI the manifest records; it replaces ``storage_options``, as pylance's), else
    ``storage_options``."""
    if params is not None and path in params:
        return dict(params[path])
    return storage_options


def resolve_targets(
    bases: Sequence[BasePath],
    target_bases: Sequence[str] | None,
    target_all_bases: bool | None,
    storage_options: dict[str, str] | None,
    runtime: IORuntime | None = None,
    base_store_params: BaseStoreParams | None = None,
) -> list[WriteTarget] | None:
    """Where new files go: the bases named (by name or path) in ``target_bases``, or all of them;
    ``None`` for the dataset's own ``data/``. Their stores use ``runtime`` (the dataset store's:
    its session's gate, pools and writer settings) and their options (see
    :func:`base_store_options`)."""
    if target_all_bases:
        if target_bases:
            raise InvalidInputError("pass either target_bases or target_all_bases, not both")
        chosen = list(bases)
        if not chosen:
            raise InvalidInputError("target_all_bases: the dataset has no base paths")
    elif target_bases:
        if isinstance(target_bases, str):
            raise InvalidInputError("target_bases must be a list of base names or paths")
        chosen = []
        for ref in target_bases:
            match = next((b for b in bases if ref in (b.name, b.path)), None)
            if match is None:
                raise InvalidInputError(f"Base reference {ref!r} not found in available bases")
            chosen.append(match)
    else:
        return None
    return [
        WriteTarget(
            store_for_uri(
                b.path, base_store_options(b.path, storage_options, base_store_params), runtime=runtime
            ),
            "data/" if b.is_dataset_root else "",
            b.id,
        )
        for b in chosen
    ]


def add_bases(
    store: ObjectStore,
    manifest: Manifest,
    naming: ManifestNaming,
    new: Iterable[Any],
    transaction_properties: dict[str, str] | None = None,
) -> Manifest:
    """Commit more base paths on top of ``manifest``, a version of the dataset in ``store`` (ids
    assigned after the largest in use); the new manifest."""
    added = as_base_paths(new)
    if not added:
        raise InvalidInputError("add_bases needs at least one base path")
    assign_base_ids(manifest.base_paths, added)  # names and paths unique: refuse before writing
    props = dict(transaction_properties or {})
    txn = Transaction(manifest.version, str(uuid.uuid4()), UpdateBases(added), properties=props)
    return commit_transaction(store, txn, manifest, naming)


def base_paths(manifest: Manifest) -> dict[int, DatasetBasePath]:
    """The manifest's base paths by id (pylance's ``LanceDataset.base_paths()``)."""
    return {b.id: DatasetBasePath.of(b) for b in manifest.base_paths}
