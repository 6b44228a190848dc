"""KIND: correct
Training-mode normalization is a custom torch.autograd.Function with the hand-derived backward
(dx = invstd * (g - mean(g) - x_hat * mean(g * x_hat)), g = dy * weight); eval with running
statistics uses plain autograd. Statistics via torch.var_mean(correction=0). Breaks nothing:
identical to torch.nn.BatchNorm1d/2d in outputs, first-order input/parameter gradients and all
buffers (no double-backward support, which the exercise does not ask for).
"""
import torch
from torch import nn


def batch_mean_var(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel mean and biased variance over every dim except dim 1."""
    var, mean = torch.var_mean(x, dim=[0, *range(2, x.dim())], correction=0)
    return mean, var


def _bcast(v, x):
    return v.view(1, -1, *([1] * (x.dim() - 2)))


class _TrainBatchNorm(torch.autograd.Function):
    r"""Forward: x_hat = (x - mean) * invstd, invstd = 1 / sqrt(var + eps), y = x_hat * w + b.

    Backward, per channel over the n reduced elements, with g = dy * w:
        dx = invstd * (g - mean(g) - x_hat * mean(g * x_hat))
        dw = sum(dy * x_hat),  db = sum(dy)
    """

    @staticmethod
    def forward(ctx, x, weight, bias, mean, var, eps):
        invstd = 1.0 / torch.sqrt(var + eps)
        x_hat = (x - _bcast(mean, x)) * _bcast(invstd, x)
        ctx.save_for_backward(x_hat, invstd, weight)
        if weight is None:
            return x_hat
        return x_hat * _bcast(weight, x) + _bcast(bias, x)

    @staticmethod
    def backward(ctx, dy):
        x_hat, invstd, weight = ctx.saved_tensors
        dims = [0, *range(2, dy.dim())]
        g = dy if weight is None else dy * _bcast(weight, dy)
        dx = _bcast(invstd, dy) * (g - _bcast(g.mean(dims), dy)
                                   - x_hat * _bcast((g * x_hat).mean(dims), dy))
        dw = db = None
        if weight is not None:
            dw, db = (dy * x_hat).sum(dims), dy.sum(dims)
        return dx, dw, db, None, None, None


class _BatchNorm(nn.Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None):
        super().__init__()
        factory_kwargs = {"device": device, "dtype": dtype}
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = nn.Parameter(torch.ones(num_features, **factory_kwargs))
            self.bias = nn.Parameter(torch.zeros(num_features, **factory_kwargs))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", torch.zeros(num_features, **factory_kwargs))
            self.register_buffer("running_var", torch.ones(num_features, **factory_kwargs))
            self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def forward(self, x):
        self._check_input_dim(x)
        if self.training and self.track_running_stats:
            self.num_batches_tracked += 1
        if not self.training and self.running_mean is not None:
            scale = torch.rsqrt(self.running_var + self.eps)
            y = (x - _bcast(self.running_mean, x)) * _bcast(scale, x)
            return y * _bcast(self.weight, x) + _bcast(self.bias, x) if self.affine else y
        n = x.numel() // x.shape[1]
        if n == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {x.size()}")
        with torch.no_grad():
            mean, var = batch_mean_var(x)
            if self.training and self.track_running_stats:
                f = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
                self.running_mean.mul_(1 - f).add_(f * mean)
                self.running_var.mul_(1 - f).add_(f * n / (n - 1) * var)
        return _TrainBatchNorm.apply(x, self.weight, self.bias, mean, var, self.eps)


class BatchNorm1d(_BatchNorm):
    def _check_input_dim(self, x):
        if x.dim() not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {x.dim()}D input)")


class BatchNorm2d(_BatchNorm):
    def _check_input_dim(self, x):
        if x.dim() != 4:
            raise ValueError(f"expected 4D input (got {x.dim()}D input)")
