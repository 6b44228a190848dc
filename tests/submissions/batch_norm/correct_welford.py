"""KIND: correct
Streams over the batch: per-sample statistics are merged one sample at a time with the
Welford/Chan parallel update (count, mean, M2), so no full-batch sum of raw values is ever
formed (accumulators in float64); gradients flow through the whole merge chain. Breaks
nothing: identical to torch.nn.BatchNorm1d/2d in every checked behaviour, also in float32 at
mean 1e3.
"""
import torch
from torch import nn


def batch_mean_var(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Per-channel mean and biased variance over all dims but 1, merged sample by sample.

    For running (count_a, mean_a, M2_a) and a new sample b with m values per channel:
        delta  = mean_b - mean_a
        count  = count_a + m
        mean   = mean_a + delta * m / count
        M2     = M2_a + M2_b + delta^2 * count_a * m / count
    and finally var = M2 / count (biased). The accumulators are float64 (like torch's CPU
    kernel), so float32 input with |mean| >> std loses nothing; results are cast back.
    """
    samples = x.double().reshape(x.shape[0], x.shape[1], -1)  # (N, C, m)
    m = samples.shape[2]
    count, mean, m2 = 0, samples.new_zeros(x.shape[1]), samples.new_zeros(x.shape[1])
    for s in samples:  # s: (C, m)
        s_mean = s.mean(dim=1)
        s_m2 = (s - s_mean[:, None]).square().sum(dim=1)
        delta = s_mean - mean
        total = count + m
        mean = mean + delta * (m / total)
        m2 = m2 + s_m2 + delta.square() * (count * m / total)
        count = total
    return mean.to(x.dtype), (m2 / count).to(x.dtype)


class _BatchNorm(nn.Module):
    """y = (x - mean) / sqrt(var + eps) * weight + bias with batch statistics in training,
    running statistics in eval (if tracked); running <- (1-f) running + f batch, f = momentum
    or 1/num_batches_tracked, running_var from the unbiased variance M2 / (n - 1)."""

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
            self.register_buffer("num_batches_tracked", torch.tensor(0, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def forward(self, x):
        self._check_input_dim(x)
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
        if self.training or self.running_mean is None:
            n = x.numel() // x.shape[1]
            if n == 1:
                raise ValueError("Expected more than 1 value per channel when training, "
                                 f"got input size {x.size()}")
            mean, var = batch_mean_var(x)
            if self.training and self.track_running_stats:
                f = self.momentum
                if f is None:
                    f = 1.0 / self.num_batches_tracked.item()
                with torch.no_grad():
                    self.running_mean.copy_((1 - f) * self.running_mean + f * mean)
                    self.running_var.copy_((1 - f) * self.running_var + f * var * n / (n - 1))
        else:
            mean, var = self.running_mean, self.running_var
        shape = [1, -1] + [1] * (x.dim() - 2)
        y = (x - mean.view(shape)) / (var.view(shape) + self.eps).sqrt()
        if self.affine:
            y = y * self.weight.view(shape) + self.bias.view(shape)
        return y


class BatchNorm1d(_BatchNorm):
    def _check_input_dim(self, x):
        if x.dim() != 2 and x.dim() != 3:
            raise ValueError(f"expected 2D or 3D input (got {x.dim()}D input)")


class BatchNorm2d(_BatchNorm):
    def _check_input_dim(self, x):
        if x.dim() != 4:
            raise ValueError(f"expected 4D input (got {x.dim()}D input)")
