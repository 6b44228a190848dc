"""Run the student's measurement tools and functions, and report what they did, as plain data.

:func:`run_tool` builds a probe model from its plain description (:func:`autograder.exercises.ex01_covariate_shift.probes.model_spec`),
runs a tool such as ``activation_stats`` or ``layer_input`` on it, and measures what a tool must
not do: leave hooks, change train/eval modes, run the forward with autograd on, leave gradients,
modify its input.  :func:`call` runs a plain function such as ``distribution_shift``.

Nothing here decides a verdict: :func:`autograder.exercises.ex01_covariate_shift.probes.judge_tool_report` and
:mod:`autograder.exercises.ex01_covariate_shift.checks` judge these reports on the trusted side.
"""
from __future__ import annotations

import torch

from autograder.exercises.ex01_covariate_shift.probes import build_model, hook_count, modes
from autograder.core.wire import RemoteError

SHOWN_CHARACTERS = 200  # of a result's repr, for the grader's messages


def run_tool(tool, spec: dict, x: torch.Tensor, args: tuple = (), x_at: int = 1) -> dict:
    """Build the model ``spec`` describes and call ``tool`` with it first, ``x`` at position
    ``x_at`` among the arguments and ``args`` filling the rest (``tool(model, x, *args)`` by default).

    Returns the tool's result (:func:`_described`; a :class:`RemoteError` when it raised) and the
    model's state around the call: ``hooks_before``/``hooks_after`` (forward hooks and pre-hooks
    on every submodule), ``modes_before``/``modes_after`` (each submodule's ``training`` flag),
    ``autograd_on`` (whether the model's forward ran with autograd on), ``gradients_left``
    (whether a parameter got a ``.grad``) and ``input_changed`` (whether ``x`` was modified).
    """
    model = build_model(spec)
    arguments = [model, *args]
    arguments.insert(x_at, x)
    hooks_before, modes_before, x_before = hook_count(model), modes(model), x.clone()
    model.spy.grad_enabled.clear()
    try:
        result = tool(*arguments)
    except Exception as error:  # noqa: BLE001 - the student's exception is the observation
        result = RemoteError.of(error)
    return {
        **_described(result),
        "hooks_before": hooks_before,
        "hooks_after": hook_count(model),
        "modes_before": modes_before,
        "modes_after": modes(model),
        "autograd_on": any(model.spy.grad_enabled),
        "gradients_left": any(p.grad is not None for p in model.parameters()),
        "input_changed": not torch.equal(x, x_before),
    }


def call(fn, args: tuple) -> dict:
    """``fn(*args)``: its result (:func:`_described`), or the :class:`RemoteError` it raised."""
    try:
        result = fn(*args)
    except Exception as error:  # noqa: BLE001
        result = RemoteError.of(error)
    return _described(result)


def _described(result) -> dict:
    """``result`` as plain data where it can be (:func:`_plain`), the type names inside it
    (``types``: the same dicts and lists, with type names as leaves), its type name and its repr."""
    value = _plain(result)
    return {"result": value, "type": type(result).__name__, "types": _type_names(value), "shown": _shown(result)}


def _plain(value, depth: int = 0):
    """``value`` with dict subclasses as dicts and float subclasses (numpy's float64) as floats,
    which the checks accept as such; anything else unchanged (the wire sends what is not plain
    data as a handle)."""
    if depth > 10:
        return value
    if isinstance(value, float) and type(value) is not float:
        return float.__float__(value)
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {str.__str__(k): _plain(v, depth + 1) for k, v in dict.items(value)}
    if type(value) in (list, tuple):
        return type(value)(_plain(v, depth + 1) for v in value)
    return value


def _type_names(value, depth: int = 0):
    if depth <= 10 and type(value) is dict:
        return {k: _type_names(v, depth + 1) for k, v in value.items()}
    if depth <= 10 and type(value) in (list, tuple):
        return [_type_names(v, depth + 1) for v in value]
    return type(value).__name__


def _shown(value) -> str:
    try:
        return repr(value)[:SHOWN_CHARACTERS]
    except Exception:  # noqa: BLE001 - a student's __repr__ may raise
        return f"<{type(value).__name__}>"
