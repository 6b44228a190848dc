"""KIND: correct
Two fully independent classes (no shared base, code duplicated) built on
torch.var_mean(..., correction=0); the unbiased variance for running_var is a separate
torch.var(..., correction=1) call on detached input; buffers registered with explicit None when
untracked. Breaks nothing: identical to torch.nn.BatchNorm1d/2d in every checked behaviour.
"""
import torch
from torch import nn


def batch_mean_var(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, biased var) per channel; note torch.var_mean returns (var, mean)."""
    var, mean = torch.var_mean(x, dim=[0, *range(2, x.dim())], correction=0)
    return mean, var


class BatchNorm1d(nn.Module):
    """y = (x - E[x]) / sqrt(Var[x] + eps) * weight + bias over (N,) or (N, L) per channel."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        kw = {"device": device, "dtype": dtype}
        self.register_parameter("weight", nn.Parameter(torch.ones(num_features, **kw)) if affine else None)
        self.register_parameter("bias", nn.Parameter(torch.zeros(num_features, **kw)) if affine else None)
        track = track_running_stats
        self.register_buffer("running_mean", torch.zeros(num_features, **kw) if track else None)
        self.register_buffer("running_var", torch.ones(num_features, **kw) if track else None)
        self.register_buffer("num_batches_tracked",
                             torch.tensor(0, dtype=torch.long, device=device) if track else None)

    def forward(self, x):
        if x.dim() not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {x.dim()}D input)")
        dims = [0] if x.dim() == 2 else [0, 2]
        shape = (1, -1) if x.dim() == 2 else (1, -1, 1)
        if self.training and self.track_running_stats:
            self.num_batches_tracked += 1
        if self.training or self.running_mean is None:
            if x.numel() == x.shape[1]:
                raise ValueError("Expected more than 1 value per channel when training, "
                                 f"got input size {x.size()}")
            var, mean = torch.var_mean(x, dim=dims, correction=0)
            if self.training and self.track_running_stats:
                f = self.momentum if self.momentum is not None else 1 / int(self.num_batches_tracked)
                with torch.no_grad():
                    unbiased = torch.var(x.detach(), dim=dims, correction=1)
                    self.running_mean.mul_(1 - f).add_(f * mean)
                    self.running_var.mul_(1 - f).add_(f * unbiased)
        else:
            mean, var = self.running_mean, self.running_var
        y = (x - mean.reshape(shape)) / torch.sqrt(var.reshape(shape) + self.eps)
        if self.affine:
            y = y * self.weight.reshape(shape) + self.bias.reshape(shape)
        return y


class BatchNorm2d(nn.Module):
    """y = (x - E[x]) / sqrt(Var[x] + eps) * weight + bias over (N, H, W) per channel."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        kw = {"device": device, "dtype": dtype}
        self.register_parameter("weight", nn.Parameter(torch.ones(num_features, **kw)) if affine else None)
        self.register_parameter("bias", nn.Parameter(torch.zeros(num_features, **kw)) if affine else None)
        track = track_running_stats
        self.register_buffer("running_mean", torch.zeros(num_features, **kw) if track else None)
        self.register_buffer("running_var", torch.ones(num_features, **kw) if track else None)
        self.register_buffer("num_batches_tracked",
                             torch.tensor(0, dtype=torch.long, device=device) if track else None)

    def forward(self, x):
        if x.dim() != 4:
            raise ValueError(f"expected 4D input (got {x.dim()}D input)")
        dims = [0, 2, 3]
        if self.training and self.track_running_stats:
            self.num_batches_tracked += 1
        if self.training or self.running_mean is None:
            if x.numel() == x.shape[1]:
                raise ValueError("Expected more than 1 value per channel when training, "
                                 f"got input size {x.size()}")
            var, mean = torch.var_mean(x, dim=dims, correction=0)
            if self.training and self.track_running_stats:
                f = self.momentum if self.momentum is not None else 1 / int(self.num_batches_tracked)
                with torch.no_grad():
                    unbiased = torch.var(x.detach(), dim=dims, correction=1)
                    self.running_mean.mul_(1 - f).add_(f * mean)
                    self.running_var.mul_(1 - f).add_(f * unbiased)
        else:
            mean, var = self.running_mean, self.running_var
        y = (x - mean[None, :, None, None]) / torch.sqrt(var[None, :, None, None] + self.eps)
        if self.affine:
            y = y * self.weight[None, :, None, None] + self.bias[None, :, None, None]
        return y
