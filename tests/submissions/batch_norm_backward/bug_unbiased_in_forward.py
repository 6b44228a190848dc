"""KIND: bug
The forward normalizes with the unbiased variance (x.var(), ÷ (m − 1)); the backward is the
closed form with the x̂ and 1/σ that forward saved.
"""
import torch


class BatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        dims = (0, *range(2, x.dim()))
        view = (1, -1) + (1,) * (x.dim() - 2)
        mean = x.mean(dim=dims, keepdim=True)
        var = x.var(dim=dims, keepdim=True)  # correction=1 by default
        inv_std = 1.0 / torch.sqrt(var + eps)
        xhat = (x - mean) * inv_std
        ctx.save_for_backward(xhat, inv_std, weight)
        ctx.dims, ctx.view = dims, view
        return xhat * weight.reshape(view) + bias.reshape(view)

    @staticmethod
    def backward(ctx, g):
        xhat, inv_std, weight = ctx.saved_tensors
        dims, view = ctx.dims, ctx.view
        ghat = g * weight.reshape(view)
        dx = inv_std * (ghat - ghat.mean(dim=dims, keepdim=True) - xhat * (ghat * xhat).mean(dim=dims, keepdim=True))
        return dx, (g * xhat).sum(dim=dims), g.sum(dim=dims), None


class LayerNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        dims = tuple(range(x.dim() - weight.dim(), x.dim()))
        mean = x.mean(dim=dims, keepdim=True)
        var = x.var(dim=dims, keepdim=True)  # correction=1 by default
        inv_std = 1.0 / torch.sqrt(var + eps)
        xhat = (x - mean) * inv_std
        ctx.save_for_backward(xhat, inv_std, weight)
        ctx.dims = dims
        return xhat * weight + bias

    @staticmethod
    def backward(ctx, g):
        xhat, inv_std, weight = ctx.saved_tensors
        dims = ctx.dims
        batch_dims = tuple(range(g.dim() - weight.dim()))
        ghat = g * weight
        dx = inv_std * (ghat - ghat.mean(dim=dims, keepdim=True) - xhat * (ghat * xhat).mean(dim=dims, keepdim=True))
        return dx, (g * xhat).sum(dim=batch_dims), g.sum(dim=batch_dims), None
