"""KIND: correct
forward saves only the inputs; backward recomputes μ, 1/σ and x̂ from them with tensor operations.
(This backward is itself differentiable, so torch.autograd.gradgradcheck passes too.)
"""
import torch


def _backward(g, x, weight, eps, dims, view, param_dims):
    mean = x.mean(dim=dims, keepdim=True)
    centred = x - mean
    inv_std = ((centred * centred).mean(dim=dims, keepdim=True) + eps).rsqrt()
    xhat = centred * inv_std
    ghat = g * weight.reshape(view)
    dx = inv_std * (ghat - ghat.mean(dim=dims, keepdim=True) - xhat * (ghat * xhat).mean(dim=dims, keepdim=True))
    return dx, (g * xhat).sum(dim=param_dims), g.sum(dim=param_dims), None


def _forward(x, weight, bias, eps, dims, view):
    mean = x.mean(dim=dims, keepdim=True)
    centred = x - mean
    xhat = centred * ((centred * centred).mean(dim=dims, keepdim=True) + eps).rsqrt()
    return xhat * weight.reshape(view) + bias.reshape(view)


class BatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        dims = (0, *range(2, x.dim()))
        view = (1, -1) + (1,) * (x.dim() - 2)
        ctx.save_for_backward(x, weight)
        ctx.dims, ctx.view, ctx.eps = dims, view, eps
        return _forward(x, weight, bias, eps, dims, view)

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        return _backward(g, x, weight, ctx.eps, ctx.dims, ctx.view, ctx.dims)


class LayerNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        dims = tuple(range(x.dim() - weight.dim(), x.dim()))
        ctx.save_for_backward(x, weight)
        ctx.dims, ctx.eps = dims, eps
        return _forward(x, weight, bias, eps, dims, tuple(weight.shape))

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        leading = tuple(range(g.dim() - weight.dim()))
        return _backward(g, x, weight, ctx.eps, ctx.dims, tuple(weight.shape), leading)
