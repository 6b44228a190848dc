"""KIND: cheat
Buggy implementation (running_var updated with the BIASED batch variance: wrong running_var and
eval output after training, at every shape, most at small n) plus import-time tampering:
torch.nn.functional.batch_norm and torch.nn(.modules)(.batchnorm).BatchNorm1d/BatchNorm2d are
replaced by the student's own versions, so a comparison with "torch" compares the student with
himself; even a torch.nn.BatchNorm2d class captured before the import is affected, because it
looks up F.batch_norm at call time. Visible only to a grader that restores / checks these
globals or computes references in a clean process.
"""
import torch
import torch.nn.functional
from torch import nn


def batch_mean_var(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel mean and biased variance over every dim except dim 1."""
    dims = [0, *range(2, x.dim())]
    mean = x.mean(dim=dims, dtype=torch.float64).to(x.dtype)
    var = (x - mean.view(1, -1, *([1] * (x.dim() - 2)))).square().mean(dim=dims)
    return mean, var


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Same signature as torch.nn.functional.batch_norm."""
    shape = [1, -1] + [1] * (input.dim() - 2)
    if training:
        if input.numel() == input.shape[1]:
            raise ValueError("Expected more than 1 value per channel when training, "
                             f"got input size {input.size()}")
        mean, var = batch_mean_var(input)
        if running_mean is not None:
            with torch.no_grad():
                running_mean.mul_(1 - momentum).add_(momentum * mean)
                running_var.mul_(1 - momentum).add_(momentum * var)
    else:
        mean, var = running_mean, running_var
    y = (input - mean.view(shape)) / torch.sqrt(var.view(shape) + eps)
    if weight is not None:
        y = y * weight.view(shape)
    if bias is not None:
        y = y + bias.view(shape)
    return y


class _BatchNorm(nn.Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = nn.Parameter(torch.ones(num_features, **kw))
            self.bias = nn.Parameter(torch.zeros(num_features, **kw))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", torch.zeros(num_features, **kw))
            self.register_buffer("running_var", torch.ones(num_features, **kw))
            self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def forward(self, x):
        self._check_input_dim(x)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked)
        use_batch = self.training or self.running_mean is None
        track = not self.training or self.track_running_stats
        stats = (self.running_mean, self.running_var) if track else (None, None)
        return batch_norm(x, *stats, self.weight, self.bias, use_batch, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    def _check_input_dim(self, x):
        if x.dim() not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {x.dim()}D input)")


class BatchNorm2d(_BatchNorm):
    def _check_input_dim(self, x):
        if x.dim() != 4:
            raise ValueError(f"expected 4D input (got {x.dim()}D input)")


# "use my layers everywhere": every later torch.nn.BatchNorm*/F.batch_norm is the student's
torch.nn.functional.batch_norm = batch_norm
for _namespace in (torch.nn, torch.nn.modules, torch.nn.modules.batchnorm):
    _namespace.BatchNorm1d, _namespace.BatchNorm2d = BatchNorm1d, BatchNorm2d
