"""Train a small network with a student's ``GhostBatchNorm`` for exercise 06's sweep.

The network is ``Linear(16 → 32, no bias) → GhostBatchNorm(32, virtual_batch_size) → ReLU →
Linear(32 → 4)``, trained with plain SGD on a fixed synthetic classification task (a random
linear teacher with label noise): 60 steps of 64 samples drawn from 1024, learning rate 0.3.
The first layer's He-initialized weights are multiplied by ``scale``. Everything is seeded, in
float32 on the CPU, so the notebook and the grader get the same losses from the same layer.

:func:`sweep` trains once per (scale, virtual batch size) and reports the mean training loss of
the last 10 steps, as plain data; :mod:`autograder.exercises.ex06_training_dynamics.checks` runs it (in the notebook,
and again where the notebook is graded) and the grader reads the result.  Each run also records,
at every step, what went into and came out of the layer (its input and output, and the gradients
of the loss with respect to both) so the grader can replay torch's ghost BatchNorm on the same
values: a layer that behaves differently only inside the sweep does not get to choose the result.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from autograder.core.wire import RemoteError

INPUTS, HIDDEN, CLASSES, SAMPLES = 16, 32, 4, 1024
BATCH, STEPS, LEARNING_RATE, LAST = 64, 60, 0.3, 10


def _task(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Generator]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(SAMPLES, INPUTS, generator=g)
    teacher = torch.randn(INPUTS, CLASSES, generator=g)
    y = (x @ teacher + 0.5 * torch.randn(SAMPLES, CLASSES, generator=g)).argmax(1)
    return x, y, g


def _plain(t) -> torch.Tensor | None:
    return torch.Tensor.as_subclass(t, torch.Tensor).detach().clone() if isinstance(t, torch.Tensor) else None


def train_once(GhostBatchNorm, scale: float, virtual_batch_size: int, seed: int = 0, record: list | None = None) -> float:
    """The mean training loss of the last steps of one run.  With ``record``, each step appends
    ``{"input", "output", "output_grad", "input_grad"}`` of the layer (a value the layer did not
    give, such as the gradient of a detached output, is None)."""
    x, y, g = _task(seed)
    first = nn.Linear(INPUTS, HIDDEN, bias=False)
    last = nn.Linear(HIDDEN, CLASSES)
    with torch.no_grad():
        first.weight.copy_(torch.randn(HIDDEN, INPUTS, generator=g) * math.sqrt(2 / INPUTS) * scale)
        last.weight.copy_(torch.randn(CLASSES, HIDDEN, generator=g) * math.sqrt(1 / HIDDEN))
        last.bias.zero_()
    model = nn.Sequential(first, GhostBatchNorm(HIDDEN, virtual_batch_size), nn.ReLU(), last).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    losses = []
    for _ in range(STEPS):
        rows = torch.randint(0, SAMPLES, (BATCH,), generator=g)
        hidden = first(x[rows])  # the Sequential's forward, written out to see the layer's input and output
        seen = hidden.detach().clone()
        hidden.retain_grad()
        normalized = model[1](hidden)
        if isinstance(normalized, torch.Tensor) and normalized.requires_grad:
            normalized.retain_grad()
        loss = F.cross_entropy(last(model[2](normalized)), y[rows])
        optimizer.zero_grad()
        loss.backward()
        if record is not None:
            record.append({"input": seen, "output": _plain(normalized),
                           "output_grad": _plain(getattr(normalized, "grad", None)), "input_grad": _plain(hidden.grad)})
        optimizer.step()
        losses.append(float(loss.detach()))
    return sum(losses[-LAST:]) / LAST


def sweep(GhostBatchNorm, scales: list, virtual_batch_sizes: list) -> dict:
    """``{"losses": rows of scales × columns of virtual batch sizes, "records": the steps of each
    run, in the same order}``, or ``{"error": ..., "at": [scale, virtual batch size]}`` for the
    first run the layer could not do."""
    rows, records = [], []
    for scale in scales:
        row = []
        for size in virtual_batch_sizes:
            record: list = []
            try:
                row.append(float(train_once(GhostBatchNorm, scale, size, record=record)))
            except Exception as error:  # noqa: BLE001 - the student's exception is the observation
                return {"error": RemoteError.of(error), "at": [scale, size]}
            records.append(record)
        rows.append(row)
    return {"losses": rows, "records": records}
