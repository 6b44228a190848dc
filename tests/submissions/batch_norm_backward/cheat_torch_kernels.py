"""KIND: cheat
Calls torch's own kernels: F.batch_norm / F.layer_norm in forward, their aten backward kernels in
backward.
"""
import torch
import torch.nn.functional as F


class BatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        out, mean, rstd = torch.ops.aten.native_batch_norm(x, weight, bias, None, None, True, 0.0, eps)
        ctx.save_for_backward(x, weight, mean, rstd)
        ctx.eps = eps
        return out

    @staticmethod
    def backward(ctx, g):
        x, weight, mean, rstd = ctx.saved_tensors
        dx, dw, db = torch.ops.aten.native_batch_norm_backward(g, x, weight, None, None, mean, rstd, True, ctx.eps,
                                                               [True, True, True])
        return dx, dw, db, None


class LayerNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        out, mean, rstd = torch.ops.aten.native_layer_norm(x, list(weight.shape), weight, bias, eps)
        ctx.save_for_backward(x, weight, bias, mean, rstd)
        return out

    @staticmethod
    def backward(ctx, g):
        x, weight, bias, mean, rstd = ctx.saved_tensors
        dx, dw, db = torch.ops.aten.native_layer_norm_backward(g, x, list(weight.shape), mean, rstd, weight, bias,
                                                               [True, True, True])
        return dx, dw, db, None
