"""mnemo.distributed: one memory store over many processes and hosts, on Ray.

A ShardedStore holds `shards` Ray actors. Each actor owns a durable mnemo
store (snapshot + journal, every write on disk before it is acknowledged) on
its own GPU (``num_gpus=1``, backend CUDA) or on the CPU. The caller:

- routes every id to one shard by a fixed hash of the id (the same in every
  process and after restarts), so add/remove/set_bias of a batch become one
  call per shard, sent together;
- fans a search out to every shard and merges the per-shard lists with
  mnemo_topk_merge (mnemo.topk_merge), so the result is that of one store
  holding every memory: best first, ties to the smaller id.

Failures. An actor that dies (its process killed, its node lost) is restarted
by Ray (``max_restarts``) and reopens its durable shard from its path: every
write that was acknowledged is there. The call that was in flight when the
actor died is retried by the caller (``retries`` times, waiting for the
restart): every write is idempotent (add is an upsert of the same vectors,
remove and set_bias set absolute states), so a write that had reached the
journal before the crash is simply applied again. When the retries run out
the call raises ShardUnavailableError, naming the shard; the write may or may
not have been applied (sending it again is safe). Writes of different callers
to the same id may be applied in either order when one of them is retried.

The shard paths must be reachable from wherever Ray places the actor: a local
folder on a one-host cluster, shared storage (or a node pinned by resources)
on many hosts. See docs/distributed.md.
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .enums import Metric, Status, parse_enum
from .errors import MnemoError, MnemoValueError
from .merge import topk_merge

__all__ = ["ShardedStore", "ShardUnavailableError", "shard_of"]

_MASK = (1 << 64) - 1


class ShardUnavailableError(MnemoError):
    """A shard's actor stayed unreachable through every retry of a call."""

    def __init__(self, shard: int, cause: BaseException) -> None:
        super().__init__(int(Status.E_BACKEND), f"shard {shard} is unavailable: {cause}", "MNEMO_E_BACKEND")
        self.shard = shard
        self.cause = cause

    def __reduce__(self) -> Any:
        return (type(self), (self.shard, self.cause))


def shard_of(ids: np.ndarray, shards: int) -> np.ndarray:
    """The shard of each id: splitmix64 of the id, modulo the shard count."""
    z = np.asarray(ids, dtype=np.uint64).copy()
    with np.errstate(over="ignore"):
        z += np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z % np.uint64(shards)).astype(np.int64)


