"""Run a student's synchronized BatchNorm in several processes of one ``torch.distributed`` group.

:func:`run_replicas` forks one process per replica from the student's own process (so the
student's class, defined in a notebook cell, exists there too), joins them into a gloo process
group over the loopback interface (rendezvous through a ``FileStore`` in a fresh temporary folder),
and runs in each replica the student's layer on its shard of every step, as the engine runs a
layer (:func:`autograder.sandbox.observe.run_steps`).

Why a ``FileStore`` and not a ``TCPStore``: torch's TCP store looks up the name of 127.0.0.1 in
DNS while it connects. Where the resolver is slow (a course hub's, this machine's), a replica then
waited 5 s, and now and then longer than the whole run's time limit.

Each replica sends back, as plain data, its outputs, gradients, buffers and the normalization
kernels it ran; the replicas are killed when they outlive ``seconds``, and none is left behind.

Nothing here decides a verdict: :mod:`autograder.exercises.ex07_practice_lab.checks` compares the reports with one
``torch.nn.BatchNorm2d`` run on the concatenated batch, on the trusted side.

The replicas need Linux (fork, ``prctl``, the loopback interface ``lo``): elsewhere
:func:`run_replicas` reports the platform and starts nothing.

The replicas are forked, so they run on the CPU: CUDA cannot be used in a process forked from one
that has initialized it, and a notebook's classes cannot be sent to a freshly spawned process.
"""
from __future__ import annotations

import ctypes
import datetime
import multiprocessing
import os
import pickle
import shutil
import signal
import sys
import tempfile
import time

import torch

from autograder.sandbox.observe import run_steps
from autograder.core.wire import RemoteError

PARAMETERS = ("weight", "bias")
BUFFERS = ("running_mean", "running_var", "num_batches_tracked")


def run_replicas(cls, args: tuple, kwargs: dict, state: dict, steps: list, dtype, seconds: float = 60.0,
                 groups: list | None = None) -> dict:
    """``steps``: dicts with ``mode`` ('train'/'eval'), ``shards`` (one input per replica) and
    ``no_grad``; each replica runs its shards as :func:`autograder.sandbox.observe.run_steps` runs
    a layer (a backward of ``sum(output · upstream_gradient)`` unless ``no_grad``).
    ``groups``: lists of ranks; each replica then builds its layer with ``process_group`` the
    group (``dist.new_group``) that holds its rank.

    Returns ``{"replicas": [report of rank 0, rank 1, ...]}`` where a report is
    ``{"steps": [...], "normalization_ops": [...]}`` or ``{"error": ...}``, or ``{"error": ...}``
    for the whole run when the replicas could not be started or did not finish in time, or
    ``{"unsupported_platform": sys.platform}`` outside Linux.
    """
    if not sys.platform.startswith("linux"):
        return {"unsupported_platform": sys.platform}
    from torch import distributed

    world = len(steps[0]["shards"])
    if distributed.is_available() and distributed.is_initialized():
        return {"error": RemoteError(("AlreadyInitialized",), (
            "this notebook has initialized torch.distributed itself (dist.init_process_group), and the check "
            "starts processes of its own: call dist.destroy_process_group() and run the test again"))}
    context = multiprocessing.get_context("fork")
    folder = tempfile.mkdtemp(prefix="normlayers-replicas-")
    store_file = os.path.join(folder, "store")  # a fresh file: a FileStore must not find an old one
    pipes = [context.Pipe(duplex=False) for _ in range(world)]
    replicas = [context.Process(target=_replica, daemon=True,
                                args=(rank, world, store_file, cls, args, kwargs, state, steps, dtype, seconds, groups, pipes[rank][1]))
                for rank in range(world)]
    reports: list = [None] * world
    deadline = time.monotonic() + seconds
    try:
        for replica in replicas:
            replica.start()
        for rank, (receiving, sending) in enumerate(pipes):
            sending.close()
            if receiving.poll(max(0.0, deadline - time.monotonic())):
                try:
                    reports[rank] = pickle.loads(receiving.recv_bytes())
                except Exception:  # noqa: BLE001 - EOF, or not a pickle
                    reports[rank] = {"error": RemoteError(("ProcessExited",), "the replica exited without a report (sys.exit or a crash?)")}
            else:
                reports[rank] = {"error": RemoteError(("Timeout",), f"the replica did not finish within {seconds:g} s "
                                                                 "(waiting for a collective that another replica never called?)")}
    finally:
        for replica in replicas:
            if replica.is_alive():
                os.kill(replica.pid, signal.SIGKILL)
            replica.join(5)
        for receiving, _ in pipes:
            receiving.close()
        shutil.rmtree(folder, ignore_errors=True)
    return {"replicas": [r if type(r) is dict else {"error": RemoteError(("BadReport",), "the replica sent no report")}
                         for r in reports]}


def _replica(rank, world, store_file, cls, args, kwargs, state, steps, dtype, seconds, groups, pipe) -> None:
    """One replica: join the group, run the steps on this rank's shards, send the report, exit."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the student's process
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        torch.set_num_threads(1)
        os.environ["GLOO_SOCKET_IFNAME"] = "lo"  # the loopback only (in the sandbox, the only interface)
        from torch import distributed

        store = distributed.FileStore(store_file, world)
        store.set_timeout(datetime.timedelta(seconds=seconds))
        distributed.init_process_group("gloo", store=store, rank=rank, world_size=world,
                                       timeout=datetime.timedelta(seconds=seconds))
        try:
            if groups:  # every rank creates every group, in the same order
                made = [distributed.new_group(ranks) for ranks in groups]
                kwargs = {**kwargs, "process_group": next(g for g, ranks in zip(made, groups) if rank in ranks)}
            report = _run(rank, cls, args, kwargs, state, steps, dtype)
        finally:
            distributed.destroy_process_group()
        pipe.send_bytes(pickle.dumps(report))  # plain pickle: torch's would share memory that dies with this process
    except BaseException as error:  # noqa: BLE001 - whatever happened is the report
        try:
            pipe.send_bytes(pickle.dumps({"error": RemoteError.of(error)}))
        except Exception:  # noqa: BLE001
            pass
    finally:
        os._exit(0)


def _run(rank: int, cls, args, kwargs, state, steps, dtype) -> dict:
    """This rank's shard of every step through :func:`autograder.sandbox.observe.run_steps`, the
    engine's own step runner (its upstream gradient, input-modification check and buffer report)."""
    try:
        layer = cls(*args, **kwargs, device=torch.device("cpu"), dtype=dtype)
    except Exception as error:  # noqa: BLE001
        return {"error": RemoteError.of(error)}
    mine = [{"mode": step["mode"], "x": step["shards"][rank], "no_grad": step["no_grad"]} for step in steps]
    return run_steps(layer, mine, dtype, torch.device("cpu"), dtype, list(PARAMETERS), list(BUFFERS),
                     record=True, state=state)
