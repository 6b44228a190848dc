"""KIND: bug
LayerNormFunction normalizes over the last dim only, whatever weight.dim() is: right for tokens
(B, T, D), wrong for images normalized over (C, H, W). BatchNormFunction is right.
"""
import torch


class BatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        dims = (0, *range(2, x.dim()))
        view = (1, -1) + (1,) * (x.dim() - 2)
        mean = x.mean(dim=dims, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
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
        dims = (x.dim() - 1,)
        mean = x.mean(dim=dims, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
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
