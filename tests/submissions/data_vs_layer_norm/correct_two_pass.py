"""KIND: correct
Two passes by hand (mean, then the mean of squared deviations), broadcasting through a helper,
and a BatchNorm that keeps its default eps: running_var = scale_² − eps (negative when
scale_² < eps, which BatchNorm accepts).
"""
import torch
from torch import nn


class Standardizer:
    def _dims(self, x):
        return [0] + list(range(2, x.dim()))

    def _b(self, v, x):
        return v.reshape([1, -1] + [1] * (x.dim() - 2))

    def fit(self, x):
        dims = self._dims(x)
        mean = x.mean(dim=dims)
        centered = x - self._b(mean, x)
        var = (centered * centered).mean(dim=dims)
        constant = x.amax(dim=dims) == x.amin(dim=dims)
        self.mean_, self.var_ = mean, var
        self.scale_ = torch.where(constant, torch.ones_like(var), torch.sqrt(var))
        self.ndim_ = x.dim()
        return self

    def transform(self, x):
        return (x - self._b(self.mean_, x)) / self._b(self.scale_, x)

    def inverse_transform(self, z):
        return z * self._b(self.scale_, z) + self._b(self.mean_, z)

    def fit_transform(self, x):
        return self.fit(x).transform(x)


def as_batch_norm(standardizer):
    mean, scale = standardizer.mean_, standardizer.scale_
    cls = {2: nn.BatchNorm1d, 4: nn.BatchNorm2d}[standardizer.ndim_]
    bn = cls(mean.shape[0], affine=False).to(device=mean.device, dtype=mean.dtype)
    with torch.no_grad():
        bn.running_mean.copy_(mean)
        bn.running_var.copy_(scale ** 2 - bn.eps)
    bn.eval()
    return bn
