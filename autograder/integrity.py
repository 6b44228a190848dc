"""Notice when notebook code has rewritten the functions the checks rely on.

At import (the notebook's locked set-up cell, before any student code) we remember what every
public name of torch's testing and comparison functions, torch's normalization modules, numpy's
checks, the builtins and this package points to.  Before each check we compare: a name that now
points elsewhere means a solution cell reassigned it (``torch.allclose = lambda *a: True``), and
the check refuses to pass.  Code in the same process could also undo this guard; the clean
process of :mod:`autograder.isolation` is what makes grading safe, this module makes the
in-kernel feedback honest.
"""
from __future__ import annotations

import builtins
import sys
import types

import numpy
import numpy.testing
import torch
import torch.nn.functional
import torch.testing

from autograder.messages import fail

_WATCHED_MODULES = [
    torch,
    torch.nn,
    torch.nn.functional,
    torch.testing,
    torch.nn.modules.batchnorm,
    torch.nn.modules.normalization,
    torch.nn.modules.instancenorm,
    numpy,
    numpy.testing,
    builtins,
]
_WATCHED_CLASSES = [
    torch.Tensor,
    torch.nn.Module,
    torch.nn.modules.batchnorm._NormBase,
    torch.nn.modules.batchnorm._BatchNorm,
    torch.nn.BatchNorm1d,
    torch.nn.BatchNorm2d,
    torch.nn.BatchNorm3d,
    torch.nn.LayerNorm,
    torch.nn.GroupNorm,
    torch.nn.RMSNorm,
    torch.nn.modules.instancenorm._InstanceNorm,
    torch.nn.InstanceNorm1d,
    torch.nn.InstanceNorm2d,
]


def _owners() -> list[tuple[str, object]]:
    owners = [(m.__name__, m) for m in _WATCHED_MODULES]
    owners += [(f"{c.__module__}.{c.__qualname__}", c) for c in _WATCHED_CLASSES]
    for name, module in list(sys.modules.items()):
        if (name == "autograder" or name.startswith("autograder.")) and isinstance(module, types.ModuleType):
            owners.append((name, module))
    return owners


# Builtins that IPython and ipykernel rebind around every cell they execute.
_SHELL_BUILTINS = {"input", "exit", "quit", "help", "copyright", "credits", "license", "breakpoint", "display", "get_ipython"}


def _watched_name(label: str, name: str) -> bool:
    """Public names and dunders; private names change legitimately (caches, IPython's ``_``)."""
    if label == "builtins" and name in _SHELL_BUILTINS:
        return False
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))


# label -> (module or class, {name: trusted object})
_baseline: dict[str, tuple[object, dict[str, object]]] = {}


def remember() -> None:
    """Trust what is loaded now; namespaces already remembered keep their first snapshot.

    Called by every module of this package when it loads, so the first call (the notebook's
    set-up cell, before any student code) fixes the baseline of torch, numpy and the builtins.
    """
    for label, owner in _owners():
        if label not in _baseline:
            names = {k: v for k, v in list(vars(owner).items()) if _watched_name(label, k)}
            _baseline[label] = (owner, names)


def changed_names() -> list[str]:
    """Watched names whose value is no longer the trusted object (reassigned or deleted)."""
    changed = []
    for label, (owner, names) in _baseline.items():
        now = vars(owner)
        for key, trusted in names.items():
            if now.get(key, _MISSING) is not trusted:
                changed.append(f"{label}.{key}")
    return changed


def restore() -> None:
    """Put every trusted object back where notebook code replaced or deleted it."""
    for label, (owner, names) in _baseline.items():
        now = vars(owner)
        for key, trusted in names.items():
            if now.get(key, _MISSING) is not trusted:
                setattr(owner, key, trusted)


_MISSING = object()


def check_untampered() -> None:
    """Fail when notebook code reassigned a function the checks or torch's layers rely on."""
    __tracebackhide__ = True
    changed = changed_names()
    if changed:
        shown = ", ".join(changed[:5]) + (" ..." if len(changed) > 5 else "")
        fail(
            f"The notebook has replaced {shown}. The checks do not run on a modified torch, "
            "numpy or autograder, and this part earns no points while it stays modified. "
            "Remove the code that reassigns them and restart the kernel."
        )
