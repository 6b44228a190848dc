"""KIND: cheat
Keeps a torch.nn.GroupNorm inside and calls it.
"""
import torch
from torch import nn
import torch.nn.functional as F


class GroupNorm(nn.Module):
    """y = (x − μ_g) / sqrt(σ²_g + eps) · γ_c + β_c, statistics per sample over each group of channels."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        self.inner = nn.GroupNorm(num_groups, num_channels, eps, affine=False, device=device, dtype=dtype)
        factory = {"device": device, "dtype": dtype}
        if affine:
            self.weight = nn.Parameter(torch.ones(num_channels, **factory))
            self.bias = nn.Parameter(torch.zeros(num_channels, **factory))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() < 2:
            raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {x.dim()}")
        n, c = x.shape[0], x.shape[1]
        if c % self.num_groups != 0 or (self.affine and c != self.num_channels):
            raise RuntimeError(
                f"Expected {self.num_channels} channels, divisible by num_groups={self.num_groups}, "
                f"but got input of shape {list(x.shape)}"
            )
        y = self.inner(x)
        if self.affine:
            shape = [1, c] + [1] * (x.dim() - 2)
            y = y * self.weight.reshape(shape) + self.bias.reshape(shape)
        return y


class InstanceNorm2d(nn.Module):
    """y = (x − μ_nc) / sqrt(σ²_nc + eps) · γ_c + β_c, statistics per sample and channel over H, W."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, device=None, dtype=None):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        factory = {"device": device, "dtype": dtype}
        if affine:
            self.weight = nn.Parameter(torch.ones(num_features, **factory))
            self.bias = nn.Parameter(torch.zeros(num_features, **factory))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", torch.zeros(num_features, **factory))
            self.register_buffer("running_var", torch.ones(num_features, **factory))
            self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() not in (3, 4):
            raise ValueError(f"expected 3D or 4D input (got {x.dim()}D input)")
        if x.dim() == 3:  # one unbatched image (C, H, W)
            return self.forward(x.unsqueeze(0)).squeeze(0)
        if self.affine and x.shape[1] != self.num_features:
            raise ValueError(f"expected input's size at dim=1 to match num_features ({self.num_features}), "
                             f"but got: {x.shape[1]}.")
        if self.training or not self.track_running_stats:
            mean = x.mean(dim=(2, 3), keepdim=True)
            var = ((x - mean) ** 2).mean(dim=(2, 3), keepdim=True)
            if self.training and self.track_running_stats:
                n = x.shape[2] * x.shape[3]
                with torch.no_grad():
                    unbiased = var.detach() * n / (n - 1)
                    self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean.detach().mean(dim=(0, 2, 3)))
                    self.running_var.mul_(1 - self.momentum).add_(self.momentum * unbiased.mean(dim=(0, 2, 3)))
        else:
            mean = self.running_mean.reshape(1, -1, 1, 1)
            var = self.running_var.reshape(1, -1, 1, 1)
        y = (x - mean) / torch.sqrt(var + self.eps)
        if self.affine:
            y = y * self.weight.reshape(1, -1, 1, 1) + self.bias.reshape(1, -1, 1, 1)
        return y
