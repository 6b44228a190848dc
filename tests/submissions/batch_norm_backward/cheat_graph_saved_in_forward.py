"""KIND: cheat
The forward builds an autograd graph under torch.enable_grad() and keeps it; the backward only
asks autograd for the gradients of that graph (no op of the backward runs with gradients on).
"""
import torch


def _graph_forward(ctx, x, weight, bias, eps, dims, view):
    with torch.enable_grad():
        leaves = [t.detach().requires_grad_() for t in (x, weight, bias)]
        mean = leaves[0].mean(dim=dims, keepdim=True)
        var = ((leaves[0] - mean) ** 2).mean(dim=dims, keepdim=True)
        y = (leaves[0] - mean) / torch.sqrt(var + eps) * leaves[1].reshape(view) + leaves[2].reshape(view)
    ctx.graph = (y, leaves)
    return y.detach()


def _graph_backward(ctx, g):
    y, leaves = ctx.graph
    return (*torch.autograd.grad(y, leaves, g), None)


class BatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        return _graph_forward(ctx, x, weight, bias, eps, [0] + list(range(2, x.dim())), [1, -1] + [1] * (x.dim() - 2))

    backward = staticmethod(_graph_backward)


class LayerNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        return _graph_forward(ctx, x, weight, bias, eps, list(range(x.dim() - weight.dim(), x.dim())), tuple(weight.shape))

    backward = staticmethod(_graph_backward)
