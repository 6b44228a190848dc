"""KIND: bug
Virtual batches from x.chunk(ceil(N / size)): right when they come out equal, wrong for N = 12 and size 5 (4, 4, 4 instead of 5, 5, 2).
"""
import math
import torch
from torch import nn


class GhostBatchNorm(nn.Module):
    def __init__(self, num_features, virtual_batch_size, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        self.num_features, self.virtual_batch_size, self.eps, self.momentum = num_features, virtual_batch_size, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.weight = nn.Parameter(torch.empty(num_features, **kw)) if affine else None
        self.bias = nn.Parameter(torch.empty(num_features, **kw)) if affine else None
        if track_running_stats:
            self.register_buffer("running_mean", torch.zeros(num_features, **kw))
            self.register_buffer("running_var", torch.ones(num_features, **kw))
            self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long, device=device))
        else:
            self.running_mean = self.running_var = self.num_batches_tracked = None
        self.reset_parameters()

    def reset_parameters(self):
        if self.affine:
            nn.init.ones_(self.weight)
            nn.init.zeros_(self.bias)

    def forward(self, x):
        if x.dim() not in (2, 3, 4):
            raise ValueError("expected 2D, 3D or 4D input")
        view = (1, -1) + (1,) * (x.dim() - 2)
        dims = (0,) + tuple(range(2, x.dim()))
        if not self.training and self.track_running_stats:
            mean, var = self.running_mean, self.running_var
            y = (x - mean.view(view)) / (var.view(view) + self.eps).sqrt()
            return y * self.weight.view(view) + self.bias.view(view) if self.affine else y
        n_chunks = math.ceil(x.shape[0] / self.virtual_batch_size)
        out = torch.empty_like(x)
        start = 0
        for chunk in torch.chunk(x, n_chunks, dim=0):
            m = chunk.numel() // chunk.shape[1]
            if m <= 1:
                raise ValueError("Expected more than 1 value per channel when training")
            mean = chunk.mean(dims)
            var = chunk.var(dims, unbiased=False)
            if self.training and self.track_running_stats:
                with torch.no_grad():
                    self.num_batches_tracked.add_(1)
                    f = 1.0 / self.num_batches_tracked.item() if self.momentum is None else self.momentum
                    self.running_mean.lerp_(mean, f)
                    self.running_var.lerp_(var * m / (m - 1), f)
            y = (chunk - mean.view(view)) * torch.rsqrt(var.view(view) + self.eps)
            if self.affine:
                y = torch.addcmul(self.bias.view(view), y, self.weight.view(view))
            out[start:start + chunk.shape[0]] = y
            start += chunk.shape[0]
        return out

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
