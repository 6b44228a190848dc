"""Checks for the exercise ``07_practice_lab``: five layers and tools that fix real failures.

* ``SyncBatchNorm2d``: run in 2 or 3 processes of one gloo process group
  (:mod:`autograder.exercises.ex07_practice_lab.observe_distributed`); every replica's output, input gradient and
  buffers must equal one ``torch.nn.BatchNorm2d`` on the concatenated batch, and its parameter
  gradients that BatchNorm's gradients from its own rows (the share that data parallelism then
  all-reduces). Without a process group it is a ``BatchNorm2d`` (:mod:`autograder.core.engine`).
* ``MaskedBatchNorm1d(x, mask)``: statistics over the real tokens of padded sequences, compared
  with torch's ``BatchNorm1d`` on the real tokens alone (:class:`MaskedReference`).
* ``FrozenBatchNorm2d``: the eval-mode affine map of a BatchNorm2d, buffers only, loading a
  ``BatchNorm2d``'s ``state_dict`` (:class:`FrozenReference`).
* ``recalibrate_bn(model, loader)``: the running statistics ``torch.optim.swa_utils.update_bn``
  computes (:mod:`autograder.exercises.ex07_practice_lab.observe_recalibrate`).
* ``Float32StatsLayerNorm``: a LayerNorm for float16/bfloat16 inputs whose statistics neither
  overflow nor lose their precision, against torch's LayerNorm in the same dtype.

Each public function is one graded part; ``full=False`` runs the visible cases a visible test
cell uses (on the notebook's device), ``full=True`` adds the hidden cases of
:mod:`autograder.exercises.ex07_practice_lab.hidden`, which only the grader holds (and runs
them on every available device).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim import swa_utils

from autograder.core import batch_norm_hints, engine, forbidden, withheld, structure
from autograder.exercises.ex03_layer_norm import checks as layer_norm
from autograder.core.devices import devices_for
from autograder.core.engine import ALL_ASPECTS, BUFFERS, FORWARD_ASPECTS, GRAD_INPUT, OUTPUT, Case, Finding, Step
from autograder.core.inputs import channel_input, channel_state, random_tensor
from autograder.core.messages import fail, shape_str
from autograder.core.numerics import closest_explanation, discrepancy, matches
from autograder.sandbox import observe
from autograder.exercises.ex07_practice_lab.observe_recalibrate import architecture, build_model, make_loader
from autograder.core.seeding import generator
from autograder.core.side import StudentCodeFailed, student
from autograder.core.wire import RemoteError

F64, F32, F16, BF16 = torch.float64, torch.float32, torch.float16, torch.bfloat16
CPU = torch.device("cpu")
REPLICA_SECONDS = 30.0  # per run of the replicas; a correct run takes under a second


def _dims(x: torch.Tensor) -> list[int]:
    return [0] + list(range(2, x.dim()))


# --- part 1: SyncBatchNorm2d ------------------------------------------------------------------

SYNC = "SyncBatchNorm2d"


class _ReplicaCase:
    """One run of the student's layer in ``len(sizes)`` processes: replica r gets ``sizes[r]`` samples."""

    def __init__(self, sizes, channels=3, spatial=(4, 4), kwargs=None, dtype=F64, modes=("train", "train", "eval"),
                 seed=0, mean=0.0, note="", groups=None):
        self.sizes, self.channels, self.kwargs, self.dtype, self.modes = list(sizes), channels, dict(kwargs or {}), dtype, modes
        self.groups = groups  # lists of ranks, each its own process_group; None: one group of all
        self.state = channel_state(channels, seed, self.kwargs.get("affine", True))
        self.steps = []
        for i, mode in enumerate(modes):
            x = channel_input((sum(sizes), channels, *spatial), seed=seed * 10 + i, mean=mean).to(dtype).double()
            # the gradient each replica feeds back (observe.run_steps: fixed per shard shape), concatenated
            g = None if mode.endswith("no-grad") else torch.cat(
                [observe.upstream_gradient(x[self.rows(r)], dtype).double() for r in range(len(sizes))])
            self.steps.append((mode.split("-")[0], x, g))
        self.note = note

    def describe(self) -> str:
        kw = "".join(f", {k}={v!r}" for k, v in self.kwargs.items())
        text = (f"{SYNC}({self.channels}{kw}) in {str(self.dtype).removeprefix('torch.')} on {len(self.sizes)} "
                f"processes with {' + '.join(map(str, self.sizes))} samples")
        if self.groups:
            text += ", process groups " + " and ".join("{" + ", ".join(map(str, g)) + "}" for g in self.groups)
        return text + (f", {self.note}" if self.note else "")

    def rows(self, rank: int) -> slice:
        start = sum(self.sizes[:rank])
        return slice(start, start + self.sizes[rank])

    def group_of(self, rank: int) -> list[int]:
        return next((g for g in self.groups if rank in g), [rank]) if self.groups else list(range(len(self.sizes)))

    def group_batch(self, x: torch.Tensor, rank: int) -> tuple[torch.Tensor, slice]:
        """The concatenated batch of ``rank``'s process group, and ``rank``'s rows in it."""
        group = self.group_of(rank)
        start = sum(self.sizes[r] for r in group[:group.index(rank)])
        return torch.cat([x[self.rows(r)] for r in group]), slice(start, start + self.sizes[rank])

    def plain_steps(self) -> list[dict]:
        return [{"mode": mode, "shards": [x[self.rows(r)].clone() for r in range(len(self.sizes))], "no_grad": g is None}
                for mode, x, g in self.steps]


def _local_eval(case: _ReplicaCase, mode: str) -> bool:
    """Whether this step normalizes each shard on its own, as ``nn.SyncBatchNorm`` does in eval mode
    without running statistics: it synchronizes only in training mode."""
    return mode == "eval" and not case.kwargs.get("track_running_stats", True)


