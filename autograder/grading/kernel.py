"""A Jupyter kernel inside the sandbox.

The kernel talks to nbgrader over jupyter_client's ``ipc`` transport: Unix sockets in the
student's scratch folder, which is bound into the sandbox, so no network namespace is shared.
Its standard output and error go nowhere the grader reads (a student cannot write into the
grader's log).  Interrupts go as ``interrupt_request`` messages: a signal to ``bwrap`` would not
reach a kernel in its own session.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager

from autograder.grading.sandbox import Sandbox


class SandboxedKernelManager(AsyncKernelManager):
    """Starts the kernel with :meth:`Sandbox.command`; set ``sandbox`` and ``scratch`` first."""

    sandbox: Sandbox = Sandbox()
    scratch: Path | None = None
    workdir: Path | None = None
    limit = None

    def prepare(self, sandbox: Sandbox, scratch: Path, workdir: Path) -> None:
        self.sandbox, self.scratch, self.workdir = sandbox, scratch, workdir
        self.transport = "ipc"
        self.ip = str(scratch / "kernel-ipc")
        self.connection_file = str(scratch / "kernel.json")

    @property
    def kernel_spec(self):
        spec = super().kernel_spec
        if spec is not None:
            spec.interrupt_mode = "message"
        return spec

    def format_kernel_cmd(self, extra_arguments=None):
        argv = super().format_kernel_cmd(extra_arguments)
        if self.scratch is None:  # prepare() was not called: grading without the sandbox
            return argv
        return self.sandbox.command(argv, self.scratch, self.workdir)

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        kw.update(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if self.scratch is not None:
            self.limit = self.sandbox.limit()
            kw["preexec_fn"] = self.limit.preexec
        if self.scratch is not None:
            kw.pop("cwd", None)  # the sandbox sets its own working directory
        await super()._async_launch_kernel(kernel_cmd, **kw)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart)
        if self.limit is not None:
            self.limit.close()

    cleanup_resources = _async_cleanup_resources
