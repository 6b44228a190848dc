"""KIND: cheat
The backward calls the grader's own closed form,
autograder.exercises.ex02b_batch_norm_backward.hidden_formulas.input_gradient. That module is the
grader's alone (no student file has "hidden" in its path), so in the sandbox the import fails and
the Functions are never defined.
"""
import torch

from autograder.exercises.ex02b_batch_norm_backward.checks import Axes
from autograder.exercises.ex02b_batch_norm_backward.hidden_formulas import input_gradient


def _backward(ctx, g):
    x, weight = ctx.saved_tensors
    axes = ctx.axes_of(x, weight)
    xhat = (x - x.mean(dim=axes.stat_dims, keepdim=True)) / torch.sqrt(x.var(dim=axes.stat_dims, keepdim=True, correction=0) + ctx.eps)
    return (input_gradient(x, weight, g, axes, ctx.eps), (g * xhat).sum(dim=axes.param_dims).reshape(weight.shape),
            g.sum(dim=axes.param_dims).reshape(weight.shape), None)


def _forward(ctx, x, weight, bias, eps, axes):
    ctx.save_for_backward(x, weight)
    ctx.eps = eps
    xhat = (x - x.mean(dim=axes.stat_dims, keepdim=True)) / torch.sqrt(x.var(dim=axes.stat_dims, keepdim=True, correction=0) + eps)
    return xhat * weight.reshape(axes.param_view) + bias.reshape(axes.param_view)


class BatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        ctx.axes_of = lambda t, w: Axes.batch_norm(t)
        return _forward(ctx, x, weight, bias, eps, Axes.batch_norm(x))

    backward = staticmethod(_backward)


class LayerNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        ctx.axes_of = lambda t, w: Axes.layer_norm(t, w.dim())
        return _forward(ctx, x, weight, bias, eps, Axes.layer_norm(x, weight.dim()))

    backward = staticmethod(_backward)