def _reference_replicas(case: _ReplicaCase, dtype) -> list[list[dict]]:
    """torch's BatchNorm2d on each process group's concatenated batch (on each process's own shard
    in eval mode without running statistics, as ``nn.SyncBatchNorm``), computing in ``dtype``, cut
    into what each replica should report: per step, per rank, the output, gradients and buffers."""
    world = len(case.sizes)
    steps: list[list] = [[None] * world for _ in case.steps]
    for group in case.groups or [list(range(world))]:
        bn = nn.BatchNorm2d(case.channels, **case.kwargs, dtype=dtype)
        observe.load_state(bn, case.state, case.dtype)
        params = [p for p in (bn.weight, bn.bias) if p is not None]
        for i, (mode, x, g) in enumerate(case.steps):
            bn.train(mode == "train")
            batches = [[rank] for rank in group] if _local_eval(case, mode) else [group]
            for together in batches:
                xg = torch.cat([x[case.rows(r)] for r in together]).to(case.dtype).to(dtype).requires_grad_(g is not None)
                gg = None if g is None else torch.cat([g[case.rows(r)] for r in together]).to(dtype)
                with torch.enable_grad() if g is not None else torch.no_grad():
                    y = bn(xg)
                grad_x = None if gg is None else torch.autograd.grad((y * gg).sum(), xg, retain_graph=True)[0]
                global_grads = dict(zip(("weight", "bias"), torch.autograd.grad((y * gg).sum(), params, retain_graph=True))) \
                    if gg is not None and params else None
                buffers = {n: (None if getattr(bn, n) is None else getattr(bn, n).detach().clone())
                           for n in ("running_mean", "running_var", "num_batches_tracked")}
                start = 0
                for rank in together:
                    rows = slice(start, start + case.sizes[rank])
                    start += case.sizes[rank]
                    grads = {"weight": None, "bias": None}
                    if gg is not None and params:
                        grads = dict(zip(("weight", "bias"), torch.autograd.grad((y[rows] * gg[rows]).sum(), params, retain_graph=True)))
                    steps[i][rank] = {"output": y[rows].detach(), "grad_input": None if grad_x is None else grad_x[rows],
                                      "grad_params": grads, "buffers": buffers, "global_grads": global_grads}
    return steps


def _sync_hint(case: _ReplicaCase, step: int, rank: int, name: str, got: torch.Tensor, exact: dict) -> str | None:
    mode, x, _ = case.steps[step]
    shard = x[case.rows(rank)]
    if case.groups and name == "output" and mode == "train":
        everyone = x  # statistics over every process instead of this process's group
        var, mean = torch.var_mean(everyone, dim=_dims(everyone), correction=0, keepdim=True)
        wrong = ((shard - mean) / torch.sqrt(var + case.kwargs.get("eps", 1e-5)))
        if case.kwargs.get("affine", True):
            wrong = wrong * case.state["weight"].reshape(1, -1, 1, 1) + case.state["bias"].reshape(1, -1, 1, 1)
        if matches(wrong, got, exact["output"]):
            return ("your layer reduced over every process, not over its process_group: pass "
                    "group=self.process_group to the collectives (None means the default group).")
    group = case.group_of(rank)
    x = case.group_batch(x, rank)[0]
    eps, momentum = case.kwargs.get("eps", 1e-5), case.kwargs.get("momentum", 0.1)

    def normalized(mean, var):
        y = (shard - mean.reshape(1, -1, 1, 1)) / torch.sqrt(var.reshape(1, -1, 1, 1) + eps)
        if case.kwargs.get("affine", True):
            y = y * case.state["weight"].reshape(1, -1, 1, 1) + case.state["bias"].reshape(1, -1, 1, 1)
        return y

    if name == "output" and _local_eval(case, mode):
        var, mean = torch.var_mean(x, dim=_dims(x), correction=0)
        if matches(normalized(mean, var), got, exact["output"]):
            return ("your layer synchronized in eval mode. nn.SyncBatchNorm synchronizes only in training mode "
                    "(need_sync requires self.training): in eval mode without running statistics each process "
                    "normalizes its own shard with that shard's statistics, as a plain BatchNorm2d does.")
    if name == "output" and mode == "train":
        var, mean = torch.var_mean(shard, dim=_dims(shard), correction=0)
        if matches(normalized(mean, var), got, exact["output"]):
            return ("each process normalized its own shard with its own statistics: that is plain BatchNorm under "
                    "data parallelism. A synchronized BatchNorm all-reduces the per-channel sum, sum of squares and "
                    "count over the process group first, so every process normalizes with the whole batch's mean "
                    "and variance.")
        whole = case.steps[step][1]
        shards = [whole[case.rows(r)] for r in group]
        stats = [torch.var_mean(s, dim=_dims(s), correction=0) for s in shards]
        counts = torch.tensor([s.numel() / s.shape[1] for s in shards], dtype=F64)[:, None]
        variances, means = torch.stack([v for v, _ in stats]), torch.stack([m for _, m in stats])
        weighted = (counts * means).sum(0) / counts.sum(), (counts * variances).sum(0) / counts.sum()
        averaged = means.mean(0), variances.mean(0)
        text = ("you averaged the per-process variances, which leaves out how far each process's mean lies from the "
                "global mean: σ² = Σ_r n_r·(σ_r² + (μ_r − μ)²) / n. All-reduce Σx, Σx² and the count instead, then "
                "σ² = Σx²/n − μ² (as the formula above).")
        if any(matches(normalized(m, v), got, exact["output"]) for m, v in (weighted, averaged)):
            return text
    if name in ("weight.grad", "bias.grad") and exact.get("global_grads"):
        total = exact["global_grads"][name.split(".")[0]]
        if matches(total, got, exact["grad_params"][name.split(".")[0]]):
            return ("your parameter gradient is the sum over all processes. nn.SyncBatchNorm leaves each process its "
                    "own share (Σ over its rows of g·x̂ for weight, Σ g for bias); DistributedDataParallel all-reduces "
                    "parameter gradients afterwards, so reducing them here would count them twice.")
    if name == "input gradient":
        return ("the forward matches but the gradient does not: the global mean and variance depend on every "
                "process's inputs, so the backward needs the all-reduced Σg and Σg·x̂ over the whole batch (as "
                "nn.SyncBatchNorm's backward does), or an all-reduce that autograd can differentiate. "
                "A plain dist.all_reduce is invisible to autograd.")
    if name == "running_var" and momentum is not None and mode == "train" and case.kwargs.get("track_running_stats", True):
        n_local = shard.numel() // shard.shape[1]
        candidates = batch_norm_hints.running_var_misreadings(
            exact["buffers_before"]["running_var"], [batch_norm_hints.per_channel(x)], momentum, 0,
            [(n_local, f"this process's count {n_local}")], "the whole batch over the process group, which the "
            "all-reduce of the counts gives")
        return closest_explanation(candidates, got, exact["buffers"]["running_var"])
    return None


