"""KIND: correct
Welford's streaming update over the samples (vectorized over features), scikit-learn's own
constancy test (variance within the rounding bound of a two-pass algorithm), and a BatchNorm with
eps = 0 whose buffers are replaced by clones.
"""
import torch
from torch import nn


class Standardizer:
    def fit(self, x):
        rows = x.transpose(0, 1).reshape(x.shape[1], -1).T  # (n, C): a sample per row
        mean = torch.zeros_like(rows[0])
        m2 = torch.zeros_like(rows[0])
        for k, row in enumerate(rows, start=1):
            delta = row - mean
            mean = mean + delta / k
            m2 = m2 + delta * (row - mean)
        n = rows.shape[0]
        var = m2 / n
        eps = torch.finfo(torch.float64).eps
        constant = var <= n * eps * var + (n * mean * eps) ** 2
        self.mean_, self.var_ = mean, var
        self.scale_ = torch.where(constant, torch.ones_like(var), var.sqrt())
        self.ndim_ = x.dim()
        return self

    def _shape(self, x):
        return (1, -1) + (1,) * (x.dim() - 2)

    def transform(self, x):
        return (x - self.mean_.view(self._shape(x))) / self.scale_.view(self._shape(x))

    def inverse_transform(self, z):
        return torch.addcmul(self.mean_.view(self._shape(z)), z, self.scale_.view(self._shape(z)))

    def fit_transform(self, x):
        return self.fit(x).transform(x)


def as_batch_norm(standardizer):
    cls = nn.BatchNorm1d if standardizer.ndim_ < 3 else nn.BatchNorm2d
    bn = cls(standardizer.mean_.numel(), eps=0.0, affine=False)
    bn.running_mean = standardizer.mean_.clone()
    bn.running_var = standardizer.scale_.square()
    return bn.eval()
