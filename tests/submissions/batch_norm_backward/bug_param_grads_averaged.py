"""KIND: bug
Averages the parameter gradients instead of summing them.
"""
import torch


def _backward(g, x, xhat, inv_std, weight, eps, dims, view, param_dims):
    """(∂L/∂x, ∂L/∂γ, ∂L/∂β, None) over the statistic's ``dims``; γ broadcasts as ``view``."""
    ghat = g * weight.reshape(view)
    dx = inv_std * (ghat - ghat.mean(dim=dims, keepdim=True) - xhat * (ghat * xhat).mean(dim=dims, keepdim=True))
    grad_weight, grad_bias = (g * xhat).mean(dim=param_dims), g.mean(dim=param_dims)
    return dx, grad_weight, grad_bias, None


class BatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        dims = (0, *range(2, x.dim()))
        view = (1, -1) + (1,) * (x.dim() - 2)
        mean = x.mean(dim=dims, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
        inv_std = 1.0 / torch.sqrt(var + eps)
        xhat = (x - mean) * inv_std
        ctx.save_for_backward(x, xhat, inv_std, weight)
        ctx.dims, ctx.view, ctx.eps = dims, view, eps
        return xhat * weight.reshape(view) + bias.reshape(view)

    @staticmethod
    def backward(ctx, g):
        x, xhat, inv_std, weight = ctx.saved_tensors
        return _backward(g, x, xhat, inv_std, weight, ctx.eps, ctx.dims, ctx.view, ctx.dims)


class LayerNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        dims = tuple(range(x.dim() - weight.dim(), x.dim()))
        mean = x.mean(dim=dims, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
        inv_std = 1.0 / torch.sqrt(var + eps)
        xhat = (x - mean) * inv_std
        ctx.save_for_backward(x, xhat, inv_std, weight)
        ctx.dims, ctx.eps = dims, eps
        return xhat * weight + bias

    @staticmethod
    def backward(ctx, g):
        x, xhat, inv_std, weight = ctx.saved_tensors
        leading = tuple(range(g.dim() - weight.dim()))
        return _backward(g, x, xhat, inv_std, weight, ctx.eps, ctx.dims, tuple(weight.shape), leading)
