"""Notice when notebook code has rewritten what the checks rely on, and undo it.

When this package loads (the notebook's locked set-up cell, before any student code) it
remembers what every watched name points to: the public functions and classes of torch, its
testing and normalization modules, numpy and its testing module, math, the builtins, and every name
of every module and class of this package; for Python functions also their code object (so a
``func.__code__ = ...`` swap is seen too), and which module objects ``sys.modules`` holds for
this package.  Before each check the current state is compared with that baseline: a name that
now points elsewhere means a notebook cell reassigned it (``torch.allclose = lambda *a: True``)
and the check refuses to pass.

Code in the same process can also undo this guard, so no grade depends on it being intact: at
grading time every verdict is computed in the grader from plain data (:mod:`autograder.grading`).
What it still does there is policy: the grader asks the kernel what changed (a notebook that
rebinds ``torch.allclose`` earns nothing, although the rebinding could not fool the checks).
In the student's kernel it keeps the visible tests' feedback honest.
"""
from __future__ import annotations

import builtins
import inspect
import math
import sys
import types
from pathlib import Path
from typing import Callable

import numpy
import numpy.testing
import torch
import torch.nn.functional
import torch.testing

from autograder.core.messages import fail

_WATCHED_MODULES = [
    math,
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
# Builtins that IPython and ipykernel rebind around every cell they execute.
_SHELL_BUILTINS = {"input", "exit", "quit", "help", "copyright", "credits", "license", "breakpoint", "display", "get_ipython"}
_MISSING = object()
# Importing torch._dynamo (torch.compile does) rewraps torch.manual_seed with this wrapper's code,
# and nn.Module.__init__ / __setstate__ with wrappers of torch/_dynamo/mutation_guard.py.
_DYNAMO_WRAPPER_CODE = torch._disable_dynamo(lambda: None).__code__
_DYNAMO_SOURCES = str(Path(torch.__file__).parent / "_dynamo") + "/"
# torch.set_default_dtype rebinds torch.Storage to the legacy storage class of the new dtype.
_STORAGE_CLASSES = {v for k, v in vars(torch).items() if k.endswith("Storage") and isinstance(v, type)}


def _is_dynamo_rewrap(value: object, trusted: object) -> bool:
    """Torch rebinding a name itself: its dynamo wrappers around ``trusted`` (torch.compile), or
    ``torch.Storage`` set to another of torch's storage classes (``torch.set_default_dtype``)."""
    if isinstance(value, types.FunctionType) and any(cell.cell_contents is trusted for cell in value.__closure__ or ()):
        return value.__code__ is _DYNAMO_WRAPPER_CODE or value.__code__.co_filename.startswith(_DYNAMO_SOURCES)
    return trusted in _STORAGE_CLASSES and value in _STORAGE_CLASSES


def _is_grader(name: str) -> bool:
    """Modules of this package a notebook's kernel loads (``autograder.grading`` never runs there)."""
    return (name == "autograder" or name.startswith("autograder.")) and not name.startswith("autograder.grading")


def _owners() -> list[tuple[str, object]]:
    owners = [(m.__name__, m) for m in _WATCHED_MODULES]
    owners += [(f"{c.__module__}.{c.__qualname__}", c) for c in _WATCHED_CLASSES]
    for name, module in list(sys.modules.items()):
        if _is_grader(name) and isinstance(module, types.ModuleType):
            owners.append((name, module))
            owners += [
                (f"{name}.{k}", v) for k, v in vars(module).items()
                if inspect.isclass(v) and v.__module__ == name
            ]
    return owners


def _watched_name(label: str, name: str) -> bool:
    """Every name of this package; public names and dunders elsewhere (private ones are caches)."""
    if _is_grader(label):
        return True
    if label == "builtins" and name in _SHELL_BUILTINS:
        return False
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))


def _code(value: object) -> object:
    return value.__code__ if isinstance(value, types.FunctionType) else None


# label -> (module or class, {name: (trusted object, its code object or None)})
_baseline: dict[str, tuple[object, dict[str, tuple[object, object]]]] = {}


def remember() -> None:
    """Trust what is loaded now; namespaces already remembered keep their first snapshot.

    Called by every module of this package when it loads, so the first call (the notebook's
    set-up cell, before any student code) fixes the baseline of torch, numpy and the builtins.
    """
    for label, owner in _owners():
        if label not in _baseline:
            names = {k: (v, _code(v)) for k, v in list(vars(owner).items()) if _watched_name(label, k)}
            _baseline[label] = (owner, names)


def guard() -> tuple[Callable[[], list[str]], Callable[[], None]]:
    """The baseline frozen into two closures, ``changed()`` and ``restore()``.

    They look nothing up in a module or in the builtins when called, so code that runs after
    this returns cannot disarm them by rebinding names (the clean re-check holds on to them
    before it runs any student code).
    """
    entries = [
        (label, owner, vars(owner), key, trusted, code)
        for label, (owner, names) in _baseline.items()
        for key, (trusted, code) in names.items()
    ]
    modules = [
        (label, owner) for label, (owner, _) in _baseline.items()
        if isinstance(owner, types.ModuleType) and _is_grader(label)
    ]
    loaded, missing, set_attribute, rewrap = sys.modules, _MISSING, setattr, _is_dynamo_rewrap

    def changed() -> list[str]:
        found = [f"sys.modules['{label}']" for label, owner in modules if loaded.get(label) is not owner]
        for label, owner, namespace, key, trusted, code in entries:
            value = namespace.get(key, missing)
            if (value is not trusted and not rewrap(value, trusted)) or (code is not None and trusted.__code__ is not code):
                found.append(f"{label}.{key}")
        return found

    def restore() -> None:
        for label, owner in modules:
            loaded[label] = owner
        for label, owner, namespace, key, trusted, code in entries:
            value = namespace.get(key, missing)
            if value is not trusted and not rewrap(value, trusted):
                set_attribute(owner, key, trusted)
            if code is not None and trusted.__code__ is not code:
                trusted.__code__ = code

    return changed, restore


def changed_names() -> list[str]:
    """What is no longer as trusted: reassigned or deleted names, swapped code, replaced modules."""
    return guard()[0]()


def restore() -> None:
    """Put every trusted object (and code object, and grader module) back where it was changed."""
    guard()[1]()


def check_untampered() -> None:
    """Fail when notebook code changed a function the checks or torch's layers rely on."""
    __tracebackhide__ = True
    changed = changed_names()
    if changed:
        shown = ", ".join(changed[:5]) + (" ..." if len(changed) > 5 else "")
        fail(
            f"The notebook has replaced {shown}. The checks do not run on a modified torch, "
            "numpy or autograder, and this part earns no points while it stays modified. "
            "Remove the code that reassigns them and restart the kernel."
        )