def _judge_replicas(case: _ReplicaCase, reports: list) -> None:
    __tracebackhide__ = True
    expected = _reference_replicas(case, case.dtype)
    exact = _reference_replicas(case, F64)
    for rank, report in enumerate(reports):
        if type(report) is not dict:
            raise StudentCodeFailed("a replica sent something that is not a report")
        if "error" in report:
            error = report["error"]
            fail(f"{case.describe()}: process {rank} could not run your {SYNC}: "
                 f"{getattr(error, 'name', 'error')}: {error}")
        forbidden.report_normalization_ops([str(o) for o in report.get("normalization_ops", [])], SYNC)
    initial = case.state.get("running_var", torch.ones(case.channels, dtype=F64))
    buffers_before = [{"running_var": initial} for _ in reports]  # per rank: its group's running_var before the step
    for i, (mode, _, g) in enumerate(case.steps):
        for rank, report in enumerate(reports):
            steps = report.get("steps")
            if type(steps) is not list or len(steps) != len(case.steps) or type(steps[i]) is not dict:
                raise StudentCodeFailed("a replica's report does not describe every step")
            s, r, e = steps[i], expected[i][rank], exact[i][rank]
            e = {**e, "buffers_before": buffers_before[rank]}
            where = (f"{case.describe()}: process {rank} ({case.sizes[rank]} samples), step {i + 1} of "
                     f"{len(case.steps)} ({'training' if mode == 'train' else 'eval'} forward"
                     f"{' under torch.no_grad()' if g is None and mode == 'train' else ''})")
            if isinstance(s.get("error"), RemoteError):
                fail(f"{where}: your {SYNC} raised {s['error'].name}: {s['error']}")
            pairs = [("output", s.get("output"), r["output"], e["output"])]
            if g is not None:
                pairs.append(("input gradient", s.get("grad_input"), r["grad_input"], e["grad_input"]))
                for name in ("weight", "bias"):
                    if r["grad_params"][name] is not None:
                        pairs.append((f"{name}.grad", (s.get("grad_params") or {}).get(name), r["grad_params"][name],
                                      e["grad_params"][name]))
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                if r["buffers"][name] is not None:
                    pairs.append((name, (s.get("buffers") or {}).get(name), r["buffers"][name], e["buffers"][name]))
            for name, mine, theirs, best in pairs:
                if not isinstance(mine, torch.Tensor):
                    fail(f"{where}: your `{name}` is {'missing' if mine is None or isinstance(mine, dict) else type(mine).__name__}; "
                         "torch.nn.BatchNorm2d's is a tensor (register buffers with register_buffer).")
                if mine.shape != theirs.shape or mine.dtype != theirs.dtype:
                    fail(f"{where}: your `{name}` is {mine.dtype} {shape_str(mine.shape)}, torch.nn.BatchNorm2d's "
                         f"on the concatenated batch is {theirs.dtype} {shape_str(theirs.shape)}.")
                if not mine.is_floating_point():
                    if not torch.equal(mine, theirs):
                        fail(f"{where}: your `{name}` is {mine.tolist()}, torch's is {theirs.tolist()}.")
                    continue
                gap = discrepancy(mine, theirs, best)
                if gap is not None:
                    hint = _sync_hint(case, i, rank, name, mine, e)
                    if _local_eval(case, mode):
                        reference = (f"torch.nn.BatchNorm2d on this process's {case.sizes[rank]} samples, as "
                                     "nn.SyncBatchNorm in eval mode")
                    else:
                        reference = (f"torch.nn.BatchNorm2d on the whole batch of "
                                     f"{sum(case.sizes[r] for r in case.group_of(rank))}")
                    fail(f"{where}: your `{name}` differs from the reference ({reference}): max error "
                         f"{gap.max_error:.3g} (yours {gap.shown[0]}, torch {gap.shown[1]}; "
                         f"allowed {gap.allowed:.1g})."
                         + (f"\nLikely cause: {hint}" if hint else ""))
        if mode == "train" and exact[i][0]["buffers"]["running_var"] is not None:
            buffers_before = [{"running_var": exact[i][rank]["buffers"]["running_var"]} for rank in range(len(reports))]


def _replica_cases(full: bool) -> list[_ReplicaCase]:
    cases = [_ReplicaCase([2, 3], seed=1), _ReplicaCase([3, 3], dtype=F32, mean=5.0, seed=2, note="float32, mean 5")]
    return cases + (withheld.of(__package__).replica_cases() if full else [])


def _single_process_case(shape, kwargs=None, seed=0, modes=("train", "train", "eval"), **d) -> Case:
    """The layer without a process group, against a BatchNorm2d."""
    steps = [Step(m, channel_input(shape, seed=seed * 10 + i)) for i, m in enumerate(modes)]
    return Case(SYNC, (shape[1],), dict(kwargs or {}), steps, state=channel_state(shape[1], seed),
                note="torch.distributed not initialized", reference="torch.nn.BatchNorm2d", **d)


def _single_process_cases(full: bool) -> list[Case]:
    cases = []
    for device in devices_for(full):
        cases.append(_single_process_case((4, 3, 2, 2), seed=20, device=device))
        cases += (withheld.of(__package__).single_process_cases(device) if full else [])
    return cases


def _timed_out(report: dict) -> bool:
    replicas = report.get("replicas") if type(report) is dict else None
    return type(replicas) is list and any(
        type(r) is dict and isinstance(r.get("error"), RemoteError) and r["error"].name == "Timeout" for r in replicas)


