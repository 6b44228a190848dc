"""How close is close enough.

A float64 result must match torch's float64 result to ``FLOAT64_RTOL`` of the tensor's scale:
every correct algorithm (two-pass, Welford, float64 sums, einsum) lands within ~1e-12 there,
and every bug we know of is off by 1e-6 or more.

A float32 (or half) result is judged against the *exact* answer, torch's layer run in float64
on the same input and state.  The error allowed is the largest of three:

- ``ERROR_MULTIPLE`` times the error torch itself makes in that dtype;
- for float32, ``NEARBY_MULTIPLE`` times how far the exact answer moves when every input
  element moves by float32's machine epsilon, x·(1 ± 2^-23) (:func:`nearby_spread`, from the
  ``nearby`` answers the engine computes);
- ``LOW_PRECISION_FLOOR`` of the scale.

A fixed ``atol`` against torch would fail correct students where torch happens to be accurate
and they are merely as good as a careful two-pass implementation (at mean 1e3, torch's float32
BatchNorm is ~5e-5 off the exact answer, a correct two-pass one ~1.5e-4, the one-pass
E[x^2] - E[x]^2 formula ~0.2).  Torch's own error alone is not enough either: how close torch's
float32 mean lands to the true one is luck, so at a large mean torch is sometimes far more
accurate than float32 arithmetic must be.  In 1,500 draws of BatchNorm2d at mean 1e3, a correct
two-pass layer's weight.grad error reached 69 times torch's, and the solution of exercise 02
failed 5 of 1,500 random course inputs.  The nearby spread does not depend on that luck:
against the larger of torch's error and the spread, the two-pass layer stayed below 1.9 times
(800 draws each at spreads 0.3, 1 and 2).  Half results are left to torch's error and the
floor: their output rounding, which torch shares, dominates.  The one-pass formula still fails
the large-mean float32 cases of every catalogue that holds it, with the least room on
LayerNorm(64) at mean 1e3 (about 4 times the allowance, the same under the old rule).  Across the correct submissions in
tests/submissions the worst ratio to torch's own error is 8.3 (plain float32 einsum sums).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from autograder.core.messages import two_values

FLOAT64_RTOL = 1e-9
ERROR_MULTIPLE = 50.0
NEARBY_MULTIPLE = 10.0
LOW_PRECISION_FLOOR = {torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}


@dataclass(frozen=True)
class Discrepancy:
    """Where and by how much a student's tensor is off."""

    max_error: float
    allowed: float
    index: tuple[int, ...]
    student_value: float
    expected_value: float

    @property
    def shown(self) -> tuple[str, str]:
        """The student's and the expected value as a message prints them: with enough digits
        to differ (:func:`autograder.core.messages.two_values`)."""
        return two_values(self.student_value, self.expected_value)


def _scale(t: torch.Tensor) -> float:
    return max(1.0, float(t.abs().max())) if t.numel() else 1.0


def nearby_spread(exact: torch.Tensor, nearby: list[torch.Tensor]) -> float:
    """The largest distance from ``exact`` to torch's float64 answers for nearby inputs:
    max_k max_i |nearby_k[i] - exact[i]| over the elements finite in both (0 without any)."""
    e = exact.detach().to("cpu", torch.float64)
    spread = 0.0
    for answer in nearby:
        n = answer.detach().to("cpu", torch.float64)
        if n.shape != e.shape:
            continue
        gaps = (n - e).abs()[torch.isfinite(n) & torch.isfinite(e)]
        if gaps.numel():
            spread = max(spread, float(gaps.max()))
    return spread


def discrepancy(
    student: torch.Tensor, same_dtype_reference: torch.Tensor, exact: torch.Tensor,
    nearby: list[torch.Tensor] = (),
) -> Discrepancy | None:
    """Compare ``student`` with torch; return ``None`` when it is close enough.

    ``same_dtype_reference`` is torch's answer in the student's dtype, ``exact`` is torch's
    answer in float64 for the same input and state, ``nearby`` torch's float64 answers for the
    input moved by float32's machine epsilon (:func:`nearby_spread`).  Non-finite values must match
    exactly.
    """
    s = student.detach().to("cpu", torch.float64)
    e = exact.detach().to("cpu", torch.float64)
    r = same_dtype_reference.detach().to("cpu", torch.float64)
    scale = _scale(e[torch.isfinite(e)])
    if student.dtype == torch.float64:
        allowed = FLOAT64_RTOL * scale
    else:
        torch_error = float((r - e).abs().nan_to_num(0.0).max()) if e.numel() else 0.0
        floor = LOW_PRECISION_FLOOR.get(student.dtype, 1e-5) * scale
        spread = nearby_spread(exact, list(nearby)) if student.dtype == torch.float32 else 0.0
        allowed = max(ERROR_MULTIPLE * torch_error, NEARBY_MULTIPLE * spread, floor)
    same_nonfinite = torch.equal(torch.isnan(s), torch.isnan(e)) and torch.equal(
        torch.isinf(s) & (s > 0), torch.isinf(e) & (e > 0)
    )
    error = (s - e).abs()
    error = torch.where(torch.isfinite(e) & torch.isfinite(s), error, torch.zeros_like(error))
    if not same_nonfinite:
        bad = torch.isnan(s) != torch.isnan(e)
        bad |= torch.isinf(s) != torch.isinf(e)
        flat = int(bad.reshape(-1).nonzero()[0])
        index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), s.shape))
        return Discrepancy(float("inf"), allowed, index, float(s[index]), float(e[index]))
    if s.numel() == 0:
        return None
    max_error = float(error.max())
    if max_error <= allowed:
        return None
    flat = int(error.reshape(-1).argmax())
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), s.shape))
    return Discrepancy(max_error, allowed, index, float(s[index]), float(e[index]))


def matches(candidate: torch.Tensor, student: torch.Tensor, exact: torch.Tensor | None = None) -> bool:
    """Whether ``student`` is what a hypothesised misconception would have produced.

    Without ``exact``: equal to 1e-6 of the scale.  With it: at least 20 times closer to the
    candidate than to the right answer, so that a tiny numerical difference is never blamed on
    a misconception whose effect is tiny too.
    """
    c = candidate.detach().to("cpu", torch.float64)
    s = student.detach().to("cpu", torch.float64)
    if c.shape != s.shape or not bool(torch.isfinite(c).all()):
        return False
    to_candidate = float((c - s).abs().max()) if c.numel() else 0.0
    if exact is None:
        return to_candidate <= 1e-6 * _scale(c)
    to_exact = float((exact.detach().to("cpu", torch.float64) - s).abs().max())
    return to_candidate <= 0.05 * to_exact


def closest_explanation(candidates, student: torch.Tensor, exact: torch.Tensor) -> str | None:
    """Of ``(value, explanation)`` pairs, the explanation whose value the student matches best,
    if it matches (see :func:`matches`); ``None`` otherwise."""
    s = student.detach().to("cpu", torch.float64)
    best, best_distance = None, float("inf")
    for value, explanation in candidates:
        if matches(value, student, exact):
            distance = float((value.detach().to("cpu", torch.float64) - s).abs().max())
            if distance < best_distance:
                best, best_distance = explanation, distance
    return best