class _Shard:
    """The body of a shard actor: one durable store in this process."""

    def __init__(self, path: str, dim: int, dtype: str, metric: int, backend: str, threads: int,
                 sync_each: bool) -> None:
        from . import Runtime, Store

        self._rt = Runtime(backend=backend, threads=threads)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._store = Store.open_durable(self._rt, path, dim, dtype, metric,
                                         sync="each_write" if sync_each else "os")

    def pid(self) -> int:
        return os.getpid()

    def add(self, ids: np.ndarray, vectors: np.ndarray, times: Optional[np.ndarray] = None,
            importance: Optional[np.ndarray] = None, fields: Optional[Dict[str, Any]] = None) -> int:
        from .arrays import aligned_array
        self._store.add(aligned_array(ids, np.uint64), aligned_array(vectors, vectors.dtype),
                        times=None if times is None else aligned_array(times, np.float64),
                        importance=None if importance is None else aligned_array(importance, np.float32),
                        **(fields or {}))
        return len(ids)

    def update_fields(self, ids: np.ndarray, fields: Dict[str, Any]) -> int:
        from .arrays import aligned_array
        self._store.update_fields(aligned_array(ids, np.uint64), **fields)
        return len(ids)

    def ids_of_keys(self, keys: List[str]) -> np.ndarray:
        return np.asarray(self._store.ids_of_keys(keys))

    def read(self, ids: np.ndarray) -> List[Any]:
        from .arrays import aligned_array
        return self._store.read(aligned_array(ids, np.uint64))

    def select(self, where: Any) -> np.ndarray:
        return np.asarray(self._store.select(where))

    def count_where(self, where: Any) -> int:
        return self._store.count_where(where)

    def namespaces(self) -> List[Any]:
        return self._store.namespaces()

    def set_times(self, ids: np.ndarray, times: np.ndarray) -> int:
        from .arrays import aligned_array
        self._store.set_times(aligned_array(ids, np.uint64), aligned_array(times, np.float64))
        return len(ids)

    def set_importance(self, ids: np.ndarray, importance: np.ndarray) -> int:
        from .arrays import aligned_array
        self._store.set_importance(aligned_array(ids, np.uint64), aligned_array(importance, np.float32))
        return len(ids)

    def get_meta(self, ids: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        from .arrays import aligned_array
        m = self._store.get_meta(aligned_array(ids, np.uint64))
        return np.asarray(m[0]), np.asarray(m[1]), np.asarray(m[2])

    def remove(self, ids: np.ndarray) -> int:
        from .arrays import aligned_array
        return self._store.remove(aligned_array(ids, np.uint64))

    def set_bias(self, ids: np.ndarray, biases: np.ndarray) -> int:
        from .arrays import aligned_array
        self._store.set_bias(aligned_array(ids, np.uint64), aligned_array(biases, np.float32))
        return len(ids)

    def search(self, queries: np.ndarray, k: int, apply_bias: bool,
               filter_ids: Optional[np.ndarray], activation: Any = None,
               now: Optional[float] = None, nprobe: int = 0, where: Any = None,
               where_each: Any = None) -> Tuple[np.ndarray, np.ndarray]:
        from .arrays import aligned_array
        kw: Dict[str, Any] = {"apply_bias": apply_bias, "nprobe": nprobe, "where": where,
                              "where_each": where_each}
        if activation is not None:
            kw["activation"] = activation
            kw["now"] = now
        if filter_ids is not None:
            kw["filter_ids"] = aligned_array(filter_ids, np.uint64)
        return self._store.search(aligned_array(queries, np.float32), k, **kw)

    def count(self) -> int:
        return self._store.count()

    def checkpoint(self) -> None:
        self._store.checkpoint()

    def build_index(self, options: Dict[str, Any]) -> None:
        self._store.build_index(**options)

    def drop_index(self) -> None:
        self._store.drop_index()

    def wait_index(self) -> None:
        self._store.wait_index()

    def index_info(self) -> Any:
        return self._store.index_info()


class ShardedStore:
    """A store whose shards are Ray actors owning durable mnemo stores.

    Args:
        root: folder of the shards' files (shard i at root/shard-i.mnemo);
            reopened as it is when it exists.
        dim, dtype, metric: the shape of every shard.
        shards: number of actors.
        gpus_per_shard: 1 to put each shard on its own GPU (CUDA backend),
            0 for the CPU.
        threads: CPU threads of each shard's runtime (0 = all cores).
        sync_each: fdatasync each write before acknowledging it.
        max_restarts: how often Ray restarts a dead actor (-1: always).
        retries: how often the caller resends a call whose actor died.
        retry_wait_s: pause before each resend.
        actor_options: extra ray.remote options (resources, scheduling).
    Requires ``ray.init()`` (or ``ray.init(address=...)``) beforehand.
    """

    def __init__(self, root: str, dim: int, dtype: str = "f32", metric: Union[Metric, str, int] = "cosine",
                 shards: int = 4, gpus_per_shard: float = 0, threads: int = 1, sync_each: bool = True,
                 max_restarts: int = -1, retries: int = 5, retry_wait_s: float = 0.5,
                 actor_options: Optional[Dict[str, Any]] = None) -> None:
        import ray

        if shards < 1:
            raise MnemoValueError(Status.E_INVALID_ARGUMENT, "shards must be at least 1")
        self._ray = ray
        self.dim = int(dim)
        self.metric = int(parse_enum(metric, Metric, "metric"))
        self.retries = int(retries)
        self.retry_wait_s = float(retry_wait_s)
        env = {v: os.environ[v] for v in ("MNEMO_LIBRARY", "MNEMO_LIB_DIR", "PYTHONPATH") if v in os.environ}
        opts: Dict[str, Any] = {"max_restarts": max_restarts, "max_task_retries": 0, "num_cpus": 0,
                                "num_gpus": gpus_per_shard}
        if env:
            opts["runtime_env"] = {"env_vars": env}
        opts.update(actor_options or {})
        cls = ray.remote(**opts)(_Shard)
        backend = "cuda" if gpus_per_shard else "cpu"
        self._actors = [cls.remote(os.path.join(os.path.abspath(root), f"shard-{i}.mnemo"), self.dim, dtype,
                                   self.metric, backend, threads, sync_each) for i in range(shards)]
        self._call_all("count", [() for _ in self._actors])  # every shard open before returning

    @property
    def shards(self) -> int:
        return len(self._actors)

    def actor(self, shard: int) -> Any:
        """The Ray actor handle of one shard."""
        return self._actors[shard]

    # -- calls with retry ---------------------------------------------------

    def _call_all(self, method: str, args: Sequence[Optional[tuple]]) -> List[Any]:
        """Calls `method` on every shard whose args are not None, all at once;
        a shard whose actor died is called again after its restart."""
        ray = self._ray
        pending = {i: a for i, a in enumerate(args) if a is not None}
        results: Dict[int, Any] = {}
        for attempt in range(self.retries + 1):
            futures = {i: getattr(self._actors[i], method).remote(*a) for i, a in pending.items()}
            failed: Dict[int, BaseException] = {}
            for i, f in futures.items():
                try:
                    results[i] = ray.get(f)
                except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as exc:
                    failed[i] = exc
            if not failed:
                break
            if attempt == self.retries:
                i, exc = next(iter(failed.items()))
                raise ShardUnavailableError(i, exc)
            pending = {i: pending[i] for i in failed}
            time.sleep(self.retry_wait_s)
        return [results.get(i) for i in range(len(args))]

    def _split(self, ids: Any) -> Tuple[np.ndarray, List[np.ndarray]]:
        ids = np.ascontiguousarray(ids, dtype=np.uint64).ravel()
        owner = shard_of(ids, self.shards)
        return ids, [np.flatnonzero(owner == s) for s in range(self.shards)]

    # -- the store API ------------------------------------------------------

    def add(self, ids: Any, vectors: np.ndarray, *, times: Any = None, importance: Any = None,
            keys: Any = None, namespaces: Any = None, tags: Any = None, attributes: Any = None,
            payloads: Any = None) -> None:
        """Adds (upserts) vectors [n x dim], each to its id's shard, with
        optional last-access times (float64 seconds [n]) and importances
        (float32 [n]), and what the memories hold besides (keys, namespaces,
        tags, attributes, payloads: lists of n entries, as Store.add takes
        them) on the same shard as their vector.

        A key stays unique over all the shards: one held by another id on
        any shard, or given to two ids in this call, raises MnemoValueError
        (MNEMO_E_INVALID_ARGUMENT) before anything is written. (Two callers
        writing the same new key to different ids at the same moment are
        not caught: give each key from one writer.)"""
        ids, parts = self._split(ids)
        vectors = np.asarray(vectors)
        if vectors.shape != (len(ids), self.dim):
            raise MnemoValueError(Status.E_SHAPE, f"vectors has shape {vectors.shape}; expected "
                                                  f"({len(ids)}, {self.dim})")
        t = None if times is None else self._per_id(ids, times, "times", np.float64)
        m = None if importance is None else self._per_id(ids, importance, "importance", np.float32)
        fields = self._fields(ids, keys=keys, namespaces=namespaces, tags=tags, attributes=attributes,
                              payloads=payloads)
        self._call_all("add", [(ids[p], vectors[p], None if t is None else t[p], None if m is None else m[p],
                                self._fields_of(fields, p)) if len(p) else None for p in parts])

    # -- fields: keys, namespaces, tags, attributes, payloads ---------------

    def _fields(self, ids: np.ndarray, **columns: Any) -> Dict[str, list]:
        """The columns given, each a list of one entry per id, with keys
        checked unique over every shard."""
        out: Dict[str, list] = {}
        for name, col in columns.items():
            if col is None:
                continue
            if isinstance(col, (str, bytes)) or not hasattr(col, "__len__"):
                raise MnemoValueError(Status.E_INVALID_ARGUMENT,
                                      f"{name} must be a list of {len(ids)} entries, one per id")
            col = list(col)
            if len(col) != len(ids):
                raise MnemoValueError(Status.E_SHAPE, f"{name} has {len(col)} entries; expected {len(ids)}")
            out[name] = col
        keys = out.get("keys")
        if keys is not None:
            given: Dict[str, int] = {}
            last = {int(i): j for j, i in enumerate(ids)}  # a repeated id takes its last entry alone
            for j, (i, k) in enumerate(zip(ids, keys)):
                if k is None or last[int(i)] != j:
                    continue
                if given.setdefault(k, int(i)) != int(i):
                    raise MnemoValueError(Status.E_INVALID_ARGUMENT,
                                          f"key {k!r} is given to memories {given[k]} and {int(i)}")
            if given:
                names = list(given)
                held = self.ids_of_keys(names)
                for k, h in zip(names, held):
                    if h != np.uint64(_MASK) and int(h) != given[k]:
                        raise MnemoValueError(Status.E_INVALID_ARGUMENT, f"key {k!r} is held by memory {int(h)}")
        return out

    @staticmethod
    def _fields_of(fields: Dict[str, list], p: np.ndarray) -> Optional[Dict[str, list]]:
        """One shard's rows (positions p) of each column."""
        if not fields:
            return None
        return {name: [col[j] for j in p] for name, col in fields.items()}

    def update_fields(self, ids: Any, *, keys: Any = None, namespaces: Any = None, tags: Any = None,
                      attributes: Any = None, payloads: Any = None) -> None:
        """Writes fields of memories already held (Store.update_fields), on
        each id's shard; keys checked unique over every shard as add does.
        An absent id raises MnemoError NOT_FOUND from its shard (the other
        shards' writes may have been applied then)."""
        ids, parts = self._split(ids)
        fields = self._fields(ids, keys=keys, namespaces=namespaces, tags=tags, attributes=attributes,
                              payloads=payloads)
        if not fields:
            return
        self._call_all("update_fields", [(ids[p], self._fields_of(fields, p)) if len(p) else None for p in parts])

    def ids_of_keys(self, keys: Any) -> np.ndarray:
        """The id of each key (uint64; NO_ID for a key no memory holds),
        asked of every shard."""
        keys = [keys] if isinstance(keys, str) else list(keys)
        out = np.full(len(keys), _MASK, dtype=np.uint64)
        if not keys:
            return out
        for got in self._call_all("ids_of_keys", [(keys,) for _ in self._actors]):
            found = got != np.uint64(_MASK)
            out[found] = got[found]
        return out

    def read(self, ids: Any) -> List[Any]:
        """The Memory of each id (None where absent), in the order given."""
        ids, parts = self._split(ids)
        out: List[Any] = [None] * len(ids)
        for p, got in zip(parts, self._call_all("read", [(ids[p],) if len(p) else None for p in parts])):
            for j, m in zip(p, got or []):
                out[j] = m
        return out

    @staticmethod
    def _portable(where: Any) -> Any:
        """A filter as the shards take it: its dictionary form (a Filter's
        handle lives in this process only)."""
        from .filters import Filter
        return where.to_dict() if isinstance(where, Filter) else where

    def select(self, where: Any = None, offset: int = 0, limit: Optional[int] = None) -> np.ndarray:
        """The ids (ascending) of the memories `where` matches over every
        shard, from the offset-th on, at most `limit` (Store.select)."""
        w = self._portable(where)
        got = self._call_all("select", [(w,) for _ in self._actors])
        ids = np.sort(np.concatenate([np.asarray(g, dtype=np.uint64) for g in got]))
        end = None if limit is None else offset + limit
        return ids[offset:end]

    def count_where(self, where: Any = None) -> int:
        """How many memories `where` matches over every shard."""
        w = self._portable(where)
        return int(sum(self._call_all("count_where", [(w,) for _ in self._actors])))

    def namespaces(self) -> List[Tuple[Tuple[str, ...], int]]:
        """Each namespace held and how many memories hold it, over every
        shard, sorted by parts (Store.namespaces)."""
        total: Dict[Tuple[str, ...], int] = {}
        for got in self._call_all("namespaces", [() for _ in self._actors]):
            for parts, n in got:
                total[tuple(parts)] = total.get(tuple(parts), 0) + int(n)
        return sorted(total.items())

    def _per_id(self, ids: np.ndarray, values: Any, name: str, dtype: Any) -> np.ndarray:
        v = np.asarray(values, dtype=dtype).ravel()
        if v.shape != ids.shape:
            raise MnemoValueError(Status.E_SHAPE, f"{name} has {v.shape[0]} entries; expected {ids.shape[0]}")
        return v

    def set_times(self, ids: Any, times: Any) -> None:
        """Sets the last-access time of each id (MnemoError NOT_FOUND from a
        shard lacking one; the other shards' times may have changed then)."""
        ids, parts = self._split(ids)
        t = self._per_id(ids, times, "times", np.float64)
        self._call_all("set_times", [(ids[p], t[p]) if len(p) else None for p in parts])

    def set_importance(self, ids: Any, importance: Any) -> None:
        """Sets the importance of each id (errors as set_times)."""
        ids, parts = self._split(ids)
        m = self._per_id(ids, importance, "importance", np.float32)
        self._call_all("set_importance", [(ids[p], m[p]) if len(p) else None for p in parts])

    def get_meta(self, ids: Any) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(times, importance, biases) of each id, in the order given."""
        ids, parts = self._split(ids)
        out = self._call_all("get_meta", [(ids[p],) if len(p) else None for p in parts])
        times = np.zeros(len(ids), np.float64)
        imp = np.zeros(len(ids), np.float32)
        bias = np.zeros(len(ids), np.float32)
        for p, o in zip(parts, out):
            if len(p):
                times[p], imp[p], bias[p] = o
        return times, imp, bias

    def remove(self, ids: Any) -> int:
        """Removes ids; returns how many were present."""
        ids, parts = self._split(ids)
        out = self._call_all("remove", [(ids[p],) if len(p) else None for p in parts])
        return int(sum(r for r in out if r))

    def set_bias(self, ids: Any, biases: Any) -> None:
        """Sets the bias of each id (MnemoError NOT_FOUND from a shard lacking one)."""
        ids, parts = self._split(ids)
        biases = np.asarray(biases, dtype=np.float32).ravel()
        self._call_all("set_bias", [(ids[p], biases[p]) if len(p) else None for p in parts])

    def search(self, queries: np.ndarray, k: int, *, apply_bias: bool = False,
               filter_ids: Any = None, activation: Any = None, now: Optional[float] = None,
               touch: bool = False, nprobe: int = 0, where: Any = None,
               where_each: Any = None) -> Tuple[np.ndarray, np.ndarray]:
        """k best memories of every query over all shards: (ids, scores) [nq x k].

        where / where_each as Store.search takes them (a Filter or its
        dictionary form; one for all queries, one per query): every shard
        returns its best min(k, its matches), so the merged answer holds
        min(k, matches over all shards), never fewer.

        nprobe as Store.search takes it, applied by every shard to its own
        index (build_index): each shard reads its nprobe nearest lists and its
        hot tier; nprobe >= every shard's nlist (or 0) is the exact search.

        activation, now and touch as Store.search takes them, with two
        differences that come from the shards being separate stores:
        `now` (default: this process's clock) is read once here so every
        shard ages its memories alike, and touch sets the times of the
        merged result only, after the merge (not atomically with the
        search). Min-max normalisation needs the whole store's ranges, which
        separate stores do not share: Activation(normalize=True) raises
        MnemoValueError (MNEMO_E_UNSUPPORTED); a store sharded inside one
        process (Runtime shards) supports it."""
        from .store import Activation, _check_nprobe
        nprobe = _check_nprobe(nprobe)
        q = np.ascontiguousarray(queries, dtype=np.float32)
        if q.ndim == 1:
            q = q.reshape(1, -1)
        f = None if filter_ids is None else np.ascontiguousarray(filter_ids, dtype=np.uint64).ravel()
        act = Activation() if activation is True else (None if activation in (None, False) else activation)
        if act is None and (now is not None or touch):
            raise MnemoValueError(Status.E_INVALID_ARGUMENT, "now and touch need an activation")
        if act is not None and act.normalize:
            raise MnemoValueError(Status.E_UNSUPPORTED,
                                  "min-max normalisation over Ray shards: the shards do not share their ranges")
        at = None if act is None else (time.time() if now is None else float(now))
        w = self._portable(where)
        we = None if where_each is None else [self._portable(x) for x in where_each]
        out = self._call_all("search", [(q, int(k), bool(apply_bias), f, act, at, nprobe, w, we)
                                        for _ in self._actors])
        ids, scores = topk_merge([o[0] for o in out], [o[1] for o in out], self.metric)
        if touch:
            hit = np.unique(ids[ids != np.uint64(2**64 - 1)])
            if len(hit):
                self.set_times(hit, np.full(len(hit), at, np.float64))
        return ids, scores

    def count(self) -> int:
        return int(sum(self._call_all("count", [() for _ in self._actors])))

    def counts(self) -> List[int]:
        """Live memories of each shard."""
        return [int(c) for c in self._call_all("count", [() for _ in self._actors])]

    def checkpoint(self) -> None:
        """A new snapshot on every shard (each journal starts afresh)."""
        self._call_all("checkpoint", [() for _ in self._actors])

    def build_index(self, nlist: int = 0, train_iters: int = 0, train_per_list: int = 0,
                    seed: int = 1, rebuild_hot_fraction: float = 0.25,
                    rebuild_hot_min: int = 4096, rebuild_skew: float = 8.0,
                    background: bool = True) -> None:
        """Builds an inverted-file index on every shard, all at once, with
        the arguments of Store.build_index (nlist lists per shard; 0: the
        square root of the shard's count). Each shard's durable store
        journals its layout, so a restarted actor reopens with its index.
        The arguments are checked here, before any shard is called."""
        from .store import _index_options
        options = dict(nlist=nlist, train_iters=train_iters, train_per_list=train_per_list,
                       seed=seed, rebuild_hot_fraction=rebuild_hot_fraction,
                       rebuild_hot_min=rebuild_hot_min, rebuild_skew=rebuild_skew,
                       background=background)
        _index_options(**options)
        self._call_all("build_index", [(options,) for _ in self._actors])

    def drop_index(self) -> None:
        """Removes every shard's index (searches are then exact)."""
        self._call_all("drop_index", [() for _ in self._actors])

    def wait_index(self) -> None:
        """Waits for the background rebuilds of every shard."""
        self._call_all("wait_index", [() for _ in self._actors])

    def index_info(self, per_shard: bool = False) -> Any:
        """The shards' index state: with per_shard, a list of IndexInfo in
        shard order; else one IndexInfo adding up the shards' nlist (each
        shard trains its own centroids, so this is the lists of all of
        them), indexed, hot and builds (largest_list and last_build_seconds:
        the largest; rebuilding: any shard)."""
        from .store import IndexInfo
        infos = self._call_all("index_info", [() for _ in self._actors])
        if per_shard:
            return infos
        return IndexInfo(nlist=sum(i.nlist for i in infos),
                         indexed=sum(i.indexed for i in infos),
                         hot=sum(i.hot for i in infos),
                         largest_list=max((i.largest_list for i in infos), default=0),
                         builds=sum(i.builds for i in infos),
                         rebuilding=any(i.rebuilding for i in infos),
                         last_build_seconds=max((i.last_build_seconds for i in infos), default=0.0))

    def close(self) -> None:
        """Ends the actors (their files stay)."""
        for a in self._actors:
            self._ray.kill(a, no_restart=True)
        self._actors = []