def check_sync_batch_norm(SyncBatchNorm2d, full: bool = False) -> None:
    """Without a process group a BatchNorm2d; in 2 or 3 gloo processes, BatchNorm2d on the whole batch."""
    __tracebackhide__ = True
    cls = forbidden.own_classes((SyncBatchNorm2d, SYNC))[0]
    attributes = ("num_features", "eps", "momentum", "affine", "track_running_stats")
    for kwargs in [{}] + (withheld.of(__package__).sync_structure_kwargs() if full else []):
        structure.compare_structure(cls, nn.BatchNorm2d, (3,), kwargs, CPU, F32, SYNC, attributes)
    for case in _single_process_cases(full):
        engine.compare_case(cls, nn.BatchNorm2d, case, ALL_ASPECTS, batch_norm_hints.hint, SYNC)
    for case in _replica_cases(full):
        for attempt in range(2):  # a replica that timed out once is given a second chance (a loaded machine)
            report = cls.report("observe_distributed.run_replicas", (case.channels,), case.kwargs, case.state,
                                case.plain_steps(), case.dtype, REPLICA_SECONDS, case.groups)
            if not _timed_out(report):
                break
        if "unsupported_platform" in report:
            fail(f"{case.describe()}: this test needs Linux (the course hub). It starts its processes with fork and "
                 f"prctl and joins them over the interface lo, which this computer ({report['unsupported_platform']}) "
                 "does not have. Your layer was not judged here: run this cell on the course hub.")
        if "error" in report:
            fail(f"{case.describe()}: the processes could not start: {report['error']}")
        replicas = report.get("replicas")
        if type(replicas) is not list or len(replicas) != len(case.sizes):
            raise StudentCodeFailed("the replicas' reports are missing")
        _judge_replicas(case, replicas)


# --- part 2: MaskedBatchNorm1d ----------------------------------------------------------------

MASKED = "MaskedBatchNorm1d"


class MaskedReference(nn.BatchNorm1d):
    """torch's BatchNorm1d on the real tokens only: ``x`` (N, C, L), ``mask`` (N, L), True where a
    token is real; padded positions of the output are 0."""

    def forward(self, x, mask):  # noqa: D102 - the class docstring says it
        if x.dim() != 3 or mask.shape != (x.shape[0], x.shape[2]):
            raise ValueError(f"expected x of shape (N, C, L) and mask (N, L), got {tuple(x.shape)} and {tuple(mask.shape)}")
        tokens = x.transpose(1, 2)[mask]  # (T, C)
        out = torch.zeros(x.shape[0], x.shape[2], x.shape[1], dtype=x.dtype, device=x.device)
        out = out.index_put((mask,), super().forward(tokens))
        return out.transpose(1, 2)


def _lengths_mask(lengths, length: int) -> torch.Tensor:
    return torch.arange(length)[None, :] < torch.tensor(lengths)[:, None]


def _masked_case(lengths, channels=3, kwargs=None, dtype=F64, device=CPU, modes=("train", "train", "eval"), seed=0,
                 mean=0.0, pad_value=None, note="", left=False) -> Case:
    length = max(lengths) + 2
    mask = _lengths_mask(lengths, length)
    if left:  # padding before the tokens, as left-padded batches for decoders have it
        mask = mask.flip(1)
    steps = []
    for i, mode in enumerate(modes):
        x = channel_input((len(lengths), channels, length), seed=seed * 10 + i, mean=mean)
        if pad_value is not None:
            x = x.masked_fill(~mask[:, None, :], pad_value)
        steps.append(Step(mode.split("-")[0], x, mode.endswith("no-grad"), (mask,), f"with lengths {list(lengths)}"))
    kwargs = dict(kwargs or {})
    return Case(MASKED, (channels,), kwargs, steps, dtype, device, channel_state(channels, seed, kwargs.get("affine", True)),
                note, reference="torch.nn.BatchNorm1d on the real tokens only")


def _masked_cases(full: bool) -> list[Case]:
    cases = []
    for device in devices_for(full):
        d = dict(device=device)
        cases += [_masked_case([5, 2, 4], seed=1, **d),
                  _masked_case([3, 1], dtype=F32, seed=2, pad_value=100.0, note="padding filled with 100", **d)]
        cases += (withheld.of(__package__).masked_cases(device) if full else [])
    return cases


def _masked_hint(f: Finding) -> str | None:
    x, mask = f.step.x.double(), f.step.extra[0]
    eps = f.case.kwargs.get("eps", 1e-5)
    if f.aspect == OUTPUT and f.step.mode == "train" and f.student is not None and f.exact is not None:
        var, mean = torch.var_mean(x, dim=(0, 2), correction=0, keepdim=True)
        everywhere = (x - mean) / torch.sqrt(var + eps)
        if f.case.kwargs.get("affine", True):
            everywhere = everywhere * f.case.state["weight"].reshape(1, -1, 1) + f.case.state["bias"].reshape(1, -1, 1)
        real = mask[:, None, :]
        if matches(torch.where(real, everywhere, torch.zeros_like(x)), f.student, f.exact) or matches(everywhere, f.student, f.exact):
            return ("your statistics include the padded positions. Count and sum only where mask is True: "
                    "n = mask.sum(), μ = Σ(x·mask)/n, σ² = Σ((x−μ)²·mask)/n.")
        weights = real.to(x.dtype)
        n, positions = weights.sum(), x.shape[0] * x.shape[2]
        right_mean = (x * weights).sum((0, 2), keepdim=True) / n
        over_all_mean = (x * weights).sum((0, 2), keepdim=True) / positions
        for mean in (right_mean, over_all_mean):
            var = ((x - mean) ** 2 * weights).sum((0, 2), keepdim=True) / positions
            guess = (x - mean) / torch.sqrt(var + eps)
            if f.case.kwargs.get("affine", True):
                guess = guess * f.case.state["weight"].reshape(1, -1, 1) + f.case.state["bias"].reshape(1, -1, 1)
            if matches(guess * weights, f.student, f.exact) or matches(guess, f.student, f.exact):
                return (f"you summed over the real tokens but divided by N·L = {positions}, every position; divide by the "
                        f"number of real tokens, n = mask.sum() = {int(n)}, in the mean and in the variance.")
    if f.aspect == OUTPUT and f.student is not None and f.exact is not None:  # in every mode: eval too
        real = mask[:, None, :].to(f.student.device)
        if matches(torch.where(real, f.student, torch.zeros_like(f.student)).to(F64), f.exact, None) and not matches(f.student, f.exact, None):
            index = f.discrepancy.index if f.discrepancy is not None else ()
            where = (f", and position {list(index)} is padding (mask[{index[0]}, {index[-1]}] is False)"
                     if len(index) == 3 and not bool(mask[index[0], index[-1]]) else "")
            return (f"the real tokens are right{where}: the padded positions of the output must be 0"
                    f"{', in eval mode too' if f.step.mode == 'eval' else ''} (mask them after normalizing).")
    lengths = mask.sum(1, keepdim=True)
    prefix = torch.arange(mask.shape[1])[None, :] < lengths
    if f.aspect == OUTPUT and f.step.mode == "train" and f.student is not None and not torch.equal(prefix, mask):
        real = prefix[:, None, :].to(x.dtype)
        n = real.sum()
        mean = (x * real).sum((0, 2), keepdim=True) / n
        var = ((x - mean) ** 2 * real).sum((0, 2), keepdim=True) / n
        guess = (x - mean) / torch.sqrt(var + eps)
        if f.case.kwargs.get("affine", True):
            guess = guess * f.case.state["weight"].reshape(1, -1, 1) + f.case.state["bias"].reshape(1, -1, 1)
        if matches(guess * real, f.student, f.exact):
            return ("you treated the first mask.sum(1) positions of each sequence as its tokens; padding can come "
                    "first too (left padding). Use the mask itself.")
    old, tracked = f.state_before.get("running_var"), f.state_before.get("num_batches_tracked")
    if f.aspect == BUFFERS and f.name == "running_var" and f.student is not None and isinstance(old, torch.Tensor) \
            and isinstance(tracked, torch.Tensor):
        tokens = x.transpose(1, 2)[mask].T  # (C, n): the real tokens of each channel
        positions = x.shape[0] * x.shape[2]
        candidates = batch_norm_hints.running_var_misreadings(
            old, [tokens], f.case.kwargs.get("momentum", 0.1), int(tracked), [(positions, f"N·L = {positions}")],
            "the real tokens, mask.sum()")
        return closest_explanation(candidates, f.student, f.exact)
    return None


