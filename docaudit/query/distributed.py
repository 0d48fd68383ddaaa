"""Querying on Ray workers (docs/scaling.md): documents scheduled on a pool of actors, each holding one querier.

A querier given the pool of :func:`scale_out` sends, at every ``stats_many``, the documents its cache does not hold
to the actors and writes each result into the cache on the driver, once, atomically (``Querier.store``); the cache
keys are the driver's, so they do not depend on where a document was queried. A task lost with its worker (killed,
out of memory, node lost) is sent again to another worker while Ray restarts the dead one; an interrupted run
leaves only whole entries, and a rerun sends only the documents that are missing. Ray is imported only when a run
needs it."""

from __future__ import annotations

import logging
import math
import os
import time
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm.auto import tqdm

from docaudit.config import ModelConfig, QueryConfig, RayConfig
from docaudit.errors import DocauditError, ModelError, restated
from docaudit.io import sha256_text
from docaudit.query.querier import Querier, open_querier
from docaudit.query.stats import NonFiniteStats

if TYPE_CHECKING:
    from docaudit.query.stats import TokenStats

log = logging.getLogger(__name__)


@contextmanager
def scale_out(config: RayConfig | None) -> Iterator[RayPool | None]:
    """The pool of Ray workers for the block (``config=None``: None, and nothing changes); a querier given it
    (``open_querier(..., pool=pool)``, ``Querier(..., pool=pool)``) queries there. A local instance is started at
    the first query; a cluster (``config.address``) is joined at once and joblib's ``ray`` backend is the default
    within the block, so the CPU work run through joblib (reading and cleaning documents, fitting forests) runs on
    the cluster too. Whatever was started is stopped on leaving the block."""
    if config is None:
        yield None
        return
    pool = RayPool(config)
    try:
        with pool.joblib_backend():
            yield pool
    finally:
        pool.close()


@dataclass
class RunSummary:
    """What one ``stats_many`` on the workers did."""

    documents: int  # asked for
    cached: int  # found in the cache (never sent)
    computed: int  # queried on the workers
    tokens: int  # tokens of the documents computed
    seconds: float
    failures: int  # tasks lost with their worker
    resent: int  # documents sent again after such a loss
    workers: int  # workers alive at the end

    def line(self) -> str:
        rate = self.tokens / self.seconds if self.seconds > 0 else 0.0
        return (
            f"ray: {self.computed} documents queried on {self.workers} workers, {self.cached} from the cache; "
            f"{self.tokens:,} tokens in {self.seconds:.1f} s ({rate:,.0f} tokens/s); {self.failures} tasks lost with "
            f"their worker, {self.resent} documents sent again"
        )


# A task lost with its worker: sent again elsewhere. Any other failure on a worker is an error of the run.
def _lost_errors() -> tuple[type[BaseException], ...]:
    from ray import exceptions as e

    return (e.RayActorError, e.WorkerCrashedError, e.OutOfMemoryError, e.NodeDiedError, e.ObjectLostError)


class _Worker:
    """A Ray actor: one querier per (model, query, seed) it is asked for, each model loaded once, no cache."""

    def __init__(self):
        self._models: dict = {}
        self._queriers: dict = {}

    def ping(self) -> int:
        return os.getpid()

    def stats(self, model: ModelConfig, query: QueryConfig, seed: int, items: list[tuple[str, str]]) -> list[tuple]:
        """``(cache key, TokenStats)`` of each ``(text, sha256)`` queried with the run's ``seed``, ``(cache key,
        NonFinite)`` when the model gave non-finite statistics for it, or ``(cache key, message)`` when the text
        cannot be queried."""
        querier = self._queriers.get((model, query, seed))
        if querier is None:
            querier = open_querier(self._models.get(model, model), query, cache=False, seed=seed)
            self._models[model] = querier.lm
            self._queriers[(model, query, seed)] = querier
        out = []
        for text, sha in items:
            key = querier.key(sha)
            try:
                out.append((key, querier.stats(text, sha)))
            except NonFiniteStats as e:
                out.append((key, NonFinite(str(e))))
            except DocauditError as e:  # sent back whole: its kind decides the exit status
                out.append((key, e))
        return out


