"""KIND: cheat
Not a Function at all underneath: ``apply`` is overridden by a plain forward written with
primitives, so autograd differentiates it and the student's backward never runs.
"""
import torch


def _plain(x, weight, bias, eps, dims, view):
    mean = x.mean(dim=dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight.reshape(view) + bias.reshape(view)


class BatchNormFunction(torch.autograd.Function):
    @staticmethod
    def apply(x, weight, bias, eps):
        return _plain(x, weight, bias, eps, [0] + list(range(2, x.dim())), [1, -1] + [1] * (x.dim() - 2))


class LayerNormFunction(torch.autograd.Function):
    @staticmethod
    def apply(x, weight, bias, eps):
        return _plain(x, weight, bias, eps, list(range(x.dim() - weight.dim(), x.dim())), tuple(weight.shape))
