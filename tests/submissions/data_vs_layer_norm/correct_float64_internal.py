"""KIND: correct
Statistics accumulated in float64 (on a copy) and converted back; channels moved last and
flattened to a (samples, features) table; a BatchNorm with default eps whose affine weight
compensates it: weight = √(var_ + eps) / scale_.
"""
import torch
from torch import nn


def _table(x):
    return x.movedim(1, -1).reshape(-1, x.shape[1])


class Standardizer:
    def fit(self, x):
        t = _table(x).to(torch.float64)
        mean = t.sum(0) / t.shape[0]
        var = ((t - mean) ** 2).sum(0) / t.shape[0]
        constant = (t == t[0]).all(0)
        scale = var.sqrt()
        scale[constant] = 1.0
        self.mean_ = mean.to(x.dtype)
        self.var_ = var.to(x.dtype)
        self.scale_ = scale.to(x.dtype)
        self.ndim_ = x.dim()
        return self

    def _apply(self, x, fn):
        out = fn(_table(x))
        n, c, *rest = x.shape
        return out.reshape([n] + rest + [c]).movedim(-1, 1)

    def transform(self, x):
        return self._apply(x, lambda t: (t - self.mean_) / self.scale_)

    def inverse_transform(self, z):
        return self._apply(z, lambda t: t * self.scale_ + self.mean_)

    def fit_transform(self, x):
        self.fit(x)
        return self.transform(x)


def as_batch_norm(standardizer):
    mean, var, scale = standardizer.mean_, standardizer.var_, standardizer.scale_
    layer = nn.BatchNorm1d if standardizer.ndim_ == 2 else nn.BatchNorm2d
    bn = layer(len(mean), eps=1e-5, device=mean.device, dtype=mean.dtype)
    with torch.no_grad():
        bn.running_mean.copy_(mean)
        bn.running_var.copy_(var)
        bn.weight.copy_(torch.sqrt(var + bn.eps) / scale)
        bn.bias.zero_()
    return bn.eval()
