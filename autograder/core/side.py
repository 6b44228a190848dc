"""The student's side, as the checks see it.

A check never touches a student's object directly.  It holds a :class:`Student` (where the object
lives and its handle) and asks for observations by name::

    layer = BatchNorm2d.construct(args, kwargs)         # a Student, or a RemoteError
    report = layer.call("observe.run_steps", steps, ...)  # plain data

Two sides exist, and the checks cannot tell them apart:

* :class:`LocalSide`: the student's kernel, while they work.  The object is in this process;
  requests and replies still go through :mod:`autograder.core.wire`, so the checks see exactly what
  they see at grading time.
* :class:`RemoteSide`: grading.  The object is in the sandboxed kernel; requests go over a Unix
  socket to :mod:`autograder.sandbox.agent`.  This process never runs student code: it decodes
  plain data and compares it with torch's answers.
"""
from __future__ import annotations

import socket
from dataclasses import dataclass

from autograder.core import wire
from autograder.core.messages import fail
from autograder.sandbox.agent import Agent, receive_frame, send_frame
from autograder.core.wire import Handle, RemoteError


class StudentCodeFailed(Exception):
    """The student's side could not answer (it died, hung, or sent something that is not data)."""


class Side:
    """Where a student's objects live."""

    def request(self, message: dict):
        """Send one request; return the reply's value, or raise :class:`StudentCodeFailed`."""
        reply = self._exchange(wire.encode(message))
        try:
            value = wire.decode(reply, wire.same_device_types, text=wire.one_line)
        except wire.WireError as error:
            raise StudentCodeFailed(f"the notebook's process answered with something that is not data ({error})") from None
        if type(value) is not dict or len(value) != 1 or not ({"ok", "raised"} & set(value)):
            raise StudentCodeFailed("the notebook's process answered out of turn")
        if "raised" in value:
            error = value["raised"]
            raise StudentCodeFailed(f"{error.name if isinstance(error, RemoteError) else 'error'}: {error}")
        return value["ok"]

    def _exchange(self, request: bytes) -> bytes:
        raise NotImplementedError

    def tampered(self) -> list[str]:
        """What the notebook's code replaced in torch, numpy or autograder, as the student's side
        reports it (a policy check: the verdicts do not depend on that process anyway)."""
        found = self.request({"op": "tampered"})
        return [str(n) for n in found] if type(found) is list else ["autograder.core.integrity"]

    def lookup(self, name: str) -> "Student | None":
        found = self.request({"op": "lookup", "name": name})
        if type(found) is not dict or not found.get("defined") or not isinstance(found.get("object"), Handle):
            return None
        return Student(self, found["object"], name)


class LocalSide(Side):
    """The student's objects are in this process (the student's own kernel)."""

    def __init__(self) -> None:
        self.agent = Agent()

    def _exchange(self, request: bytes) -> bytes:
        return self.agent.respond(request)

    def wrap(self, obj, what: str) -> "Student":
        return Student(self, self.agent.handle_of(obj), what)


class RemoteSide(Side):
    """The student's objects are in the sandboxed kernel, behind a connected Unix socket."""

    def __init__(self, sock: socket.socket, timeout: float) -> None:
        self.sock = sock
        self.sock.settimeout(timeout)

    def _exchange(self, request: bytes) -> bytes:
        try:
            send_frame(self.sock, request)
            reply = receive_frame(self.sock)
        except socket.timeout:
            raise StudentCodeFailed("the notebook's code did not answer in time (an endless loop?)") from None
        except (OSError, wire.WireError) as error:
            raise StudentCodeFailed(f"the notebook's process stopped answering ({error})") from None
        if reply is None:
            raise StudentCodeFailed("the notebook's process stopped answering (did it exit or crash?)")
        return reply


@dataclass(frozen=True)
class Student:
    """A student's object: the side it lives on and its handle there."""

    side: Side
    handle: Handle
    what: str  # how messages name it, e.g. "BatchNorm2d"

    def call(self, function: str, *args, **kwargs):
        """Run the observation ``function`` (``"observe.run_steps"``) with this object first."""
        return self.side.request({"op": "call", "function": function, "args": [self.handle, *args], "kwargs": kwargs})

    def report(self, function: str, *args, **kwargs) -> dict:
        """:meth:`call` for an observation that answers with a dict; anything else means the
        notebook changed the student's side of the conversation."""
        value = self.call(function, *args, **kwargs)
        if type(value) is not dict:
            raise StudentCodeFailed(f"{function} answered with {type(value).__name__}, not a report "
                                    "(did the notebook change the autograder package?)")
        return value

    def construct(self, args: tuple = (), kwargs: dict | None = None) -> "Student | RemoteError":
        """An instance of this class built with ``args`` and ``kwargs`` (or the error it raised)."""
        made = self.call("observe.construct", tuple(args), dict(kwargs or {}))
        return self.adopt(made, self.what)

    def adopt(self, value, what: str):
        """A handle in a reply, as a :class:`Student`; anything else unchanged."""
        return Student(self.side, value, what) if isinstance(value, Handle) else value


@dataclass(frozen=True)
class StudentName:
    """A name a test cell uses that the notebook defines (``BatchNorm2d``), looked up when a check
    first needs it.  Test cells run in the grader; their free names become these."""

    side: Side
    name: str


def students(*named) -> list[Student]:
    """What a check was handed, as :class:`Student` objects, from ``(object, what)`` pairs: a
    remote name is looked up on its side; local objects share one new :class:`LocalSide`, which
    lives as long as the check holds it."""
    __tracebackhide__ = True
    local = None
    found = []
    for obj, what in named:
        if isinstance(obj, Student):
            found.append(obj)
        elif isinstance(obj, StudentName):
            there = obj.side.lookup(obj.name)
            if there is None:
                fail(f"Your notebook does not define `{obj.name}`: run the cell that defines it, "
                     "without changing its name.")
            found.append(Student(there.side, there.handle, what))
        else:
            local = local or LocalSide()
            found.append(local.wrap(obj, what))
    return found


def student(obj, what: str) -> Student:
    """:func:`students` for one object."""
    __tracebackhide__ = True
    return students((obj, what))[0]
