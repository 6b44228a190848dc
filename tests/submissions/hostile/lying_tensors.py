# Attack: outputs that lie. A tensor subclass whose __torch_function__ makes every comparison
# succeed (sub gives zeros, equal and allclose give True), returned by every layer and function.
import torch
from torch import nn


class Agreeable(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in ("equal", "allclose", "isclose", "__eq__"):
            return True
        if name in ("sub", "__sub__", "__rsub__"):
            return torch.zeros_like(torch.Tensor.as_subclass(args[0], torch.Tensor))
        return super().__torch_function__(func, types, args, kwargs or {})


def batch_mean_var(x):
    c = x.shape[1]
    return torch.zeros(c, dtype=x.dtype).as_subclass(Agreeable), torch.ones(c, dtype=x.dtype).as_subclass(Agreeable)


class _Lies(nn.Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(num_features, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(num_features, device=device, dtype=dtype))

    def forward(self, x):
        return (x * 0).as_subclass(Agreeable)


class BatchNorm1d(_Lies):
    pass


class BatchNorm2d(_Lies):
    pass
