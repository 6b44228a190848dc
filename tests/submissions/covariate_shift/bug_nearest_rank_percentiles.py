"""KIND: bug
Percentiles by nearest rank (kthvalue) instead of torch.quantile's interpolation.
"""
import torch
from torch import nn
import torch.nn.functional as F


def activation_stats(model: nn.Module, x: torch.Tensor, layer_names: list[str],
                     saturation: float = 0.05) -> dict[str, dict[str, float]]:
    """Run ``model`` once on ``x`` and describe the output of each named submodule.

    For every name in ``layer_names`` (a name from ``model.named_modules()``) the result holds
    the output's ``mean``, ``std`` (population: divide by the number of values), the 15th, 50th
    and 85th percentiles ``p15``, ``p50``, ``p85`` (as ``torch.quantile`` computes them) and
    ``saturated``, the fraction of values below ``saturation`` or above ``1 - saturation``.
    All values are Python floats. The forward pass runs without autograd, in the model's
    current train/eval mode, and every hook is removed afterwards, even if the forward fails.
    """
    modules = dict(model.named_modules())
    outputs = {}
    handles = []
    for name in layer_names:
        def keep(module, inputs, output, name=name):
            outputs[name] = output.detach().clone()
        handles.append(modules[name].register_forward_hook(keep))
    try:
        with torch.no_grad():
            model(x)
    finally:
        for handle in handles:
            handle.remove()
    stats = {}
    for name in layer_names:
        values = outputs[name].flatten().double()
        import math
        q = [values.kthvalue(max(1, math.ceil(p * values.numel()))).values for p in (0.15, 0.50, 0.85)]
        stats[name] = {
            "mean": values.mean().item(),
            "std": values.std(correction=0).item(),
            "p15": q[0].item(),
            "p50": q[1].item(),
            "p85": q[2].item(),
            "saturated": ((values < saturation) | (values > 1 - saturation)).double().mean().item(),
        }
    return stats


def layer_input(model: nn.Module, layer_name: str, x: torch.Tensor) -> torch.Tensor:
    """The input that the submodule ``layer_name`` receives when ``model`` runs on ``x``.

    Uses a forward pre-hook, removed afterwards even if the forward fails; runs without
    autograd in the model's current mode; returns a detached tensor.
    """
    captured = {}

    def keep(module, inputs):
        captured["x"] = inputs[0].detach().clone()

    handle = dict(model.named_modules())[layer_name].register_forward_pre_hook(keep)
    try:
        with torch.no_grad():
            model(x)
    finally:
        handle.remove()
    return captured["x"]


def distribution_shift(before: torch.Tensor, after: torch.Tensor, eps: float = 1e-8) -> dict[str, float]:
    """How far a layer's input distribution moved between two measurements on one probe batch.

    ``before`` and ``after`` are (N, D) inputs of the same layer. Per feature j, with batch mean
    μ and population standard deviation σ (divide by N):

        mean_shift_j  = |μ_after − μ_before| / (σ_before + eps)
        scale_shift_j = |log((σ_after + eps) / (σ_before + eps))|

    Returns ``{"mean_shift": ..., "scale_shift": ...}``, each averaged over the D features, as floats.
    """
    b, a = before.double(), after.double()
    mu_b, mu_a = b.mean(0), a.mean(0)
    sd_b, sd_a = b.std(0, correction=0), a.std(0, correction=0)
    mean_shift = ((mu_a - mu_b).abs() / (sd_b + eps)).mean()
    scale_shift = torch.log((sd_a + eps) / (sd_b + eps)).abs().mean()
    return {"mean_shift": mean_shift.item(), "scale_shift": scale_shift.item()}


class BatchStandardize(nn.Module):
    """Standardize every feature over the batch, with no parameters and no running statistics.

    For (N, D) input, or (N, C, L) with one feature per channel: y = (x − μ) / sqrt(σ² + eps), with
    the batch mean μ and the biased batch variance σ² of each feature, in training and eval
    mode alike. The same as torch.nn.BatchNorm1d(num_features, eps, affine=False,
    track_running_stats=False).
    """

    def __init__(self, num_features, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x):
        dims = [0] + list(range(2, x.dim()))
        var, mean = torch.var_mean(x, dim=dims, correction=0, keepdim=True)
        return (x - mean) / torch.sqrt(var + self.eps)
