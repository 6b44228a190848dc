"""KIND: correct
The Jacobian form: each statistic's m values get the matrix J = s·(I − 11ᵀ/m − x̂x̂ᵀ/m) (s = 1/σ),
built explicitly and applied to γ·g with einsum; computed in float64 and returned in the input's
dtype.
"""
import torch


def _as_groups(t, dims):
    """Move the statistic's dims last and flatten them: (groups, m)."""
    rest = [d for d in range(t.dim()) if d not in dims]
    return t.permute(*rest, *dims).reshape(-1, int(torch.tensor([t.shape[d] for d in dims]).prod()))


def _from_groups(flat, like, dims):
    rest = [d for d in range(like.dim()) if d not in dims]
    order = rest + list(dims)
    shaped = flat.reshape([like.shape[d] for d in order])
    inverse = [order.index(d) for d in range(like.dim())]
    return shaped.permute(*inverse)


def _input_grad(ghat, xhat, s, dims):
    G, X = _as_groups(ghat.double(), dims), _as_groups(xhat.double(), dims)
    S = _as_groups(s.double().expand_as(xhat), dims)[:, :1]
    m = X.shape[1]
    eye = torch.eye(m, dtype=torch.float64, device=X.device)
    J = S[:, :, None] * (eye - 1.0 / m - torch.einsum("gi,gj->gij", X, X) / m)
    return _from_groups(torch.einsum("gij,gj->gi", J, G), ghat, dims).to(ghat.dtype)


class BatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        dims = [0] + list(range(2, x.dim()))
        view = [1, -1] + [1] * (x.dim() - 2)
        xd = x.double()
        mean = xd.mean(dim=dims, keepdim=True)
        s = torch.rsqrt(((xd - mean) ** 2).mean(dim=dims, keepdim=True) + eps)
        xhat = (xd - mean) * s
        ctx.save_for_backward(xhat, s, weight)
        ctx.dims, ctx.view = dims, view
        return (xhat * weight.double().view(view) + bias.double().view(view)).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        xhat, s, weight = ctx.saved_tensors
        ghat = g.double() * weight.double().view(ctx.view)
        dx = _input_grad(ghat, xhat, s, ctx.dims).to(g.dtype)
        return dx, (g.double() * xhat).sum(dim=ctx.dims).to(g.dtype), g.sum(dim=ctx.dims), None


class LayerNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        dims = list(range(x.dim() - weight.dim(), x.dim()))
        xd = x.double()
        mean = xd.mean(dim=dims, keepdim=True)
        s = torch.rsqrt(((xd - mean) ** 2).mean(dim=dims, keepdim=True) + eps)
        xhat = (xd - mean) * s
        ctx.save_for_backward(xhat, s, weight)
        ctx.dims = dims
        return (xhat * weight.double() + bias.double()).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        xhat, s, weight = ctx.saved_tensors
        leading = list(range(g.dim() - weight.dim()))
        dx = _input_grad(g.double() * weight.double(), xhat, s, ctx.dims).to(g.dtype)
        return dx, (g.double() * xhat).sum(dim=leading).to(g.dtype), g.sum(dim=leading), None
