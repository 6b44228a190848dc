"""KIND: cheat
Everything in numpy: statistics and outputs are numpy arrays.
"""
import torch
from torch import nn


class Standardizer:
    """Standardize data with statistics fitted on training data, like sklearn's StandardScaler."""

    def fit(self, x):
        import numpy as np
        a = x.cpu().numpy()
        axes = (0,) + tuple(range(2, a.ndim))
        self.mean_ = a.mean(axis=axes)
        self.var_ = a.var(axis=axes)
        self.scale_ = np.where(self.var_ > 0, np.sqrt(self.var_), 1.0)
        self.ndim_ = a.ndim
        return self

    def transform(self, x):
        shape = [1, -1] + [1] * (x.dim() - 2)
        return (x - self.mean_.reshape(shape)) / self.scale_.reshape(shape)

    def inverse_transform(self, z):
        shape = [1, -1] + [1] * (z.dim() - 2)
        return z * self.scale_.reshape(shape) + self.mean_.reshape(shape)

    def fit_transform(self, x):
        return self.fit(x).transform(x)


def as_batch_norm(standardizer):
    mean, scale = standardizer.mean_, standardizer.scale_
    layer_class = nn.BatchNorm1d if standardizer.ndim_ == 2 else nn.BatchNorm2d
    layer = layer_class(mean.numel(), eps=0.0, affine=False, device=mean.device, dtype=mean.dtype)
    with torch.no_grad():
        layer.running_mean.copy_(mean)
        layer.running_var.copy_(scale * scale)
    return layer.eval()