def check_masked_batch_norm(MaskedBatchNorm1d, full: bool = False) -> None:
    """Outputs, gradients and running statistics against BatchNorm1d on the real tokens alone."""
    __tracebackhide__ = True
    cls = forbidden.own_classes((MaskedBatchNorm1d, MASKED))[0]
    for case in _masked_cases(full):
        engine.compare_case(cls, MaskedReference, case, ALL_ASPECTS, _masked_hint, MASKED)


# --- part 3: FrozenBatchNorm2d ----------------------------------------------------------------

FROZEN = "FrozenBatchNorm2d"


class FrozenReference(nn.Module):
    """A BatchNorm2d frozen into its eval-mode affine map, as ``torchvision.ops.FrozenBatchNorm2d``:
    buffers ``weight``, ``bias``, ``running_mean``, ``running_var`` and no parameters."""

    def __init__(self, num_features, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        for name, fill in (("weight", 1.0), ("bias", 0.0), ("running_mean", 0.0), ("running_var", 1.0)):
            self.register_buffer(name, torch.full((num_features,), fill, device=device, dtype=dtype))

    def forward(self, x):  # noqa: D102
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, False, 0.0, self.eps)


FROZEN_BUFFERS = ("A frozen BatchNorm learns nothing: register weight, bias, running_mean and running_var as buffers "
                  "(register_buffer), none as nn.Parameter.")


def _frozen_case(shape, kwargs=None, seed=0, modes=("train", "eval", "train"), **d) -> Case:
    """The layer with the buffers of a trained BatchNorm2d, against that BatchNorm2d in eval mode."""
    state = channel_state(shape[1], seed, tracked=True)
    steps = [Step(m.split("-")[0], channel_input(shape, seed=seed * 10 + i, mean=2.0), m.endswith("no-grad"))
             for i, m in enumerate(modes)]
    return Case(FROZEN, (shape[1],), dict(kwargs or {}), steps, state=state,
                note="its buffers loaded from a trained BatchNorm2d", reference="BatchNorm2d in eval mode", **d)


def _frozen_cases(full: bool) -> list[Case]:
    cases = []
    for device in devices_for(full):
        cases.append(_frozen_case((4, 3, 3, 3), seed=1, device=device))
        cases += (withheld.of(__package__).frozen_cases(device) if full else [])
    return cases


def _frozen_hint(f: Finding) -> str | None:
    if f.aspect == BUFFERS:
        return "a frozen BatchNorm never changes its buffers in forward: no running-statistics update."
    if f.aspect != OUTPUT or f.student is None or f.exact is None:
        return None
    x, state, eps = f.step.x.double(), f.case.state, f.case.kwargs.get("eps", 1e-5)
    view = (1, -1, 1, 1)
    var, mean = torch.var_mean(x, dim=_dims(x), correction=0, keepdim=True)
    batch = (x - mean) / torch.sqrt(var + eps) * state["weight"].reshape(view) + state["bias"].reshape(view)
    if matches(batch, f.student, f.exact):
        return ("a frozen BatchNorm uses its running statistics in training mode too: it never computes batch "
                "statistics, so fine-tuning with tiny batches cannot disturb it.")
    outside = ((x - state["running_mean"].reshape(view)) / (torch.sqrt(state["running_var"].reshape(view)) + eps)
               * state["weight"].reshape(view) + state["bias"].reshape(view))
    if matches(outside, f.student, f.exact):
        return "eps belongs inside the square root: y = (x − running_mean)·weight/√(running_var + eps) + bias."
    return "y = (x − running_mean)·weight/√(running_var + eps) + bias, per channel, in training and eval mode."