@dataclass(frozen=True)
class NonFinite:
    """A worker's answer for a document whose statistics came out non-finite: never cached; the driver skips the
    document where the caller asked for that (``skip_nonfinite``), as a querier in one process does."""

    message: str


def _ray():
    try:
        import ray
    except ImportError as e:
        raise ModelError("--ray needs Ray: pip install 'docaudit[ray]'") from e
    return ray


class RayPool:
    """Ray actors holding the model, created at the first query (Ray started or joined then) and kept until
    :meth:`close`. ``summaries`` lists a :class:`RunSummary` per run."""

    def __init__(self, config: RayConfig = RayConfig()):
        self.config = config
        self.actors: list = []
        self.state: list[str] = []  # per actor: "ready", "probing" (starting or restarting) or "dead"
        self.probes: dict = {}  # ping ref -> actor index
        self.device: str | None = None
        self.summaries: list[RunSummary] = []
        self._started_ray = False

    def start_ray(self) -> None:
        """Join the cluster at ``config.address``, or start a local instance (no dashboard, no usage report), unless
        Ray is already initialized in this process."""
        ray = _ray()
        if ray.is_initialized():
            return
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        c = self.config
        if c.address is None:
            cpus = os.cpu_count() or 1
            if c.workers is not None:
                cpus = max(cpus, math.ceil(c.workers * c.cpus_per_worker))
            # workers import this copy of docaudit (a checkout is not necessarily installed)
            path = os.pathsep.join(p for p in (str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH")) if p)
            ray.init(
                address="local",  # a new instance, even when a cluster runs on this machine
                num_cpus=cpus,
                include_dashboard=False,
                log_to_driver=False,
                runtime_env={"env_vars": {"PYTHONPATH": path}},
            )
        else:
            try:
                ray.init(address=c.address, include_dashboard=False, log_to_driver=False)
            except (ConnectionError, ValueError, RuntimeError) as e:
                raise ModelError(f"cannot join the Ray cluster at {c.address}: {_first_line(e)}") from e
        self._started_ray = True

    @contextmanager
    def joblib_backend(self):
        """joblib's ``ray`` backend as the default within the block, once Ray is running (else joblib's own)."""
        import joblib

        try:
            from ray.util.joblib import register_ray
        except ImportError:
            yield
            return
        register_ray()
        if self.config.address is not None:
            self.start_ray()
            with joblib.parallel_backend("ray"):
                yield
        else:
            yield

    def close(self) -> None:
        """Stop the actors, and Ray when this pool started it."""
        if not (self.actors or self._started_ray):
            return
        ray = _ray()
        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        self.actors, self.state, self.probes = [], [], {}
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False

    def _start(self, model_device: str) -> None:
        ray = _ray()
        self.start_ray()
        c = self.config
        resources = ray.cluster_resources()
        have = resources.get("GPU", 0)
        gpus = c.gpus_per_worker
        if gpus is None:
            gpus = 1.0 if have and model_device != "cpu" else 0.0
        if model_device.startswith("cuda") and not gpus:
            raise DocauditError(f"--device {model_device}, but the Ray workers get no GPU (the cluster has {have:g})")
        workers = c.workers
        if workers is None:
            share = have / gpus if gpus else resources.get("CPU", 1) / (c.cpus_per_worker or 1)
            # on a cluster, joblib's tasks (reading, fitting) need a CPU the CPU-only actors do not hold
            workers = max(1, int(share) - (c.address is not None and not gpus))
        self.device = "cuda" if gpus else "cpu"
        remote = ray.remote(_Worker).options(
            num_cpus=c.cpus_per_worker, num_gpus=gpus, max_restarts=c.max_restarts, max_task_retries=0
        )
        self.actors = [remote.remote() for _ in range(workers)]
        self.state = ["probing"] * workers
        self.probes = {actor.ping.remote(): i for i, actor in enumerate(self.actors)}
        self._resources = f"{resources.get('CPU', 0):g} CPUs, {have:g} GPUs"
        self._asked = f"{workers} workers of {c.cpus_per_worker:g} CPUs and {gpus:g} GPUs"

    def _probed(self, ref) -> None:
        """A ping came back: the actor is ready, or dead for good."""
        ray = _ray()
        i = self.probes.pop(ref)
        try:
            ray.get(ref)
        except _lost_errors() as e:
            if isinstance(e, getattr(ray.exceptions, "ActorUnavailableError", ())):  # still restarting: ask again
                self.probes[self.actors[i].ping.remote()] = i
                return
            self.state[i] = "dead"
            log.warning("a Ray worker is gone for good (%s)", _first_line(e))
            return
        self.state[i] = "ready"

    def _probe(self, i: int) -> None:
        if self.state[i] == "ready":
            self.state[i] = "probing"
            self.probes[self.actors[i].ping.remote()] = i

    def stats_many(
        self,
        querier: Querier,
        texts: Iterable[tuple[str, str | None]],
        total: int | None = None,
        desc: str = "querying",
        progress: bool = True,
        names: list[str] | None = None,
        skip_nonfinite: bool = False,
    ) -> list[TokenStats | str]:
        """``querier.stats_many`` on the workers: the TokenStats of every text, in order; a text whose statistics
        are not finite gets the reason in their place with ``skip_nonfinite``, and stops the run (named) without."""
        items = [(text, sha or sha256_text(text)) for text, sha in texts]
        computed = self.compute(querier, items, keep=True, desc=desc, progress=progress)
        out: list[TokenStats | str] = []
        for i, (text, sha) in enumerate(items):
            stats = computed.get(querier.key(sha))
            if isinstance(stats, NonFinite):
                if not skip_nonfinite:
                    raise DocauditError(f"{names[i]}: {stats.message}" if names else stats.message)
                out.append(stats.message)
            else:
                out.append(querier.stats(text, sha) if stats is None else stats)
        return out

    def compute(
        self,
        querier: Querier,
        texts: Iterable[tuple[str, str | None]],
        keep: bool = True,
        desc: str = "querying",
        progress: bool = True,
    ) -> dict[str, TokenStats | NonFinite]:
        """Query on the workers every text whose entry ``querier``'s cache lacks (each distinct text once), writing
        each result into the cache as it arrives; with ``keep``, the results by cache key."""
        items = [(text, sha or sha256_text(text)) for text, sha in texts]
        cache = querier.cache
        todo: dict[str, tuple[str, str]] = {}
        for text, sha in items:
            key = querier.key(sha)
            if key not in todo and (cache is None or not cache.path(key).exists()):
                todo[key] = (text, sha)
        computed: dict[str, TokenStats] = {}
        start = time.perf_counter()
        counts = Counter()
        if todo:
            self._run(querier, todo, keep, computed, counts, desc, progress)
        summary = RunSummary(
            documents=len(items),
            cached=len(items) - len(todo),
            computed=counts["computed"],
            tokens=counts["tokens"],
            seconds=time.perf_counter() - start,
            failures=counts["failures"],
            resent=counts["resent"],
            workers=self.state.count("ready") + self.state.count("probing"),
        )
        self.summaries.append(summary)
        if todo:
            log.info("%s", summary.line())
        return computed

    def _run(self, querier: Querier, todo: dict, keep: bool, computed: dict, counts: Counter, desc, progress) -> None:
        ray = _ray()
        lost = _lost_errors()
        if not self.actors:
            self._start(querier.lm.config.device)
        c = self.config
        model = replace(querier.lm.config, device=self.device)
        tasks = deque(_tasks(todo, c.task_chars))
        attempts: Counter = Counter()
        running: dict = {}  # task ref -> (actor index, keys)
        load = Counter()
        finished: set[str] = set()
        started = time.perf_counter()
        idle_since = None
        with tqdm(total=len(todo), desc=desc, unit="doc", disable=not progress) as bar:
            while tasks or running:
                for i, actor in enumerate(self.actors):
                    while self.state[i] == "ready" and load[i] < c.inflight and tasks:
                        keys = tasks.popleft()
                        ref = actor.stats.remote(model, querier.query, querier.seed, [todo[k] for k in keys])
                        running[ref], load[i] = (i, keys), load[i] + 1
                if "ready" not in self.state and "probing" not in self.state:
                    raise DocauditError(
                        f"every Ray worker died ({counts['failures']} tasks lost); the finished documents are "
                        "cached: run the same command again to resume"
                    )
                if "ready" in self.state or running:
                    idle_since = None
                else:  # every live worker starting or restarting
                    idle_since = idle_since or time.perf_counter()
                    if time.perf_counter() - idle_since > c.start_timeout:
                        raise DocauditError(
                            f"no Ray worker started within {c.start_timeout:g} s (the cluster has {self._resources}; "
                            f"asked for {self._asked})"
                        )
                done, _ = ray.wait([*running, *self.probes], num_returns=1, timeout=1.0)
                for ref in done:
                    if ref in self.probes:
                        self._probed(ref)
                        continue
                    i, keys = running.pop(ref)
                    load[i] -= 1
                    try:
                        results = ray.get(ref)
                    except lost as e:
                        counts["failures"] += 1
                        log.warning("a Ray worker was lost (%s); its documents are sent again", _first_line(e))
                        self._probe(i)
                        for key in keys:
                            attempts[key] += 1
                            if attempts[key] > c.retries:
                                raise DocauditError(
                                    f"a document (sha256 {todo[key][1][:12]}…) was lost with its worker "
                                    f"{attempts[key]} times (out of memory?); the finished documents are cached"
                                ) from e
                        counts["resent"] += len(keys)
                        tasks.appendleft(keys)
                        continue
                    except ray.exceptions.RayTaskError as e:
                        cause = getattr(e, "cause", None)
                        if isinstance(cause, DocauditError):
                            raise restated(cause, f"on a Ray worker: {cause}") from e
                        raise DocauditError(f"on a Ray worker: {_first_line(cause or e)}") from e
                    if [key for key, _ in results] != keys:
                        raise DocauditError(
                            "the Ray workers loaded a model other than the driver's (their cache keys differ): "
                            "every node must see the same model files"
                        )
                    for key, value in results:
                        if isinstance(value, DocauditError):
                            raise value
                        if key in finished:  # sent again, yet its first task came back too
                            continue
                        finished.add(key)
                        if isinstance(value, NonFinite):  # never cached; the caller skips or refuses it
                            counts["nonfinite"] += 1
                            if keep:
                                computed[key] = value
                            continue
                        querier.store(key, value)
                        if keep:
                            computed[key] = value
                        counts["computed"] += 1
                        counts["tokens"] += value.n_tokens
                    bar.update(len(results))
                    rate = counts["tokens"] / max(time.perf_counter() - started, 1e-9)
                    ready = self.state.count("ready")
                    bar.set_postfix(tok_s=f"{rate:,.0f}", failures=counts["failures"], workers=ready)


def _tasks(todo: dict[str, tuple[str, str]], task_chars: int) -> Iterator[list[str]]:
    """Consecutive keys of ``todo`` in groups of at most ``task_chars`` characters of text (one longer text alone)."""
    group, size = [], 0
    for key, (text, _) in todo.items():
        if group and size + len(text) > task_chars:
            yield group
            group, size = [], 0
        group.append(key)
        size += len(text)
    if group:
        yield group


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
