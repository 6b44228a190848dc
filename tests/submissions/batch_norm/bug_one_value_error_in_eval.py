"""KIND: bug
Raises the 'more than 1 value per channel' error in every mode, also in eval mode with running
statistics, where torch normalizes a single sample with running_mean/running_var and does not raise.
"""
import torch
from torch import nn


def batch_mean_var(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Per-channel mean and biased variance of ``x`` over every dim except dim 1.

    With n = x.numel() / C values per channel c:

        mean_c = 1/n * sum_i x_{i,c}
        var_c  = 1/n * sum_i (x_{i,c} - mean_c)^2        (biased: divide by n, not n - 1)

    The mean is accumulated in float64 (as torch's CPU kernel does) and the variance is a
    second pass over the centred values, so both stay accurate in float32 even when
    |mean| >> std (unlike the one-pass E[x^2] - E[x]^2).
    """
    dims = [0, *range(2, x.dim())]
    mean = x.mean(dim=dims, dtype=torch.float64).to(x.dtype)
    var = (x - _channel_view(mean, x)).square().mean(dim=dims)
    return mean, var


def _channel_view(v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Reshape a (C,) tensor to (1, C, 1, ...) so that it broadcasts against x."""
    return v.view(1, -1, *([1] * (x.dim() - 2)))


class _BatchNorm(nn.Module):
    r"""Batch normalization over the channel dim 1.

    Training (and eval without running statistics), per channel c:

        y = (x - mean_B) / sqrt(var_B + eps) * weight + bias

    with mean_B, var_B from :func:`batch_mean_var`; gradients flow through both.
    With ``track_running_stats``, every training step also does (without autograd history)

        num_batches_tracked += 1
        running_mean = (1 - f) * running_mean + f * mean_B
        running_var  = (1 - f) * running_var  + f * var_B * n / (n - 1)      (unbiased)

    where f = momentum, or f = 1 / num_batches_tracked (cumulative average) if momentum is None.
    Eval with running statistics uses running_mean / running_var instead of mean_B / var_B.
    """

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
            self.register_buffer("num_batches_tracked",
                                 torch.tensor(0, dtype=torch.long, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def _check_input_dim(self, x: torch.Tensor) -> None:
        raise NotImplementedError

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input_dim(x)
        if x.numel() // x.shape[1] == 1:  # the bug: torch raises only when batch statistics are used
            raise ValueError("Expected more than 1 value per channel when training, "
                             f"got input size {x.size()}")
        update_stats = self.training and self.track_running_stats
        if update_stats:
            self.num_batches_tracked += 1  # in place, so it also counts under no_grad

        if self.training or self.running_mean is None:
            n = x.numel() // x.shape[1]  # values per channel
            if n == 1:
                raise ValueError("Expected more than 1 value per channel when training, "
                                 f"got input size {x.size()}")
            mean, var = batch_mean_var(x)
            if update_stats:
                self._update_running_stats(mean, var, n)
        else:
            mean, var = self.running_mean, self.running_var

        y = (x - _channel_view(mean, x)) / torch.sqrt(_channel_view(var, x) + self.eps)
        if self.affine:
            y = y * _channel_view(self.weight, x) + _channel_view(self.bias, x)
        return y

    @torch.no_grad()
    def _update_running_stats(self, mean, var, n):
        if self.momentum is None:
            f = 1.0 / float(self.num_batches_tracked)
        else:
            f = self.momentum
        self.running_mean.mul_(1 - f).add_(mean, alpha=f)
        self.running_var.mul_(1 - f).add_(var * (n / (n - 1)), alpha=f)


class BatchNorm1d(_BatchNorm):
    """Batch norm for (N, C) or (N, C, L) input: statistics over N (and L) per channel."""

    def _check_input_dim(self, x):
        if x.dim() not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {x.dim()}D input)")


class BatchNorm2d(_BatchNorm):
    """Batch norm for (N, C, H, W) input: statistics over N, H and W per channel."""

    def _check_input_dim(self, x):
        if x.dim() != 4:
            raise ValueError(f"expected 4D input (got {x.dim()}D input)")