def _check_loads_batch_norm(cls, device) -> None:
    """A trained BatchNorm2d's state_dict (num_batches_tracked included) loads, strict=True."""
    __tracebackhide__ = True
    bn = nn.BatchNorm2d(4, device=device)
    with torch.no_grad():
        for i, name in enumerate(("weight", "bias", "running_mean", "running_var")):
            getattr(bn, name).copy_(random_tensor((4,), 60 + i, 0.5, 1.5))
        bn.num_batches_tracked.fill_(7)
    layer = student(cls, FROZEN).construct((4,), {"device": device})
    if isinstance(layer, RemoteError):
        fail(f"{FROZEN}(4) raised {layer.name}: {layer}")
    loaded = layer.call("observe.load_state_dict", dict(bn.state_dict()))
    if "error" in loaded:
        fail(f"{FROZEN}(4).load_state_dict(batch_norm.state_dict()) raised {loaded['error'].name}: {loaded['error']}\n"
             "Likely cause: a BatchNorm2d's state_dict also holds num_batches_tracked, which a frozen layer does not "
             "keep: drop that key before loading (override _load_from_state_dict, as torchvision's FrozenBatchNorm2d "
             "does), so that strict loading still works.")
    nested = layer.call("observe.load_nested_state_dict", {f"0.{k}": v for k, v in bn.state_dict().items()})
    if "error" in nested:
        fail(f"nn.Sequential({FROZEN}(4)).load_state_dict(nn.Sequential(batch_norm).state_dict()) raised "
             f"{nested['error'].name}: {nested['error']}\nLikely cause: inside a model the keys carry a prefix "
             "('0.num_batches_tracked'): drop prefix + 'num_batches_tracked' in _load_from_state_dict, which "
             "every submodule's loading goes through (load_state_dict itself is only called on the outer model).")
    for name in ("weight", "bias", "running_mean", "running_var"):
        mine = loaded["state"].get(name)
        if not isinstance(mine, torch.Tensor) or mine.shape != (4,) or not torch.equal(mine.cpu(), getattr(bn, name).cpu()):
            fail(f"{FROZEN}(4).load_state_dict(batch_norm.state_dict()): your `{name}` does not hold the BatchNorm's values.")


def check_frozen_batch_norm(FrozenBatchNorm2d, full: bool = False) -> None:
    """Buffers only, a BatchNorm2d's state_dict loads, and eval-mode BatchNorm2d in both modes."""
    __tracebackhide__ = True
    cls = forbidden.own_classes((FrozenBatchNorm2d, FROZEN))[0]
    for device in devices_for(full):
        for kwargs in [{}] + (withheld.of(__package__).frozen_structure_kwargs() if full else []):
            structure.compare_structure(cls, FrozenReference, (3,), kwargs, device, F32, FROZEN, ("eps",),
                                        FROZEN_BUFFERS, FROZEN_BUFFERS)
        _check_loads_batch_norm(cls, device)
    for case in _frozen_cases(full):
        engine.compare_case(cls, FrozenReference, case, ALL_ASPECTS, _frozen_hint, FROZEN)


# --- part 4: recalibrate_bn -------------------------------------------------------------------

RECALIBRATE = "recalibrate_bn"


def _recalibration_setting(seed: int, momenta=(0.1, None, 0.3), training=True, sizes=(8, 8, 8),
                           eval_modules=(), kinds=("2d", "2d", "1d")) -> tuple[dict, dict, list]:
    """A model description, its state with stale running statistics, and the loader's batches."""
    spec = {"channels": 2, "hidden": 4, "momenta": list(momenta), "training": training, "eval_modules": list(eval_modules),
            "kinds": list(kinds)}
    state = {}
    for i, (name, value) in enumerate(architecture(spec).state_dict().items()):
        if name.endswith("num_batches_tracked"):
            state[name] = torch.tensor(500)
        elif name.endswith("running_mean"):
            state[name] = random_tensor(tuple(value.shape), seed * 100 + i, -3.0, 3.0)  # stale: far from the data's
        elif name.endswith("running_var"):
            state[name] = random_tensor(tuple(value.shape), seed * 100 + i, 5.0, 9.0)
        else:
            state[name] = random_tensor(tuple(value.shape), seed * 100 + i, -0.6, 0.6)
    batches = [channel_input((n, 2, 6, 6), seed=seed * 10 + j, mean=1.0, std=2.0) for j, n in enumerate(sizes)]
    return spec, state, batches


def _recalibration_cases(full: bool) -> list[tuple[str, int, dict]]:
    cases = [("a model in training mode, a loader of input batches", 1, {}),
             ("a model in eval mode, a loader of (input, target) pairs", 2, {"training": False, "pairs": True})]
    return cases + (withheld.of(__package__).recalibration_cases() if full else [])


def _batch_norm_layers(spec: dict) -> dict[str, str]:
    """The model's BatchNorms: their prefix in the state_dict ("9") and their class ("BatchNorm1d")."""
    return {name: type(m).__name__ for name, m in architecture(spec).named_modules()
            if isinstance(m, nn.modules.batchnorm._BatchNorm)}


def _layers(names: list[str]) -> str:
    """"layer 9 (BatchNorm1d)", "layers 1 (BatchNorm2d) and 4 (BatchNorm2d)"."""
    return ("layer " if len(names) == 1 else "layers ") + " and ".join(names)


def _unrecalibrated(got: dict, state: dict, layers: dict[str, str]) -> dict[str, list[str]]:
    """The BatchNorm layers whose running statistics are still the stale ones (``"stale"``), or
    those reset but never updated (``"reset"``: zeros and ones), by name ("9 (BatchNorm1d)")."""
    found: dict[str, list[str]] = {"stale": [], "reset": []}
    for index, kind in layers.items():
        mean, var = got.get(f"{index}.running_mean"), got.get(f"{index}.running_var")
        if not isinstance(mean, torch.Tensor) or not isinstance(var, torch.Tensor):
            continue
        old_mean, old_var = state[f"{index}.running_mean"].to(mean.dtype), state[f"{index}.running_var"].to(var.dtype)
        if torch.equal(mean.cpu(), old_mean) and torch.equal(var.cpu(), old_var):
            found["stale"].append(f"{index} ({kind})")
        elif not bool(mean.any()) and bool((var == 1).all()):
            found["reset"].append(f"{index} ({kind})")
    return found


def _unrecalibrated_hint(got: dict, spec: dict, state: dict, layer: str | None = None) -> str | None:
    """Names the BatchNorms a recalibration left out (``layer``: only if it is one of them)."""
    layers = _batch_norm_layers(spec)
    found = _unrecalibrated(got, state, layers)
    named = f"{layer} ({layers[layer]})" if layer in layers else None
    if found["stale"] and (named is None or named in found["stale"]):
        return (f"the running statistics of {_layers(found['stale'])} were not recalibrated: they still hold "
                "the stale values. Reset and recalibrate every BatchNorm of the model, whatever its class (update_bn "
                "takes every nn.modules.batchnorm._BatchNorm: BatchNorm1d, 2d, 3d and SyncBatchNorm).")
    if found["reset"] and (named is None or named in found["reset"]):
        return (f"the running statistics of {_layers(found['reset'])} were reset but never updated: the "
                "forwards ran with that BatchNorm in eval mode. Call model.train() before the loop: it puts every "
                "module in training mode, also a BatchNorm that was switched to eval on its own.")
    return None


