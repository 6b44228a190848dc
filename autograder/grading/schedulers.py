"""Where grading batches run: an embedded Dask cluster (the default), an existing Dask cluster
(``--scheduler tls://host:8786``) or a plain thread pool (``--scheduler pool``, the grade
command's pool before Dask, kept for comparison and for machines without Dask).

An existing cluster is reached only over mutual TLS (:mod:`autograder.grading.certs` makes the
certificates): whoever can connect to a scheduler can run code on its workers and hand back
results, so a plain ``tcp://`` address is refused.

Each batch is a :func:`autograder.grading.task.grade_batch` call that waits on an ``nbgrader
autograde`` subprocess, so one thread per batch is all a worker needs.  Dask runs a batch again
on another worker when its worker dies or is lost (``distributed.scheduler.allowed-failures``
deaths at most); a batch that raises is tried once more.  The grade command merges each student
once, whatever Dask does.
"""
from __future__ import annotations

import concurrent.futures
import shutil
import tempfile
from typing import Iterable

from autograder.grading.task import BatchJob, grade_batch


class PoolScheduler:
    """A thread pool in the grade command: one thread per parallel ``nbgrader autograde``."""

    def __init__(self, workers: int):
        self.workers = max(1, workers)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.workers)
        self._progress = None

    def describe(self) -> str:
        return f"a pool of {self.workers} worker(s)"

    def on_progress(self, topic: str, handler) -> None:
        """Call ``handler(student, score)`` as each student of a batch is done."""
        self._progress = handler

    def submit(self, job: BatchJob):
        return self._pool.submit(grade_batch, job, self._progress)

    def wait_any(self, futures: Iterable):
        done, pending = concurrent.futures.wait(list(futures), return_when=concurrent.futures.FIRST_COMPLETED)
        return done, pending

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


class DaskScheduler:
    """Batches as Dask tasks, on an embedded ``LocalCluster`` or on the cluster at ``address``."""

    def __init__(self, workers: int, address: str | None = None, security=None):
        import dask
        from distributed import Client, LocalCluster

        # A task leaves the scheduler only when a worker's thread is free, so a lost worker's
        # queue is never long and there is nothing to steal.  Tasks last minutes: the
        # millisecond-scale bookkeeping (event-loop ticks, profiling, system and memory monitors)
        # would only take CPU from the nbgrader processes on a small machine.
        dask.config.set({"distributed.scheduler.worker-saturation": 1.0,
                         "distributed.scheduler.work-stealing": False,
                         "distributed.worker.profile.enabled": False,
                         "distributed.admin.tick.interval": "1s",
                         "distributed.admin.system-monitor.interval": "5s",
                         "distributed.worker.memory.monitor-interval": "5s",
                         # No HTTP routes (health, metrics, task and worker info) on the scheduler or the workers.
                         "distributed.scheduler.http.routes": [],
                         "distributed.worker.http.routes": []})
        self._cluster = None
        self._scratch = None
        if address is None:
            # The embedded workers' folders (Dask's scratch space, each batch's private course) in
            # a folder of this run's own, removed by close(): nothing left in the temporary folder.
            self._scratch = tempfile.mkdtemp(prefix="normlayers-dask-")
            dask.config.set({"temporary-directory": self._scratch})
            # Threads of this process (each task only waits on its nbgrader subprocess), talking
            # in-process: no port that another user of the machine could send work to.
            # Dask's HTTP servers start anyway: on 127.0.0.1, any free port (no "port 8787 in use"
            # warning when another cluster has it), every route switched off above.
            self._cluster = LocalCluster(n_workers=max(1, workers), threads_per_worker=1, processes=False,
                                         protocol="inproc://", dashboard_address="127.0.0.1:0",
                                         worker_dashboard_address="127.0.0.1:0")
            self._client = Client(self._cluster, set_as_default=False)
        else:
            self._client = Client(address, set_as_default=False, timeout="30s", security=security)
        self.address = address
        self.workers = max(1, sum(self._client.nthreads().values())) if address else max(1, workers)

    def describe(self) -> str:
        where = f"the Dask cluster at {self.address}" if self.address else "an embedded Dask cluster"
        return f"{where} ({self.workers} thread(s))"

    def on_progress(self, topic: str, handler) -> None:
        """Call ``handler(student, score)`` for each event a worker logs on ``topic`` (the job's
        ``progress_topic``).  Only shown, never merged: a cluster's events are not signed."""
        def receive(event) -> None:
            message = event[1] if isinstance(event, tuple) and len(event) == 2 else {}
            if isinstance(message, dict) and isinstance(message.get("student"), str):
                score = message.get("score")
                handler(message["student"], score if isinstance(score, (int, float)) else None)

        self._client.subscribe_topic(topic, receive)

    def submit(self, job: BatchJob):
        # pure=False: a random key, so that two grade commands on one scheduler never share a task.
        return self._client.submit(grade_batch, job, pure=False, retries=1)

    def wait_any(self, futures: Iterable):
        from distributed import wait

        with self._client.as_current():
            done, pending = wait(list(futures), return_when="FIRST_COMPLETED")
        return done, pending

    def close(self) -> None:
        self._client.close()
        if self._cluster is not None:
            self._cluster.close()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)


class InsecureCluster(ValueError):
    """A cluster address or credentials that would let others command the grading."""


def cluster_security(ca_file: str | None, cert: str | None, key: str | None):
    """The grade command's side of the cluster's mutual TLS: its certificate and the course's CA."""
    from distributed.security import Security

    missing = [flag for flag, value in (("--tls-ca-file", ca_file), ("--tls-cert", cert), ("--tls-key", key)) if not value]
    if missing:
        raise InsecureCluster(f"a Dask cluster needs {', '.join(missing)} (the course's CA and the client's "
                              "certificate: python -m autograder.grading.certs DIR makes them)")
    return Security(tls_ca_file=ca_file, tls_client_cert=cert, tls_client_key=key, require_encryption=True)


def make_scheduler(spec: str, workers: int, security=None):
    """``local`` (embedded Dask), ``pool`` (thread pool) or a ``tls://`` Dask scheduler address."""
    if spec == "pool":
        return PoolScheduler(workers)
    if spec == "local":
        return DaskScheduler(workers)
    if not spec.startswith("tls://"):
        raise InsecureCluster(f"refusing {spec}: only tls:// reaches a grading cluster (anyone who can reach a "
                              "scheduler without TLS can run code on its workers and forge grades)")
    if security is None:
        raise InsecureCluster("a tls:// scheduler needs the course's certificates (--tls-ca-file, --tls-cert, --tls-key)")
    return DaskScheduler(workers, address=spec, security=security)
