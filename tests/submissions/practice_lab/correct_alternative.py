"""KIND: correct
Other correct routes: the statistics all-reduced in two rounds (sum and count, then the squared
deviations from the global mean) through torch.distributed.nn.functional.all_reduce, masked
statistics from the gathered real tokens, a frozen layer written out in float64, recalibration
by hand with explicit averages, and a LayerNorm that computes in float64.
"""
import warnings

import torch
import torch.distributed as dist
from torch import nn

warnings.filterwarnings("ignore", category=FutureWarning)  # torch.distributed.nn.functional is deprecated


def _group_sum(t, group):
    if dist.is_available() and dist.is_initialized():
        from torch.distributed.nn.functional import all_reduce
        return all_reduce(t, group=group if group is not None else dist.group.WORLD)
    return t


class SyncBatchNorm2d(nn.Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, device=None, dtype=None):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats, self.process_group = affine, track_running_stats, process_group
        self.weight = nn.Parameter(torch.ones(num_features, **kw)) if affine else None
        self.bias = nn.Parameter(torch.zeros(num_features, **kw)) if affine else None
        if track_running_stats:
            self.register_buffer("running_mean", torch.zeros(num_features, **kw))
            self.register_buffer("running_var", torch.ones(num_features, **kw))
            self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long, device=device))
        else:
            self.running_mean = self.running_var = self.num_batches_tracked = None

    def forward(self, x):
        if x.dim() != 4:
            raise ValueError("expected a 4D input")
        shape = (1, -1, 1, 1)
        if self.training or not self.track_running_stats:
            # like nn.SyncBatchNorm: synchronize in training only (eval without running statistics is local)
            group_sum = _group_sum if self.training else (lambda t, group: t)
            first = torch.cat([x.sum(dim=(0, 2, 3)), torch.full((1,), float(x.numel() // x.shape[1]), dtype=x.dtype)])
            first = group_sum(first, self.process_group)
            n = first[-1]
            mean = first[:-1] / n
            second = group_sum(((x - mean.view(shape)) ** 2).sum(dim=(0, 2, 3)), self.process_group)
            var = second / n
            if self.training and n.item() < 2:
                raise ValueError("Expected more than 1 value per channel when training")
            if self.training and self.track_running_stats:
                with torch.no_grad():
                    self.num_batches_tracked.add_(1)
                    a = self.momentum if self.momentum is not None else 1 / self.num_batches_tracked.item()
                    self.running_mean.copy_((1 - a) * self.running_mean + a * mean)
                    self.running_var.copy_((1 - a) * self.running_var + a * var * n / (n - 1))
        else:
            mean, var = self.running_mean, self.running_var
        out = (x - mean.view(shape)) / torch.sqrt(var.view(shape) + self.eps)
        return out * self.weight.view(shape) + self.bias.view(shape) if self.affine else out


class MaskedBatchNorm1d(nn.Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        self.eps, self.momentum, self.affine, self.track_running_stats = eps, momentum, affine, track_running_stats
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

    def forward(self, x, mask):
        if x.dim() != 3 or tuple(mask.shape) != (x.shape[0], x.shape[2]):
            raise ValueError("x must be (N, C, L) and mask (N, L)")
        tokens = x.transpose(1, 2)[mask.bool()]  # (T, C): the real tokens
        if self.training or not self.track_running_stats:
            if self.training and tokens.shape[0] < 2:
                raise ValueError("Expected more than 1 value per channel when training")
            var, mean = torch.var_mean(tokens, dim=0, correction=0)
            if self.training and self.track_running_stats:
                with torch.no_grad():
                    self.num_batches_tracked += 1
                    a = self.momentum if self.momentum is not None else 1 / self.num_batches_tracked.item()
                    self.running_mean.lerp_(mean, a)
                    self.running_var.lerp_(torch.var(tokens, dim=0, correction=1), a)
        else:
            mean, var = self.running_mean, self.running_var
        normalized = (tokens - mean) / torch.sqrt(var + self.eps)
        if self.affine:
            normalized = normalized * self.weight + self.bias
        out = x.new_zeros(x.shape[0], x.shape[2], x.shape[1]).index_put((mask.bool(),), normalized)
        return out.transpose(1, 2)


class FrozenBatchNorm2d(nn.Module):
    def __init__(self, num_features, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        for name, value in (("weight", 1.0), ("bias", 0.0), ("running_mean", 0.0), ("running_var", 1.0)):
            self.register_buffer(name, torch.full((num_features,), value, device=device, dtype=dtype))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
        key = prefix + "num_batches_tracked"
        if key in state_dict:
            del state_dict[key]
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing, unexpected, errors)

    def forward(self, x):
        v = lambda t: t.double().view(1, -1, 1, 1)  # noqa: E731
        y = (x.double() - v(self.running_mean)) / torch.sqrt(v(self.running_var) + self.eps) * v(self.weight) + v(self.bias)
        return y.to(x.dtype)


def recalibrate_bn(model, loader):
    batch_norms = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm)
    norms = [m for m in model.modules() if isinstance(m, batch_norms)]
    sums = {m: [0.0, 0.0] for m in norms}
    hooks = []
    count = 0

    def remember(module, inputs, output):
        x = inputs[0]
        dims = [0] + list(range(2, x.dim()))
        n = x.numel() // x.shape[1]
        sums[module][0] = sums[module][0] + x.mean(dim=dims)
        sums[module][1] = sums[module][1] + x.var(dim=dims, correction=0) * n / (n - 1)

    for m in norms:
        hooks.append(m.register_forward_hook(remember))
    modes = {m: m.training for m in model.modules()}
    model.train()
    try:
        with torch.no_grad():
            for batch in loader:
                model(batch[0] if isinstance(batch, (tuple, list)) else batch)
                count += 1
    finally:
        for h in hooks:
            h.remove()
    with torch.no_grad():
        for m in norms:
            m.running_mean.copy_(sums[m][0] / count)
            m.running_var.copy_(sums[m][1] / count)
            m.num_batches_tracked.fill_(count)
    for m, mode in modes.items():
        m.training = mode


class Float32StatsLayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps, self.elementwise_affine = shape, eps, elementwise_affine
        kw = dict(device=device, dtype=dtype)
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(shape, **kw))
            self.bias = nn.Parameter(torch.zeros(shape, **kw)) if bias else None
        else:
            self.weight = self.bias = None

    def forward(self, x):
        dims = [-i for i in range(1, len(self.normalized_shape) + 1)]
        wide = x.double()  # wider than float32 is fine too
        mean = wide.mean(dim=dims, keepdim=True)
        var = ((wide - mean) ** 2).mean(dim=dims, keepdim=True)
        y = (wide - mean) / torch.sqrt(var + self.eps)
        if self.weight is not None:
            y = y * self.weight.double()
        if self.bias is not None:
            y = y + self.bias.double()
        return y.to(x.dtype)