RECALIBRATION_ADVICE = {  # (reset, momentum=None) -> what a layer recalibrated so is missing
    (False, False): "your running statistics still remember the stale ones, and the last batches weigh most: "
                    "reset them first (reset_running_stats()) and average with momentum=None, as update_bn does.",
    (False, True): "your running statistics still remember the stale ones: reset them first "
                   "(reset_running_stats(), which also sets num_batches_tracked to 0).",
    (True, False): "you reset the statistics but kept each BatchNorm's momentum, so the last batches weigh more. "
                   "Set momentum=None while recalibrating (every batch weighs the same) and restore it afterwards.",
}


def _recalibrated_so(spec, state, batches, reset: bool, cumulative: bool) -> dict:
    """The state a recalibration that resets (or not) and sets momentum=None (or not) leaves."""
    model = build_model(spec, state).train()
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            if reset:
                m.reset_running_stats()
            if cumulative:
                m.momentum = None
    with torch.no_grad():
        for x in batches:
            model(x)
    return model.state_dict()


def _recalibration_hint(name: str, got: dict, spec, state, batches, expected: dict) -> str | None:
    """Which BatchNorms were left out, or which of two steps of update_bn (reset the statistics,
    average with momentum=None) was."""
    layers = _batch_norm_layers(spec)
    layer = name.rsplit(".", 1)[0]
    if layer not in layers or not name.endswith(("running_mean", "running_var")):
        return None
    left_out = _unrecalibrated_hint(got, spec, state, layer)
    if left_out:
        return left_out
    right = [f"{index} ({kind})" for index, kind in layers.items()
             if all(discrepancy(got[f"{index}.{b}"], expected[f"{index}.{b}"], expected[f"{index}.{b}"]) is None
                    for b in ("running_mean", "running_var"))]
    for (reset, cumulative), text in RECALIBRATION_ADVICE.items():
        if not matches(_recalibrated_so(spec, state, batches, reset, cumulative)[name], got[name], expected[name]):
            continue
        if (reset, cumulative) == (False, False) and right:
            kind = layers[layer]
            return (f"layer {layer} ({kind}) went through an ordinary training step (not reset, its own momentum) "
                    f"while {_layers(right)} {'was' if len(right) == 1 else 'were'} recalibrated: your function leaves out {kind}. Take every "
                    "BatchNorm of the model, as update_bn does (isinstance(m, nn.modules.batchnorm._BatchNorm) covers "
                    "BatchNorm1d, 2d, 3d and SyncBatchNorm).")
        return text
    return None


def check_recalibrate_bn(recalibrate_bn, full: bool = False) -> None:
    """The model's state after ``recalibrate_bn(model, loader)`` equals update_bn's; the forwards
    ran without autograd; modes, momenta and parameters are as they were; torch's update_bn
    itself earns nothing."""
    __tracebackhide__ = True
    fn = student(recalibrate_bn, RECALIBRATE)
    for description, seed, options in _recalibration_cases(full):
        spec, state, batches = _recalibration_setting(seed, options.get("momenta", (0.1, None, 0.3)),
                                                      options.get("training", True), options.get("sizes", (8, 8, 8)),
                                                      options.get("eval_modules", ()), options.get("kinds", ("2d", "2d", "1d")))
        pairs = options.get("pairs", False)
        where = f"{RECALIBRATE}(model, loader) with {description}"
        report = fn.report("observe_recalibrate.recalibrate", spec, state, batches, pairs)
        if report.get("update_bn"):
            fail(f"{where}: your function calls torch.optim.swa_utils.update_bn. The exercise is to write it "
                 "yourself; this part earns no points.")
        if "error" in report:
            fail(f"{where} raised {report['error'].name}: {report['error']}")
        model = build_model(spec, state)
        loader = make_loader(batches, pairs)
        modes_before = [m.training for m in model.modules()]
        swa_utils.update_bn(loader, model)
        expected = model.state_dict()
        got = report.get("state")
        if type(got) is not dict or set(got) != set(expected):
            fail(f"{where}: the model's state_dict keys changed: {sorted(got) if type(got) is dict else got}.")
        if report.get("autograd_left_off"):
            fail(f"{where}: recalibrate_bn left autograd switched off: later training in your notebook would compute "
                 "no gradients; use `with torch.no_grad():`, which switches it back on when the block ends.")
        frozen = report.get("parameters_frozen")
        if frozen:
            names = ", ".join(map(str, frozen[:3])) + (", ..." if len(frozen) > 3 else "") if type(frozen) is list else ""
            fail(f"{where}: recalibrate_bn left {len(frozen) if type(frozen) is list else 'some'} parameters frozen "
                 f"(requires_grad=False afterwards: {names}): later training in your notebook would not update them. "
                 "Leave requires_grad alone: `with torch.no_grad():` is enough to run the forwards without autograd.")
        if report.get("parameters_changed"):
            fail(f"{where}: your function changed the parameters {report['parameters_changed']}; recalibration only "
                 "recomputes the BatchNorms' running statistics (run the forwards under torch.no_grad()).")
        if report.get("gradients_left"):
            fail(f"{where}: parameters have gradients afterwards ({report['gradients_left'][:3]}); no backward is needed.")
        for name, value in expected.items():
            mine = got[name]
            if not isinstance(mine, torch.Tensor) or mine.shape != value.shape or mine.dtype != value.dtype:
                fail(f"{where}: `{name}` is {type(mine).__name__} after your call, not a {value.dtype} tensor of shape "
                     f"{shape_str(value.shape)}.")
            if not value.is_floating_point():
                if not torch.equal(mine, value):
                    hint = _unrecalibrated_hint(got, spec, state, name.rsplit(".", 1)[0])
                    fail(f"{where}: `{name}` is {mine.item()} after your call, update_bn's is {value.item()}. update_bn "
                         "resets the running statistics (num_batches_tracked = 0), then counts one per batch."
                         + (f"\nLikely cause: {hint}" if hint else ""))
                continue
            gap = discrepancy(mine, value, value)
            if gap is not None:
                hint = _recalibration_hint(name, got, spec, state, batches, expected)
                fail(f"{where}: `{name}` differs from update_bn's: max error {gap.max_error:.3g} (yours "
                     f"{gap.shown[0]}, update_bn {gap.shown[1]})."
                     + (f"\nLikely cause: {hint}" if hint else ""))
        with_autograd = report.get("forwards_with_autograd")
        if with_autograd:
            fail(f"{where}: {with_autograd} of the {report.get('batch_norm_forwards')} BatchNorm forwards ran with "
                 "autograd on. Run the loop under torch.no_grad(), as update_bn does: no gradient is needed, and "
                 "with autograd on every forward keeps its activations for a backward that never comes.")
        modes_after = report.get("modes_after")
        if modes_after != modes_before and modes_after != [spec["training"]] * len(modes_before):
            fail(f"{where}: the model's train/eval modes differ after your call. Put the model in training mode to "
                 "recompute the statistics, then restore the mode it had (model.train(was_training)).")
        if report.get("momenta_after") != report.get("momenta_before"):
            fail(f"{where}: the BatchNorms' momenta are {report.get('momenta_after')} after your call, "
                 f"{report.get('momenta_before')} before: restore each momentum you changed.")


