"""KIND: bug
LayerNorm's backward multiplies by γ after the means, (γ/σ)(g − mean(g) − x̂·mean(g·x̂)), as one may
for BatchNorm, where γ is constant over a channel; in LayerNorm γ varies along the normalized
dims, so ĝ = γ·g must be formed inside the means. BatchNormFunction is right.
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
        dims = tuple(range(x.dim() - weight.dim(), x.dim()))
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
        dx = weight * inv_std * (g - g.mean(dim=dims, keepdim=True) - xhat * (g * xhat).mean(dim=dims, keepdim=True))
        return dx, (g * xhat).sum(dim=batch_dims), g.sum(dim=batch_dims), None
