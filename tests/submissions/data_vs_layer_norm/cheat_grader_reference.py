"""KIND: cheat
Fit, transform and inverse_transform call the checks' own reference: in the student's package that
is autograder.exercises.ex05_data_vs_layer_norm.reference, which asks scikit-learn (the grader's
torch reference, hidden_reference.py, is not there). So the data leaves torch and those parts earn
nothing.
"""
import torch
from torch import nn

from autograder.exercises.ex05_data_vs_layer_norm import reference


class Standardizer:
    """Standardize data with statistics fitted on training data, like sklearn's StandardScaler."""

    def fit(self, x):
        fitted = reference.statistics(x)
        self.mean_, self.var_, self.scale_ = fitted.mean, fitted.var, fitted.scale
        self.ndim_ = x.dim()
        return self

    def transform(self, x):
        return reference.standardized(x, self.mean_, self.scale_)

    def inverse_transform(self, z):
        return reference.inverse(z, self.mean_, self.scale_)

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
