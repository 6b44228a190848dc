"""The probe models that measurement tools run on, and the rules every such tool must follow.

A tool that records what happens inside a model must leave the model as it found it: no hook
left behind (also when the forward raises), the same train/eval mode in every submodule, no
autograd graph and no gradients, an unchanged input.

The model is described as plain data (:func:`model_spec`) and built on both sides: the student's
side runs the tool on its copy and measures what the tool did
(:func:`autograder.exercises.ex01_covariate_shift.observe.run_tool`); the grader judges that report
(:func:`judge_tool_report`) and records the expected values on its own copy.
"""
from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn

from autograder.core.messages import fail
from autograder.core.seeding import mixed
from autograder.core.wire import RemoteError


def hook_count(model: nn.Module) -> int:
    """Forward hooks and pre-hooks on every submodule (torch keeps them in these dicts)."""
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def modes(model: nn.Module) -> dict[str, bool]:
    return {name: m.training for name, m in model.named_modules()}


class GradModeSpy(nn.Module):
    """Passes its input through and remembers whether autograd was on when it ran."""

    def __init__(self) -> None:
        super().__init__()
        self.grad_enabled: list[bool] = []

    def forward(self, x):
        self.grad_enabled.append(torch.is_grad_enabled())
        return x


class FailingLayer(nn.Module):
    """A layer whose forward raises: tools must still remove their hooks."""

    def forward(self, x):
        raise RuntimeError("this layer fails on purpose")


def sigmoid_mlp(widths: list[int], seed: int, device, dtype, failing: bool = False,
                inplace_relu_after: str | None = None) -> nn.Sequential:
    """A named Linear/Sigmoid stack with a grad-mode spy in front: names "spy", "fc1", "act1", ...

    ``inplace_relu_after``: the name of a Linear layer ("fc1", ...) to follow with
    ``nn.ReLU(inplace=True)``, named "relu". That ReLU overwrites the tensor it receives (the
    Linear's output): a tool that keeps that tensor (a pre-hook on "relu") without copying it
    sees it change afterwards.
    """
    g = torch.Generator().manual_seed(seed)  # drawn by model_spec, where the checks run
    layers: list[tuple[str, nn.Module]] = [("spy", GradModeSpy())]
    for i, (w_in, w_out) in enumerate(zip(widths[:-1], widths[1:]), start=1):
        linear = nn.Linear(w_in, w_out)
        with torch.no_grad():
            linear.weight.copy_(torch.randn(w_out, w_in, generator=g) * (2.5 / w_in ** 0.5))
            linear.bias.copy_(torch.randn(w_out, generator=g))
        layers.append((f"fc{i}", linear))
        if inplace_relu_after == f"fc{i}":
            layers.append(("relu", nn.ReLU(inplace=True)))
        if i < len(widths) - 1:
            layers.append((f"act{i}", nn.Sigmoid()))
    if inplace_relu_after is not None and "relu" not in dict(layers):
        raise ValueError(f"no Linear layer named {inplace_relu_after!r} to put the in-place ReLU after")
    if failing:
        layers.append(("broken", FailingLayer()))
    return nn.Sequential(OrderedDict(layers)).to(device=device, dtype=dtype)


def model_spec(widths: list[int], seed: int, device, dtype, train: bool = True, failing: bool = False,
               inplace_relu_after: str | None = None) -> dict:
    """A probe model as plain data: both sides build the same model from it (:func:`build_model`).
    Its seed is drawn here, where the checks run (from the course's secret when grading), so that
    the student's kernel, which knows no secret, builds the same weights."""
    return {"widths": list(widths), "seed": mixed(seed), "device": device, "dtype": dtype, "train": train,
            "failing": failing, "inplace_relu_after": inplace_relu_after}


def build_model(spec: dict) -> nn.Sequential:
    """The :func:`sigmoid_mlp` that ``spec`` describes, in its train/eval mode."""
    model = sigmoid_mlp(spec["widths"], spec["seed"], spec["device"], spec["dtype"], spec["failing"],
                        spec.get("inplace_relu_after"))
    return model.train(spec["train"])


def judge_tool_report(report: dict, what: str, may_raise: bool = False):
    """Fail unless the tool (run by :func:`autograder.exercises.ex01_covariate_shift.observe.run_tool`) left the
    model and its input as it found them; return what the tool returned.

    ``may_raise``: the model's forward fails on purpose; the tool may let the error through (or
    stop the forward before it, having what it needs), but must clean up either way.
    """
    __tracebackhide__ = True
    result = report["result"]
    if isinstance(result, RemoteError) and not may_raise:
        fail(f"{what} raised {result.name}: {result}")
    if report["hooks_after"] != report["hooks_before"]:
        left = report["hooks_after"] - report["hooks_before"]
        fail(
            f"{what} left {left} hook(s) registered on the model"
            + (" when the model's forward raised" if may_raise else "")
            + ". Keep the handles that register_forward_hook returns and call handle.remove() "
            "in a `finally:` block."
        )
    if report["modes_after"] != report["modes_before"]:
        mode = "training" if report["modes_before"][""] else "eval"
        fail(f"{what} changed the train/eval mode of the model (it was in {mode} mode): measure in the mode you were given.")
    if report["autograd_on"]:
        fail(f"{what} ran the forward with autograd on: wrap it in `with torch.no_grad():` so no graph is built.")
    if report["gradients_left"]:
        fail(f"{what} left gradients in the model's parameters: measuring must not call backward().")
    if report["input_changed"]:
        fail(f"{what} modified its input tensor in place.")
    return result
