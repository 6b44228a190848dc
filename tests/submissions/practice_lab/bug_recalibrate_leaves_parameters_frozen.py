"""KIND: bug
Freezes the model with model.requires_grad_(False) to recalibrate, and never unfreezes it.
"""
import torch
import torch.distributed as dist
from torch import nn


class _AllReduceSum(torch.autograd.Function):
    """all_reduce(SUM) over a process group that autograd can differentiate."""

    @staticmethod
    def forward(ctx, tensor, group):
        ctx.group = group
        tensor = tensor.clone()
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
        return tensor

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM, group=ctx.group)
        return grad, None


class SyncBatchNorm2d(nn.Module):
    """BatchNorm2d whose batch statistics cover every process of ``process_group``."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats, self.process_group = affine, track_running_stats, process_group
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

    def forward(self, x):
        if x.dim() != 4:
            raise ValueError(f"expected 4D input (got {x.dim()}D input)")
        if self.training or not self.track_running_stats:
            # per channel: Σx, Σx² and the count, in float64 so that Σx² − n·μ² does not cancel
            local = torch.cat([x.double().sum((0, 2, 3)), x.double().square().sum((0, 2, 3)),
                               x.new_full((1,), x.numel() // x.shape[1], dtype=torch.float64)])
            if self.training and dist.is_available() and dist.is_initialized():  # as nn.SyncBatchNorm: never in eval
                local = _AllReduceSum.apply(local, self.process_group)
            c = self.num_features
            count = local[2 * c]
            mean = local[:c] / count
            var = local[c:2 * c] / count - mean.square()
            if self.training and count.item() <= 1:
                raise ValueError(f"Expected more than 1 value per channel when training, got input size {list(x.shape)}")
            if self.training and self.track_running_stats:
                self._update_running(mean.detach(), var.detach() * count / (count - 1))
            mean, var = mean.to(x.dtype), var.to(x.dtype)
        else:
            mean, var = self.running_mean, self.running_var
        y = (x - mean[None, :, None, None]) * torch.rsqrt(var[None, :, None, None] + self.eps)
        if self.affine:
            y = y * self.weight[None, :, None, None] + self.bias[None, :, None, None]
        return y

    @torch.no_grad()
    def _update_running(self, mean, unbiased_var):
        self.num_batches_tracked += 1
        factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        self.running_mean.mul_(1 - factor).add_(factor * mean.to(self.running_mean.dtype))
        self.running_var.mul_(1 - factor).add_(factor * unbiased_var.to(self.running_var.dtype))

class MaskedBatchNorm1d(nn.Module):
    """BatchNorm1d over padded sequences: statistics from the real tokens only."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.weight = nn.Parameter(torch.ones(num_features, **factory)) if affine else None
        self.bias = nn.Parameter(torch.zeros(num_features, **factory)) if affine else None
        if track_running_stats:
            self.register_buffer("running_mean", torch.zeros(num_features, **factory))
            self.register_buffer("running_var", torch.ones(num_features, **factory))
            self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long, device=device))
        else:
            self.running_mean = self.running_var = self.num_batches_tracked = None

    def forward(self, x, mask):
        if x.dim() != 3 or mask.shape != (x.shape[0], x.shape[2]):
            raise ValueError(f"expected x (N, C, L) and mask (N, L), got {tuple(x.shape)} and {tuple(mask.shape)}")
        real = mask[:, None, :].to(x.dtype)
        if self.training or not self.track_running_stats:
            count = real.sum()
            if self.training and count.item() <= 1:
                raise ValueError("Expected more than 1 real token per channel when training")
            mean = (x * real).sum((0, 2)) / count
            var = ((x - mean[None, :, None]).square() * real).sum((0, 2)) / count
            if self.training and self.track_running_stats:
                with torch.no_grad():
                    self.num_batches_tracked += 1
                    factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
                    self.running_mean.mul_(1 - factor).add_(factor * mean.detach())
                    self.running_var.mul_(1 - factor).add_(factor * var.detach() * count / (count - 1))
        else:
            mean, var = self.running_mean, self.running_var
        y = (x - mean[None, :, None]) / torch.sqrt(var[None, :, None] + self.eps)
        if self.affine:
            y = y * self.weight[None, :, None] + self.bias[None, :, None]
        return y * real

class FrozenBatchNorm2d(nn.Module):
    """A BatchNorm2d frozen into y = (x − running_mean)·weight/√(running_var + eps) + bias."""

    def __init__(self, num_features, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        factory = {"device": device, "dtype": dtype}
        self.register_buffer("weight", torch.ones(num_features, **factory))
        self.register_buffer("bias", torch.zeros(num_features, **factory))
        self.register_buffer("running_mean", torch.zeros(num_features, **factory))
        self.register_buffer("running_var", torch.ones(num_features, **factory))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        state_dict.pop(prefix + "num_batches_tracked", None)  # a BatchNorm2d's counter: nothing to freeze
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(self, x):
        scale = self.weight * torch.rsqrt(self.running_var + self.eps)
        shift = self.bias - self.running_mean * scale
        return x * scale[None, :, None, None] + shift[None, :, None, None]

def recalibrate_bn(model: nn.Module, loader) -> None:
    """Recompute every BatchNorm's running statistics as the plain average over the loader's batches."""
    batch_norms = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm)
    norms = [m for m in model.modules() if isinstance(m, batch_norms)]
    momenta = [m.momentum for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average: every batch weighs the same
    was_training = model.training
    model.train()  # every module, also a BatchNorm put in eval mode on its own
    model.requires_grad_(False)
    with torch.no_grad():
        for batch in loader:
            model(batch[0] if isinstance(batch, (list, tuple)) else batch)
    for m, momentum in zip(norms, momenta):
        m.momentum = momentum
    model.train(was_training)

class Float32StatsLayerNorm(nn.Module):
    """LayerNorm whose statistics are computed in float32 for float16 and bfloat16 inputs."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape, self.eps, self.elementwise_affine = tuple(normalized_shape), eps, elementwise_affine
        factory = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.ones(self.normalized_shape, **factory)) if elementwise_affine else None
        self.bias = nn.Parameter(torch.zeros(self.normalized_shape, **factory)) if elementwise_affine and bias else None

    def forward(self, x):
        if not self.normalized_shape:
            raise RuntimeError("normalized_shape must not be empty")
        dims = tuple(range(-len(self.normalized_shape), 0))
        wide = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        var, mean = torch.var_mean(wide, dim=dims, correction=0, keepdim=True)
        y = (wide - mean) * torch.rsqrt(var + self.eps)
        if self.weight is not None:
            y = y * self.weight.to(y.dtype)
        if self.bias is not None:
            y = y + self.bias.to(y.dtype)
        return y.to(x.dtype)
