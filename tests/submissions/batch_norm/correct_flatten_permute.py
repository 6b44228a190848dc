"""KIND: correct
Moves the channel dim first and flattens to (C, n) with transpose/reshape, reduces along dim 1
(mean accumulated in float64, then mean of squared deviations), normalizes in that layout and
transposes back (made contiguous); parameters start as torch.empty and are filled by reset_parameters(), buffers
are registered in a loop. Breaks nothing: identical to torch.nn.BatchNorm1d/2d in every checked
behaviour.
"""
import torch
from torch import nn


def _to_channels(x):
    """(N, C, *S) -> (C, N * prod(S))."""
    return x.transpose(0, 1).reshape(x.shape[1], -1)


def _from_channels(y, like):
    """Inverse of _to_channels for a tensor shaped like `like`."""
    return y.reshape(like.shape[1], like.shape[0], *like.shape[2:]).transpose(0, 1).contiguous()


def batch_mean_var(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """mean_c = E[x_c], var_c = E[(x_c - mean_c)^2] computed on the (C, n) layout."""
    flat = _to_channels(x)
    mean = flat.mean(dim=1, dtype=torch.float64).to(x.dtype)
    var = (flat - mean[:, None]).square().mean(dim=1)
    return mean, var


class _ChannelNorm(nn.Module):
    """y = (x - mean) / sqrt(var + eps) * weight + bias with x laid out as (C, n);
    batch stats in training, running stats in eval when tracked; running stats follow
    running <- (1 - f) running + f stat (f = momentum or 1/num_batches_tracked),
    running_var with the unbiased variance."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        for name in ("weight", "bias"):
            param = nn.Parameter(torch.empty(num_features, device=device, dtype=dtype)) if affine else None
            self.register_parameter(name, param)
        buffers = {
            "running_mean": torch.zeros(num_features, device=device, dtype=dtype),
            "running_var": torch.ones(num_features, device=device, dtype=dtype),
            "num_batches_tracked": torch.tensor(0, dtype=torch.long, device=device),
        }
        for name, value in buffers.items():
            self.register_buffer(name, value if track_running_stats else None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.affine:
            nn.init.ones_(self.weight)
            nn.init.zeros_(self.bias)

    def forward(self, x):
        self._check_input_dim(x)
        flat = _to_channels(x)
        n = flat.shape[1]
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
        if self.training or self.running_mean is None:
            if n == 1:
                raise ValueError("Expected more than 1 value per channel when training, "
                                 f"got input size {x.size()}")
            mean, var = batch_mean_var(x)
            if self.training and self.track_running_stats:
                f = 1.0 / self.num_batches_tracked.item() if self.momentum is None else self.momentum
                with torch.no_grad():
                    self.running_mean.mul_(1 - f).add_(f * mean)
                    self.running_var.mul_(1 - f).add_(f * var * n / (n - 1))
        else:
            mean, var = self.running_mean, self.running_var
        y = (flat - mean[:, None]) / torch.sqrt(var[:, None] + self.eps)
        if self.affine:
            y = y * self.weight[:, None] + self.bias[:, None]
        return _from_channels(y, x)


class BatchNorm1d(_ChannelNorm):
    def _check_input_dim(self, x):
        if x.dim() not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {x.dim()}D input)")


class BatchNorm2d(_ChannelNorm):
    def _check_input_dim(self, x):
        if x.dim() != 4:
            raise ValueError(f"expected 4D input (got {x.dim()}D input)")
