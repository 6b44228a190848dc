"""Catch a student layer that reaches torch's own normalization instead of computing it.

Whatever the route (subclassing ``nn.BatchNorm2d``, ``F.batch_norm``, ``torch.batch_norm``,
``torch.ops.aten.native_batch_norm``, a reference captured under another name, a torch norm
module held inside), the computation ends in an aten normalization kernel.  A dispatch mode
records every aten op the student's forward and backward run; CUDA's names
(``cudnn_batch_norm``, ``miopen_batch_norm``, ``batch_norm_stats``...) belong to the same family.
"""
from __future__ import annotations

import re

from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from autograder.messages import fail

NORMALIZATION_OP = re.compile(r"(batch|layer|group|instance|rms)_norm")

TORCH_NORM_CLASSES: tuple[type, ...] = (
    nn.modules.batchnorm._NormBase,
    nn.LayerNorm,
    nn.GroupNorm,
    nn.RMSNorm,
    nn.LocalResponseNorm,
)


class OpRecorder(TorchDispatchMode):
    """Records the names of the aten ops run while it is active."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch would otherwise wrap __torch_dispatch__ with a dynamo guard whose first call
        # imports torch._dynamo (~3 s) and rebinds torch.manual_seed.
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(func.name())
        return func(*args, **(kwargs or {}))

    def normalization_ops(self) -> list[str]:
        return sorted(op for op in self.ops if NORMALIZATION_OP.search(op))


def check_not_torch_norm_class(cls: type, what: str) -> None:
    """Fail if ``cls`` inherits from one of torch's normalization modules."""
    __tracebackhide__ = True
    if not isinstance(cls, type):
        fail(f"`{what}` should be a class (an nn.Module subclass), got {type(cls).__name__}.")
    for base in cls.__mro__:
        if base in TORCH_NORM_CLASSES or (
            base.__module__.startswith("torch.nn.modules")
            and issubclass(base, TORCH_NORM_CLASSES)
        ):
            fail(
                f"`{what}` inherits from torch's `{base.__module__}.{base.__qualname__}`. "
                "The exercise is to write the normalization yourself: subclass nn.Module, "
                "not a torch normalization layer. This part earns no points."
            )
    if not issubclass(cls, nn.Module):
        fail(f"`{what}` must subclass torch.nn.Module so it has parameters, buffers and state_dict.")


def check_no_torch_norm_submodule(module: nn.Module, what: str) -> None:
    """Fail if an instance holds a torch normalization module anywhere inside it."""
    __tracebackhide__ = True
    for name, sub in module.named_modules():
        if isinstance(sub, TORCH_NORM_CLASSES):
            fail(
                f"`{what}` contains torch's own `{type(sub).__name__}` (as `{name or 'self'}`). "
                "Compute the normalization with tensor operations instead. "
                "This part earns no points."
            )


def report_normalization_ops(ops: list[str], what: str) -> None:
    """Fail when a recorded run used aten normalization kernels."""
    __tracebackhide__ = True
    if ops:
        fail(
            f"`{what}` ran torch's own normalization kernel ({', '.join('aten::' + o.split('::')[-1] for o in ops)}), "
            "through F.batch_norm, torch.batch_norm, torch.ops.aten or a torch norm layer. "
            "Write the statistics and the normalization with tensor operations "
            "(mean, var, sqrt, ...). This part earns no points."
        )
