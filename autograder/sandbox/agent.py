"""Serve the grader's requests from inside the student's process.

A request names an object of the notebook (``lookup``) or asks for one function of the
observation modules (``autograder.sandbox`` and each exercise's ``observe*.py``) to run on the student's objects (``call``); the reply
is plain data (:mod:`autograder.core.wire`).  Objects that are not plain data stay here, in a table,
and cross as numbered handles.

At grading time the grader starts :func:`serve` in the sandboxed kernel and talks to it over a
Unix socket in the sandbox's scratch folder; while a student works, the checks call
:meth:`Agent.respond` in the same process (:class:`autograder.core.side.LocalSide`).  Either way the
reply is decoded by the grader as untrusted data.
"""
from __future__ import annotations

import importlib
import socket
import struct

from autograder.core import wire
from autograder.core.wire import Handle, RemoteError

# The modules whose public functions the grader may call here, by the name a request uses.
_EXERCISES = "autograder.exercises"
OBSERVATION_MODULES = {
    "observe": "autograder.sandbox.observe",
    "observe_answers": "autograder.sandbox.observe_answers",
    "observe_tools": f"{_EXERCISES}.ex01_covariate_shift.observe",
    "observe_backward": f"{_EXERCISES}.ex02b_batch_norm_backward.observe",
    "observe_siglip": f"{_EXERCISES}.ex03_layer_norm.observe",
    "observe_data": f"{_EXERCISES}.ex05_data_vs_layer_norm.observe",
    "observe_fold": f"{_EXERCISES}.ex06_training_dynamics.observe_fold",
    "observe_sweep": f"{_EXERCISES}.ex06_training_dynamics.observe_sweep",
    "observe_distributed": f"{_EXERCISES}.ex07_practice_lab.observe_distributed",
    "observe_recalibrate": f"{_EXERCISES}.ex07_practice_lab.observe_recalibrate",
}


class Agent:
    """The student's side of the conversation: a table of objects and a dispatcher."""

    def __init__(self, namespace: dict | None = None) -> None:
        self.namespace = namespace if namespace is not None else {}
        self.objects: dict[int, object] = {}
        self.numbers: dict[int, int] = {}  # id(object) -> handle number, so `fit` returning self is seen

    def handle_of(self, obj) -> Handle:
        number = self.numbers.get(id(obj))
        if number is None or self.objects.get(number) is not obj:
            number = len(self.objects) + 1
            self.objects[number] = obj
            self.numbers[id(obj)] = number
        return Handle(number)

    def _resolve(self, value):
        if isinstance(value, Handle):
            if value.number not in self.objects:
                raise LookupError(f"no object {value.number}")
            return self.objects[value.number]
        if type(value) in (list, tuple):
            return type(value)(self._resolve(v) for v in value)
        if type(value) is dict:
            return {k: self._resolve(v) for k, v in value.items()}
        return value

    def _function(self, name: str):
        module, _, function = name.partition(".")
        if module not in OBSERVATION_MODULES or not function or function.startswith("_"):
            raise LookupError(f"{name} is not an observation")
        return getattr(importlib.import_module(OBSERVATION_MODULES[module]), function)

    def _answer(self, request) -> object:
        op = request.get("op") if type(request) is dict else None
        if op == "lookup":
            name = request["name"]
            if name not in self.namespace:
                return {"defined": False}
            return {"defined": True, "object": self.handle_of(self.namespace[name])}
        if op == "tampered":  # what the notebook changed in torch, numpy or autograder (integrity)
            from autograder.core import integrity

            return integrity.changed_names()
        if op == "call":
            function = self._function(request["function"])
            return function(*self._resolve(request["args"]), **self._resolve(request["kwargs"]))
        raise LookupError(f"unknown request {op!r}")

    def respond(self, request: bytes) -> bytes:
        """One reply: ``{"ok": value}``, or ``{"raised": RemoteError}`` when the call failed."""
        try:
            value = {"ok": self._answer(wire.decode(request, wire.same_device_types))}
            return wire.encode(value, self.handle_of)
        except BaseException as error:  # noqa: BLE001 - SystemExit and KeyboardInterrupt included
            if isinstance(error, KeyboardInterrupt):
                raise
            return wire.encode({"raised": RemoteError.of(error)})


def send_frame(sock: socket.socket, data: bytes) -> None:
    sock.sendall(struct.pack("<Q", len(data)) + data)


def receive_frame(sock: socket.socket, limit: int = wire.MAX_MESSAGE_BYTES) -> bytes | None:
    """One frame, or None when the other side closed the connection."""
    header = _receive_exactly(sock, 8)
    if header is None:
        return None
    size = struct.unpack("<Q", header)[0]
    if size > limit:
        raise wire.WireError("frame too large")
    return _receive_exactly(sock, size) if size else b""


def _receive_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def serve(path: str, namespace: dict) -> None:
    """Answer the grader on the Unix socket ``path`` until it closes the connection."""
    agent = Agent(namespace)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
        while True:
            request = receive_frame(sock)
            if request is None:
                return
            send_frame(sock, agent.respond(request))
