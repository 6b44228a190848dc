"""KIND: correct
Step by step along the graph μ → d = x − μ → σ² → s = 1/sqrt(σ² + ε) → x̂ = d·s → y, as CS231n's
staged backward: every intermediate's gradient in turn, summed where a node fans out.
"""
import torch


def _staged_backward(g, d, s, weight_view, dims, m):
    dxhat = g * weight_view
    ds = (dxhat * d).sum(dim=dims, keepdim=True)           # x̂ = d·s
    dd = dxhat * s
    dvar = ds * (-0.5) * s ** 3                            # s = (σ² + ε)^(-1/2)
    dd = dd + dvar * 2.0 * d / m                           # σ² = Σ d² / m
    dmu = -dd.sum(dim=dims, keepdim=True)                  # d = x − μ
    return dd + dmu / m                                    # μ = Σ x / m


class BatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        dims = [0] + list(range(2, x.dim()))
        view = [1, -1] + [1] * (x.dim() - 2)
        m = x.numel() // x.shape[1]
        mu = x.sum(dim=dims, keepdim=True) / m
        d = x - mu
        var = (d * d).sum(dim=dims, keepdim=True) / m
        s = (var + eps) ** -0.5
        xhat = d * s
        ctx.save_for_backward(d, s, xhat, weight)
        ctx.dims, ctx.view, ctx.m = dims, view, m
        return weight.view(view) * xhat + bias.view(view)

    @staticmethod
    def backward(ctx, g):
        d, s, xhat, weight = ctx.saved_tensors
        dx = _staged_backward(g, d, s, weight.view(ctx.view), ctx.dims, ctx.m)
        return dx, (g * xhat).sum(dim=ctx.dims), g.sum(dim=ctx.dims), None


class LayerNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        dims = list(range(x.dim() - weight.dim(), x.dim()))
        m = weight.numel()
        mu = x.sum(dim=dims, keepdim=True) / m
        d = x - mu
        var = (d * d).sum(dim=dims, keepdim=True) / m
        s = (var + eps) ** -0.5
        xhat = d * s
        ctx.save_for_backward(d, s, xhat, weight)
        ctx.dims, ctx.m = dims, m
        return weight * xhat + bias

    @staticmethod
    def backward(ctx, g):
        d, s, xhat, weight = ctx.saved_tensors
        dx = _staged_backward(g, d, s, weight, ctx.dims, ctx.m)
        leading = list(range(g.dim() - weight.dim()))
        return dx, (g * xhat).sum(dim=leading), g.sum(dim=leading), None
