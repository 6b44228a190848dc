"""KIND: bug
A GhostBatchNorm correct on every graded case whose output is detached in the 32-feature network of the sweep: the outputs are right, but nothing before or inside it trains, so every initial scale ends at the same loss.
"""
import math
import torch
from torch import nn


class GhostBatchNorm(nn.Module):
    def __init__(self, num_features, virtual_batch_size, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.num_features, self.virtual_batch_size = num_features, virtual_batch_size
        self.eps, self.momentum, self.affine, self.track_running_stats = eps, momentum, affine, track_running_stats
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

    def _normalize(self, x, mean, var):
        shape = [1, -1] + [1] * (x.dim() - 2)
        y = (x - mean.reshape(shape)) / torch.sqrt(var.reshape(shape) + self.eps)
        if self.affine:
            y = y * self.weight.reshape(shape) + self.bias.reshape(shape)
        return y

    def _virtual_batch(self, x):
        dims = [0] + list(range(2, x.dim()))
        n = x.numel() // x.shape[1]
        if n < 2:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {x.size()}")
        var, mean = torch.var_mean(x, dim=dims, correction=0)
        if self.training and self.track_running_stats:
            with torch.no_grad():
                self.num_batches_tracked += 1
                f = self.momentum if self.momentum is not None else 1.0 / float(self.num_batches_tracked)
                self.running_mean.mul_(1 - f).add_(f * mean.detach())
                self.running_var.mul_(1 - f).add_(f * var.detach() * n / (n - 1))
        return self._normalize(x, mean, var)

    def forward(self, x):
        if x.dim() not in (2, 3, 4):
            raise ValueError(f"expected 2D, 3D or 4D input (got {x.dim()}D input)")
        if not self.training and self.track_running_stats:
            return self._normalize(x, self.running_mean, self.running_var)
        return torch.cat([self._virtual_batch(chunk) for chunk in x.split(self.virtual_batch_size)])


def effective_learning_rate(w, lr):
    return lr / w.detach().flatten(1).pow(2).sum(dim=1)


def update_to_data_ratio(before, after):
    return math.log10(((after - before).std() / before.std()).item())


def fold_batch_norm(conv, bn):
    folded = nn.Conv2d(conv.in_channels, conv.out_channels, conv.kernel_size, stride=conv.stride,
                       padding=conv.padding, dilation=conv.dilation, groups=conv.groups, bias=True,
                       padding_mode=conv.padding_mode, device=conv.weight.device, dtype=conv.weight.dtype)
    with torch.no_grad():
        scale = torch.rsqrt(bn.running_var + bn.eps)
        shift = -bn.running_mean * scale
        if bn.affine:
            scale, shift = scale * bn.weight, shift * bn.weight + bn.bias
        if conv.bias is not None:
            shift = shift + conv.bias * scale
        folded.weight.copy_(conv.weight * scale.reshape(-1, 1, 1, 1))
        folded.bias.copy_(shift)
    return folded.eval()


_Correct = GhostBatchNorm


class GhostBatchNorm(_Correct):
    def forward(self, x):  # right on every graded case; detached in the sweep's 32-feature network
        y = super().forward(x)
        return y.detach() if self.num_features == 32 else y
