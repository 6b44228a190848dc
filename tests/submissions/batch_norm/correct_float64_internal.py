"""KIND: correct
Does all arithmetic (statistics, normalization, running-stat updates) in float64 and casts the
result back to the input/buffer dtype; the input-dim check lives in the base class and reads
the allowed dims from a class attribute. Breaks nothing: identical to torch.nn.BatchNorm1d/2d
in every checked behaviour (float32 results are, if anything, closer to the float64 reference).
"""
import torch
from torch import nn


def batch_mean_var(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """mean_c = E[x_c] and biased var_c = E[(x_c - mean_c)^2] over all dims but 1,
    computed in float64 and returned in x's dtype."""
    x64 = x.double()
    dims = tuple(d for d in range(x.dim()) if d != 1)
    mean = x64.mean(dims, keepdim=True)
    var = ((x64 - mean) ** 2).mean(dims)
    return mean.flatten().to(x.dtype), var.to(x.dtype)


class _Float64BatchNorm(nn.Module):
    """y = (x - mean) / sqrt(var + eps) * weight + bias, evaluated in float64.

    mean/var: batch statistics in training (and in eval when no running stats are kept),
    running_mean/running_var otherwise. Running update (training only):
    running <- (1 - f) running + f stat, f = momentum or 1/num_batches_tracked,
    with the unbiased variance var * n / (n - 1).
    """

    allowed_dims = ()
    dim_message = ""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        kw = dict(device=device, dtype=dtype)
        self.register_parameter("weight", nn.Parameter(torch.ones(num_features, **kw)) if affine else None)
        self.register_parameter("bias", nn.Parameter(torch.zeros(num_features, **kw)) if affine else None)
        if track_running_stats:
            self.register_buffer("running_mean", torch.zeros(num_features, **kw))
            self.register_buffer("running_var", torch.ones(num_features, **kw))
            self.register_buffer("num_batches_tracked", torch.zeros((), dtype=torch.int64, device=device))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)

    def forward(self, x):
        if x.dim() not in self.allowed_dims:
            raise ValueError(self.dim_message.format(x.dim()))
        shape = (1, -1) + (1,) * (x.dim() - 2)
        dims = tuple(d for d in range(x.dim()) if d != 1)
        x64 = x.double()
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
        if self.training or self.running_mean is None:
            n = x.numel() // x.size(1)
            if n == 1:
                raise ValueError("Expected more than 1 value per channel when training, "
                                 f"got input size {x.size()}")
            mean = x64.mean(dims)
            var = ((x64 - mean.view(shape)) ** 2).mean(dims)
            if self.training and self.track_running_stats:
                f = 1.0 / self.num_batches_tracked.item() if self.momentum is None else self.momentum
                with torch.no_grad():
                    self.running_mean.copy_((1 - f) * self.running_mean.double() + f * mean)
                    self.running_var.copy_((1 - f) * self.running_var.double() + f * var * n / (n - 1))
        else:
            mean, var = self.running_mean.double(), self.running_var.double()
        y = (x64 - mean.view(shape)) / torch.sqrt(var.view(shape) + self.eps)
        if self.affine:
            y = y * self.weight.double().view(shape) + self.bias.double().view(shape)
        return y.to(x.dtype)


class BatchNorm1d(_Float64BatchNorm):
    allowed_dims = (2, 3)
    dim_message = "expected 2D or 3D input (got {}D input)"


class BatchNorm2d(_Float64BatchNorm):
    allowed_dims = (4,)
    dim_message = "expected 4D input (got {}D input)"
