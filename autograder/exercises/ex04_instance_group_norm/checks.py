"""Checks for the exercise ``04_instance_group_norm``: ``GroupNorm`` and ``InstanceNorm2d``.

Every part runs the shared engine against ``torch.nn.GroupNorm`` / ``torch.nn.InstanceNorm2d``.
The inputs include non-contiguous and channels_last tensors, on which ``view`` fails.
"""
from __future__ import annotations

import torch
from torch import nn

from autograder.core import engine, forbidden, withheld, integrity, structure
from autograder.core.devices import devices_for
from autograder.core.engine import ALL_ASPECTS, BUFFERS, FORWARD_ASPECTS, OUTPUT, RAISES, Case, Finding, Step
from autograder.core.inputs import channel_input, channel_state
from autograder.core.side import Student
from autograder.core.wire import RemoteError
from autograder.core.messages import fail
from autograder.core.norm_hints import Grouping, make_hint
from autograder.core.numerics import closest_explanation

F64, F32 = torch.float64, torch.float32
REFERENCES = {"GroupNorm": nn.GroupNorm, "InstanceNorm2d": nn.InstanceNorm2d}



def _per_channel(v: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return v.reshape([1, -1] + [1] * (like.dim() - 2)) if like.dim() > 1 else v


# --- hints ----------------------------------------------------------------------------------

def _affine(xhat: torch.Tensor, f: Finding) -> torch.Tensor:
    state = f.case.state
    if "weight" not in state:
        return xhat
    channel_dim = 0 if f.case.layer == "InstanceNorm2d" and xhat.dim() == 3 else 1
    shape = [1] * xhat.dim()
    shape[channel_dim] = -1
    return xhat * state["weight"].reshape(shape) + state["bias"].reshape(shape)


def _group_groupings(x: torch.Tensor, f: Finding):
    groups = f.case.args[0]
    n, c = x.shape[0], x.shape[1]
    right = Grouping((2,), lambda t: t.reshape(n, groups, -1))
    wrong = [
        (Grouping((1, 3), lambda t: t.reshape(n, c // groups, groups, -1)),
         f"your groups take every {groups}th channel (strided); GroupNorm's groups are contiguous blocks: "
         f"channels 0…{c // groups - 1} form group 0, so reshape to (N, {groups}, C/G·spatial) = x.reshape(N, G, -1)."),
        (Grouping((0, 2), lambda t: t.reshape(n, groups, -1)),
         "your statistics mix the samples of the batch; GroupNorm computes them per sample (dim 0 is never reduced)."),
    ]
    if x.dim() > 2 and groups != c:
        wrong.append((Grouping(tuple(range(2, x.dim()))),
                      f"you take one statistic per channel (that is InstanceNorm); a group holds C/G = {c // groups} channels."))
    if groups != 1:
        wrong.append((Grouping(tuple(range(1, x.dim()))),
                      "you take one statistic per sample over all channels (that is GroupNorm with one group, "
                      f"i.e. LayerNorm); use {groups} groups."))
    return right, wrong


def _instance_groupings(x: torch.Tensor, f: Finding):
    spatial = tuple(range(x.dim() - 2, x.dim()))
    wrong = []
    if x.dim() == 4:
        wrong.append((Grouping((0,) + spatial),
                      "your statistics are over the batch and space (that is BatchNorm); InstanceNorm normalizes "
                      "each channel of each sample on its own, over H and W only."))
        wrong.append((Grouping((1,) + spatial),
                      "you take one statistic per sample over all channels; InstanceNorm takes one per (sample, channel)."))
    return Grouping(spatial), wrong


def _instance_extra(f: Finding) -> str | None:
    tracked = f.state_before.get("running_mean") is not None
    if f.aspect == OUTPUT and f.step.mode == "eval" and tracked:
        x = f.step.x.to(f.case.dtype).double()
        eps = f.case.kwargs.get("eps", 1e-5)
        batch_stats = _affine(standardize_instances(x, eps), f)
        return closest_explanation([(batch_stats, (
            "with track_running_stats=True, eval mode normalizes with running_mean and running_var, "
            "not with the statistics of the current sample."))], f.student, f.exact)
    if f.aspect == BUFFERS:
        return _instance_buffer_hint(f)
    if f.aspect == RAISES:
        if "ValueError" in f.detail and "num_features" in f.detail:
            return ("with affine=True, refuse an input whose channel count differs from num_features: "
                    "raise ValueError like torch (with affine=False torch only warns).")
        if "3D or 4D" in f.detail:
            return "InstanceNorm2d takes (N, C, H, W) or an unbatched (C, H, W); raise ValueError for other ranks."
    return None


def standardize_instances(x: torch.Tensor, eps: float) -> torch.Tensor:
    return Grouping(tuple(range(x.dim() - 2, x.dim()))).normalize(x, eps)


def _instance_buffer_hint(f: Finding) -> str | None:
    if f.detail == "carries autograd history":
        return (f"{f.name} was updated from tensors that require grad; update buffers under torch.no_grad() "
                "(or from detached statistics).")
    if f.name == "num_batches_tracked":
        return ("InstanceNorm never counts batches: torch registers num_batches_tracked (for state_dict "
                "compatibility with BatchNorm) but leaves it at its value.")
    before = f.state_before.get(f.name)
    if f.student is None or f.exact is None or before is None:
        return None
    if f.step.mode == "eval":
        return "eval mode must not change the running statistics."
    x = f.step.x.to(f.case.dtype).double()
    if x.dim() == 3:
        x = x.unsqueeze(0)
    values = x.flatten(2)  # (N, C, H·W)
    momentum = f.case.kwargs.get("momentum", 0.1)
    old = before.double()
    if f.name == "running_mean":
        batch = values.mean(2).mean(0)
        alternatives = []
    else:
        batch = values.var(2, correction=1).mean(0)
        m = values.shape[2]
        alternatives = [
            (values.var(2, correction=0).mean(0),
             f"running_var averages the per-instance *unbiased* variances (÷ (H·W − 1) = {m - 1}), as BatchNorm does."),
            (values.transpose(0, 1).reshape(values.shape[1], -1).var(1, correction=1),
             "running_var is the mean over the batch of each instance's own unbiased variance, not the "
             "variance of all N·H·W values of a channel together (that is BatchNorm's)."),
        ]
    candidates = [(old, f"{f.name} is not updated in training mode although track_running_stats=True.")]
    candidates.append(((1 - momentum) * batch + momentum * old,
                       "the momentum is reversed: running = (1 − momentum)·running + momentum·batch."))
    candidates += [((1 - momentum) * old + momentum * value, text) for value, text in alternatives]
    return closest_explanation(candidates, f.student, f.exact)


def _group_extra(f: Finding) -> str | None:
    if f.aspect == RAISES and "torch raises RuntimeError" in f.detail:
        return ("like torch, refuse an input whose channel count is not num_channels (with affine) or not "
                "divisible by num_groups, or that has fewer than 2 dimensions: raise RuntimeError.")
    return None


group_hint = make_hint(_group_groupings, _affine, _group_extra)
instance_hint = make_hint(_instance_groupings, _affine, _instance_extra)
HINTS = {"GroupNorm": group_hint, "InstanceNorm2d": instance_hint}


# --- cases ----------------------------------------------------------------------------------

def _layout(x: torch.Tensor, layout: str) -> torch.Tensor:
    if layout == "channels_last":
        return x.contiguous(memory_format=torch.channels_last)
    if layout == "transposed":  # the same values, H and W swapped in memory: not contiguous
        return x.transpose(-1, -2).contiguous().transpose(-1, -2)
    return x




def _case(layer, args, shape, kwargs=None, dtype=F64, device=None, mean=0.0, std=1.0, note="", seed=0,
          steps=("train", "eval", "train-no-grad"), layout="contiguous"):
    kwargs = dict(kwargs or {})
    built = []
    for i, mode in enumerate(steps):
        x = _layout(channel_input(shape, seed=seed * 100 + i, mean=mean, std=std, channel_dim=1 if len(shape) > 3 or layer == "GroupNorm" else 0), layout)
        built.append(Step("eval" if mode == "eval" else "train", x, mode.endswith("no-grad")))
    channels = args[1] if layer == "GroupNorm" else args[0]
    affine = kwargs.get("affine", layer == "GroupNorm")
    tracked = kwargs.get("track_running_stats", False)
    if layout != "contiguous":
        note = f"{note}, {layout} input" if note else f"{layout} input"
    return Case(layer, args, kwargs, built, dtype, device or torch.device("cpu"), channel_state(channels, seed, affine, tracked), note)


def _group_cases(full: bool) -> list[Case]:
    cases = []
    for device in devices_for(full):
        d = dict(device=device)
        cases += [
            _case("GroupNorm", (8, 32), (2, 32, 3, 4), seed=1, note="32 channels in 8 groups", **d),
            _case("GroupNorm", (2, 6), (3, 6, 5), seed=2, note="(N, C, L)", **d),
            # visible: x.view(N, G, -1) fails on it, as on any non-contiguous input; float32 results
            # are judged against torch's float64 answer (autograder.core.numerics)
            _case("GroupNorm", (3, 6), (2, 6, 4, 5), dtype=F32, seed=15, layout="channels_last", **d),
        ]
        cases += withheld.of(__package__).group_cases(device) if full else []
    return cases


# Training twice (once without gradients), eval, training again: what running statistics go through.
TRACKED_STEPS = ("train", "train", "train-no-grad", "eval", "train")


def _instance_cases(full: bool) -> list[Case]:
    cases = []
    for device in devices_for(full):
        d = dict(device=device)
        cases += [
            _case("InstanceNorm2d", (3,), (2, 3, 4, 5), seed=21, note="defaults: affine=False, no running stats", **d),
            _case("InstanceNorm2d", (3,), (2, 3, 4, 5), {"affine": True, "track_running_stats": True}, seed=22,
                  steps=TRACKED_STEPS, **d),
        ]
        cases += withheld.of(__package__).instance_cases(device) if full else []
    return cases


def _input_steps(first_seed: int, *shapes) -> list[Step]:
    """One training step per input shape, for the input checks: torch must accept or refuse each."""
    return [Step("train", channel_input(shape, seed=first_seed + i)) for i, shape in enumerate(shapes)]


def _group_input_steps(*shapes) -> list[Step]:
    return _input_steps(60, *shapes)


def _instance_input_steps(*shapes) -> list[Step]:
    return _input_steps(70, *shapes)


def _group_input_cases(full: bool) -> list[Case]:
    cases = []
    for device in devices_for(full):
        cases.append(Case("GroupNorm", (2, 4), {"affine": False}, _group_input_steps((2, 4, 3), (2, 5, 3)), device=device))
        cases += withheld.of(__package__).group_input_cases(device) if full else []
    return cases


def _instance_input_cases(full: bool) -> list[Case]:
    cases = []
    for device in devices_for(full):
        cases.append(Case("InstanceNorm2d", (3,), {"affine": True}, _instance_input_steps((2, 3, 4, 4), (2, 4, 4, 4)),
                          device=device))
        cases += withheld.of(__package__).instance_input_cases(device) if full else []
    return cases


# --- the graded parts -------------------------------------------------------------------------

def _check_class(cls, name: str) -> Student:
    """The student's class as the checks hold it, once it is known to be a module of their own."""
    __tracebackhide__ = True
    return forbidden.own_classes((cls, name))[0]


def _compare(cls, cases, aspects) -> None:
    __tracebackhide__ = True
    for case in cases:
        engine.compare_case(cls, REFERENCES[case.layer], case, aspects, HINTS[case.layer], case.layer)


def check_group_norm_forward(GroupNorm, full: bool = False) -> None:
    """GroupNorm's outputs and gradients against torch's, including non-contiguous inputs."""
    __tracebackhide__ = True
    GroupNorm = _check_class(GroupNorm, "GroupNorm")
    _compare(GroupNorm, _group_cases(full), FORWARD_ASPECTS)


GROUP_PARAMETERS = "Register γ as `weight` (ones) and β as `bias` (zeros), shape (num_channels,): one per channel, not per group."


def check_group_norm_contract(GroupNorm, full: bool = False) -> None:
    """The divisibility ValueError, attributes, per-channel parameters, state_dict, input checks."""
    __tracebackhide__ = True
    GroupNorm = _check_class(GroupNorm, "GroupNorm")
    built = GroupNorm.construct((3, 8))
    if isinstance(built, RemoteError) and not built.is_a(ValueError):
        fail(f"GroupNorm(3, 8) raised {built.name}: {built}; torch raises ValueError "
             "(\"num_channels (8) must be divisible by num_groups (3)\").")
    if not isinstance(built, RemoteError):
        fail("GroupNorm(3, 8) was built, but 8 channels cannot form 3 equal groups: raise "
             "ValueError(\"num_channels (8) must be divisible by num_groups (3)\") in the constructor, as torch does.")
    variants = [((4, 8), {}), ((2, 6), {"affine": False})]
    variants += withheld.of(__package__).group_contract_variants() if full else []
    attributes = ("num_groups", "num_channels", "eps", "affine")
    for device in devices_for(full):
        for dtype in [F32] + (withheld.of(__package__).contract_dtypes() if full else []):
            for args, kwargs in variants:
                structure.compare_structure(GroupNorm, nn.GroupNorm, args, kwargs, device, dtype, "GroupNorm",
                                            attributes, GROUP_PARAMETERS, "GroupNorm keeps no running statistics, so it has no buffers.")
    _compare(GroupNorm, _group_input_cases(full), (RAISES,))


def check_instance_norm_forward(InstanceNorm2d, full: bool = False) -> None:
    """InstanceNorm2d's outputs, gradients and running statistics (when tracked) against torch's."""
    __tracebackhide__ = True
    InstanceNorm2d = _check_class(InstanceNorm2d, "InstanceNorm2d")
    _compare(InstanceNorm2d, _instance_cases(full), ALL_ASPECTS)


def check_instance_norm_contract(InstanceNorm2d, full: bool = False) -> None:
    """Defaults (affine=False, no running stats), parameters, buffers, state_dict, input checks."""
    __tracebackhide__ = True
    InstanceNorm2d = _check_class(InstanceNorm2d, "InstanceNorm2d")
    variants = [{}, {"affine": True}, {"track_running_stats": True}]
    variants += withheld.of(__package__).instance_contract_variants() if full else []
    attributes = ("num_features", "eps", "momentum", "affine", "track_running_stats")
    for device in devices_for(full):
        for dtype in [F32] + (withheld.of(__package__).contract_dtypes() if full else []):
            for kwargs in variants:
                structure.compare_structure(InstanceNorm2d, nn.InstanceNorm2d, (5,), kwargs, device, dtype,
                                            "InstanceNorm2d", attributes)
    structure.compare_structure(InstanceNorm2d, nn.InstanceNorm2d, (4,), {}, None, None, "InstanceNorm2d", attributes)
    _compare(InstanceNorm2d, _instance_input_cases(full), (RAISES,))


integrity.remember()
