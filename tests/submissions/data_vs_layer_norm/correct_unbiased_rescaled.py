"""KIND: correct
torch.var's default unbiased variance rescaled by (n − 1)/n over a (C, n) view, and a BatchNorm
with default eps whose running_var stays 1: the weight √(1 + eps) / scale_ does the scaling.
"""
import torch
from torch import nn


class Standardizer:
    def fit(self, x):
        c = x.shape[1]
        flat = x.transpose(0, 1).reshape(c, -1)
        n = flat.shape[1]
        mean = flat.mean(1)
        var = flat.var(1) * (n - 1) / n if n > 1 else torch.zeros_like(mean)
        constant = flat.max(1).values == flat.min(1).values
        self.mean_ = mean
        self.var_ = var
        self.scale_ = var.sqrt().masked_fill(constant, 1.0)
        self.ndim_ = x.dim()
        return self

    def transform(self, x):
        view = [-1 if i == 1 else 1 for i in range(x.dim())]
        return (x - self.mean_.view(view)) / self.scale_.view(view)

    def inverse_transform(self, z):
        view = [-1 if i == 1 else 1 for i in range(z.dim())]
        return self.mean_.view(view) + z * self.scale_.view(view)

    def fit_transform(self, x):
        return self.fit(x).transform(x)


def as_batch_norm(standardizer):
    mean, scale = standardizer.mean_, standardizer.scale_
    bn = (nn.BatchNorm2d if standardizer.ndim_ == 4 else nn.BatchNorm1d)(
        mean.numel(), device=mean.device, dtype=mean.dtype)
    with torch.no_grad():
        bn.running_mean.copy_(mean)
        bn.weight.copy_((bn.running_var + bn.eps).sqrt() / scale)  # running_var is still 1
    bn.train(False)
    return bn
