"""KIND: bug
The backward recomputes 1/σ from the saved input and forgets ε there: 1/sqrt(σ²) instead of
1/sqrt(σ² + ε). The forward (with ε) is right.
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
        ctx.save_for_backward(x, xhat, weight)
        ctx.dims, ctx.view = dims, view
        return xhat * weight.reshape(view) + bias.reshape(view)

    @staticmethod
    def backward(ctx, g):
        x, xhat, weight = ctx.saved_tensors
        dims, view = ctx.dims, ctx.view
        inv_std = 1.0 / x.var(dim=dims, correction=0, keepdim=True).sqrt()  # no ε
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
        ctx.save_for_backward(x, xhat, weight)
        ctx.dims = dims
        return xhat * weight + bias

    @staticmethod
    def backward(ctx, g):
        x, xhat, weight = ctx.saved_tensors
        dims = ctx.dims
        inv_std = 1.0 / x.var(dim=dims, correction=0, keepdim=True).sqrt()  # no ε
        batch_dims = tuple(range(g.dim() - weight.dim()))
        ghat = g * weight
        dx = inv_std * (ghat - ghat.mean(dim=dims, keepdim=True) - xhat * (ghat * xhat).mean(dim=dims, keepdim=True))
        return dx, (g * xhat).sum(dim=batch_dims), g.sum(dim=batch_dims), None