# --- part 5: Float32StatsLayerNorm --------------------------------------------------------------

HALF = "Float32StatsLayerNorm"


def _half_case(shape, normalized_shape, kwargs=None, dtype=F16, device=CPU, mean=0.0, std=1.0, seed=0, note=""):
    """Rows of ``mean + std·N(0, 1)`` plus a per-row offset of up to ``std``: large, but finite in ``dtype``."""
    kwargs = dict(kwargs or {})
    g = generator(seed)
    steps = []
    for i, mode in enumerate(("train", "eval", "train-no-grad")):
        x = mean + std * (torch.randn(shape, generator=g, dtype=F64) + torch.rand(shape[:-1] + (1,), generator=g, dtype=F64))
        steps.append(Step(mode.split("-")[0], x, mode.endswith("no-grad")))
    state = layer_norm._state(normalized_shape, seed, kwargs.get("elementwise_affine", True), kwargs.get("bias", True))
    return Case(HALF, (normalized_shape,), kwargs, steps, dtype, device, state, note, reference="torch.nn.LayerNorm")


def _half_cases(full: bool) -> list[Case]:
    cases = []
    for device in devices_for(full):
        d = dict(device=device)
        cases += [
            _half_case((4, 6, 64), 64, std=300.0, seed=1, note="std 300: (x − μ)² overflows float16 (max 65504)", **d),
            _half_case((3, 5, 32), 32, dtype=BF16, mean=1000.0, seed=2, note="mean 1000", **d),
        ]
        cases += (withheld.of(__package__).half_cases(device) if full else [])
    return cases


def _half_hint(f: Finding) -> str | None:
    if f.aspect in (OUTPUT, GRAD_INPUT) and f.student is not None and not bool(torch.isfinite(f.student).all()):
        return (f"your result has inf or nan where torch's is finite: the statistics overflowed or underflowed in "
                f"{str(f.case.dtype).removeprefix('torch.')}. Compute mean and variance in float32 (x.float()), "
                "normalize there, and cast the result back to the input's dtype.")
    if f.aspect == OUTPUT and f.case.dtype in (F16, BF16) and not _like_low_precision(f):
        return layer_norm.hint(f)
    if f.aspect == OUTPUT and f.case.dtype == F16:
        return ("the statistics overflowed or lost precision in float16: its largest value is 65504, so the square "
                "of a deviation x − μ above about 256 is inf (and 1/√inf = 0), and eps=1e-8 rounds to 0. Compute mean "
                "and variance in float32 (x.float()), normalize there, and cast only the result back to float16.")
    if f.aspect == OUTPUT and f.case.dtype == BF16:
        return ("the statistics lost precision in bfloat16, which keeps 8 significant bits: values near 1000 are 4 "
                "apart, so a mean of 1000 is only known to ±2, more than the spread of the data here. Compute them in "
                "float32 and cast only the result back.")
    return layer_norm.hint(f)


def _like_low_precision(f: Finding) -> bool:
    """Whether the student's output is what statistics computed in the input's dtype give."""
    dtype, shape = f.case.dtype, layer_norm._as_tuple(f.case.args[0])
    x = f.step.x.to(dtype)
    dims = tuple(range(-len(shape), 0))
    mean = x.mean(dim=dims, keepdim=True)
    var = ((x - mean) * (x - mean)).mean(dim=dims, keepdim=True)
    y = (x - mean) * torch.rsqrt(var + torch.tensor(f.case.kwargs.get("eps", 1e-5), dtype=dtype))
    if "weight" in f.case.state:
        y = y * f.case.state["weight"].to(dtype)
    if "bias" in f.case.state:
        y = y + f.case.state["bias"].to(dtype)
    s = f.student.to(F64)
    if bool((torch.isfinite(y) != torch.isfinite(s)).any()) or matches(y.nan_to_num().to(F64), s.nan_to_num(), f.exact):
        return True
    # Whatever order the student's sums take: on this input, statistics in ``dtype`` are wrong
    # (an overflow, or off by more than 1 %), which is what the case is there to show.
    exact = f.step.x.to(F64).var(dim=dims, unbiased=False, keepdim=True)
    return bool((~torch.isfinite(var)).any() or ((var.to(F64) - exact).abs() > 0.01 * exact).any())


def check_float32_stats_layer_norm(Float32StatsLayerNorm, full: bool = False) -> None:
    """Outputs and gradients in float16 and bfloat16 against torch's LayerNorm in the same dtype."""
    __tracebackhide__ = True
    cls = forbidden.own_classes((Float32StatsLayerNorm, HALF))[0]
    for case in _half_cases(full):
        engine.compare_case(cls, nn.LayerNorm, case, FORWARD_ASPECTS, _half_hint, HALF)
