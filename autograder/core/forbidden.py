"""Catch a student layer that reaches torch's own normalization instead of computing it.

Whatever the route (subclassing ``nn.BatchNorm2d``, ``F.batch_norm``, ``torch.batch_norm``,
``torch.ops.aten.native_batch_norm``, a reference captured under another name, a torch norm
module held inside), the computation ends in an aten normalization kernel.  Where the student's
code runs, :class:`autograder.sandbox.observe.OpRecorder` (a dispatch mode) records the aten ops
of every forward and backward; CUDA's names (``cudnn_batch_norm``, ``miopen_batch_norm``,
``batch_norm_stats``...) belong to the same family.  The class hierarchy and submodules are
reported from there too.  This module judges those reports.

What runs in the student's process can be evaded by a determined student (a decomposition from
``torch._decomp``, the recorder switched off, another thread); :mod:`autograder.grading.scan`
flags such routes in the submitted source for the instructor.
"""
from __future__ import annotations

from autograder.core import integrity
from autograder.core.messages import fail
from autograder.sandbox.observe import NORMALIZATION_OP, OpRecorder  # noqa: F401 - OpRecorder re-exported
from autograder.core.side import Student, students

# torch's normalization classes, by module and qualified name (as the student's side reports them).
TORCH_NORM_CLASSES = {
    ("torch.nn.modules.batchnorm", "_NormBase"),
    ("torch.nn.modules.batchnorm", "_BatchNorm"),
    ("torch.nn.modules.batchnorm", "BatchNorm1d"),
    ("torch.nn.modules.batchnorm", "BatchNorm2d"),
    ("torch.nn.modules.batchnorm", "BatchNorm3d"),
    ("torch.nn.modules.batchnorm", "SyncBatchNorm"),
    ("torch.nn.modules.batchnorm", "_LazyNormBase"),
    ("torch.nn.modules.instancenorm", "_InstanceNorm"),
    ("torch.nn.modules.normalization", "LayerNorm"),
    ("torch.nn.modules.normalization", "GroupNorm"),
    ("torch.nn.modules.normalization", "RMSNorm"),
    ("torch.nn.modules.normalization", "LocalResponseNorm"),
}


def _is_graders(module: str) -> bool:
    """A class of the grader's own package (an exercise's reference, the sandbox's helpers)."""
    return module == "autograder" or module.startswith("autograder.")


def _is_torch_norm(module: str, qualname: str) -> bool:
    return (module, qualname) in TORCH_NORM_CLASSES or (
        module.startswith("torch.nn.modules.") and NORMALIZATION_OP.search(qualname.lower().replace("norm", "_norm"))
        is not None
    )


def check_class(student, what: str) -> None:
    """Fail unless the student's ``what`` is an ``nn.Module`` class that does not inherit from
    one of torch's normalization modules."""
    __tracebackhide__ = True
    info = student.call("observe.class_info")
    if not info["is_class"]:
        fail(f"`{what}` should be a class (an nn.Module subclass), got {info['type']}.")
    for module, qualname in info["mro"]:
        if _is_graders(module):
            fail(
                f"`{what}` inherits from the grader's own `{module}.{qualname}`, the reference your work is "
                "compared with. Subclass nn.Module and write it yourself. This part earns no points."
            )
        if _is_torch_norm(module, qualname):
            fail(
                f"`{what}` inherits from torch's `{module}.{qualname}`. "
                "The exercise is to write the normalization yourself: subclass nn.Module, "
                "not a torch normalization layer. This part earns no points."
            )
    if not info["is_module"]:
        fail(f"`{what}` must subclass torch.nn.Module so it has parameters, buffers and state_dict.")


def own_classes(*named) -> list[Student]:
    """The student's classes, from ``(class, name)`` pairs, as the checks hold them (on one side),
    once each is known to be an ``nn.Module`` of their own; first, whether the notebook changed
    what the checks rely on (:func:`autograder.core.integrity.check_untampered`)."""
    __tracebackhide__ = True
    integrity.check_untampered()
    found = students(*named)
    for cls in found:
        check_class(cls, cls.what)
    return found


def check_no_torch_norm_submodule(layer, what: str) -> None:
    """Fail if an instance holds a torch normalization module anywhere inside it."""
    __tracebackhide__ = True
    check_submodules(layer.call("observe.submodules"), what)


def check_submodules(listing: list, what: str) -> None:
    """:func:`check_no_torch_norm_submodule` on a listing from ``observe.submodules``."""
    __tracebackhide__ = True
    for name, module, qualname in listing:
        if _is_graders(module):
            fail(
                f"`{what}` contains the grader's own `{qualname}` (as `{name or 'self'}`), the reference your "
                "work is compared with. Write it yourself. This part earns no points."
            )
        if _is_torch_norm(module, qualname):
            fail(
                f"`{what}` contains torch's own `{qualname}` (as `{name or 'self'}`). "
                "Compute the normalization with tensor operations instead. "
                "This part earns no points."
            )


def report_normalization_ops(ops: list[str], what: str) -> None:
    """Fail when a recorded run used aten normalization kernels."""
    __tracebackhide__ = True
    if ops:
        fail(
            f"`{what}` ran torch's own normalization kernel ({', '.join('aten::' + o.split('::')[-1] for o in ops)}), "
            "through F.batch_norm, F.layer_norm, F.rms_norm, torch.ops.aten or a torch norm layer. "
            "Write the statistics and the normalization with tensor operations "
            "(mean, var, sqrt, ...). This part earns no points."
        )
