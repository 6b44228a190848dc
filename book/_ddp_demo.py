"""One replica of chapter 7's data-parallel BatchNorm demo (gloo, CPU, loopback only).

The chapter starts two copies of this script:
    python _ddp_demo.py RANK WORLD_SIZE PORT OUT_DIR
Every replica builds the same global batch from a fixed seed, keeps its own (uneven)
shard, normalizes it in three ways (BatchNorm on the shard alone; statistics all-reduced
across the replicas, with four kinds of all-reduce; torch.nn.SyncBatchNorm) and saves
what it saw to OUT_DIR/rank<RANK>.pt. The chapter compares the results with one
BatchNorm2d on the whole batch.
"""
import datetime
import sys
import warnings

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.distributed.nn.functional as dist_fn
from torch import nn

SHARDS = (5, 3)              # images per replica: uneven on purpose
C, H, W = 4, 3, 3
EPS, MOMENTUM = 1e-5, 0.1


def global_batch():
    """The same data on every replica (and in the chapter): a batch whose channels have
    different means and scales, gamma and beta, and the weights of a loss sum(w * y)."""
    gen = torch.Generator().manual_seed(0)
    n = sum(SHARDS)
    offset = torch.linspace(-2.0, 2.0, n).view(n, 1, 1, 1)     # images differ in level
    levels = offset * torch.arange(1, C + 1).view(1, C, 1, 1)
    x = 3.0 * torch.randn(n, C, H, W, generator=gen) + 5.0 + levels
    gamma = 1.0 + 0.2 * torch.randn(C, generator=gen)
    beta = 0.5 * torch.randn(C, generator=gen)
    w = torch.randn(n, C, H, W, generator=gen)
    return x, gamma, beta, w


class SumOverReplicas(torch.autograd.Function):
    """All-reduce (sum) that autograd can see: the gradient of a sum over replicas
    with respect to one replica's term is the sum of the replicas' incoming
    gradients."""

    @staticmethod
    def forward(ctx, t):
        t = t.clone()
        dist.all_reduce(t)
        return t

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad


def normalize_synced(x, gamma, beta, running_mean, running_var, all_reduce):
    """BatchNorm2d in training mode with statistics over ALL replicas' images: one
    all-reduce of the per-channel sum, sum of squares and count (accumulated in
    float64), then the global mean and biased variance; the running variance gets the
    unbiased variance from the global count. Returns the output, the global mean and
    biased variance, and the global count per channel."""
    x64 = x.double()
    local = torch.cat([x64.sum((0, 2, 3)), (x64 * x64).sum((0, 2, 3)),
                       x64.new_tensor([x[:, 0].numel()])])
    total = all_reduce(local)
    s, ss, n = total[:C], total[C:2 * C], total[-1]
    mean = s / n
    var = ss / n - mean * mean                      # biased: used to normalize
    with torch.no_grad():
        running_mean.mul_(1 - MOMENTUM).add_(MOMENTUM * mean.float())
        running_var.mul_(1 - MOMENTUM).add_(MOMENTUM * (var * n / (n - 1)).float())
    mean, var = mean.float(), var.float()
    x_hat = (x - mean.view(1, C, 1, 1)) * torch.rsqrt(var.view(1, C, 1, 1) + EPS)
    y = gamma.view(1, C, 1, 1) * x_hat + beta.view(1, C, 1, 1)
    return y, mean, var, n.item()


def plain_all_reduce(t):
    """dist.all_reduce on a copy: right numbers, but autograd does not know about it."""
    t = t.clone()
    dist.all_reduce(t)
    return t


def main():
    rank, world, port = (int(a) for a in sys.argv[1:4])
    out_dir = sys.argv[4]
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    x_all, gamma0, beta0, w_all = global_batch()
    start = sum(SHARDS[:rank])
    x, w = x_all[start:start + SHARDS[rank]], w_all[start:start + SHARDS[rank]]
    out = {"rank": rank, "shard": (start, start + SHARDS[rank])}

    # 1. What data parallelism does by default: each replica normalizes its own shard.
    own = nn.BatchNorm2d(C)
    with torch.no_grad():
        own.weight.copy_(gamma0)
        own.bias.copy_(beta0)
    out["own_y"] = own(x).detach()
    out["own_mean"] = x.mean((0, 2, 3))
    out["own_var"] = x.var((0, 2, 3), unbiased=False)
    out["own_running"] = (own.running_mean.clone(), own.running_var.clone())

    # 2. Synchronized statistics, differentiable all-reduce: forward, backward, buffers.
    xg = x.clone().requires_grad_()
    gamma, beta = gamma0.clone().requires_grad_(), beta0.clone().requires_grad_()
    rm, rv = torch.zeros(C), torch.ones(C)
    y, mean, var, n = normalize_synced(xg, gamma, beta, rm, rv, SumOverReplicas.apply)
    (y * w).sum().backward()
    out.update(sync_y=y.detach(), sync_mean=mean.detach(), sync_var=var.detach(),
               sync_running=(rm, rv), sync_dx=xg.grad, sync_dgamma=gamma.grad,
               sync_dbeta=beta.grad)

    # 3. The same forward with a plain dist.all_reduce: autograd misses the others.
    xp = x.clone().requires_grad_()
    yp, _, _, _ = normalize_synced(xp, gamma0, beta0, torch.zeros(C), torch.ones(C),
                                plain_all_reduce)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (yp * w).sum().backward()
    out["plain_y"] = yp.detach()
    out["plain_dx"] = xp.grad
    out["plain_warning"] = [str(c.message).split(". ")[0] for c in caught]

    # 3b. torch's differentiable all-reduces: torch.distributed.nn.functional.all_reduce
    #     (deprecated in torch 2.13) and the replacement its warning names. The
    #     backward of both all-reduces the incoming gradient, like SumOverReplicas.
    torch_all_reduces = {"fn": dist_fn.all_reduce,
                         "funcol": lambda t: funcol.all_reduce(t, "sum",
                                                               dist.group.WORLD)}
    for key, all_reduce in torch_all_reduces.items():
        xf = x.clone().requires_grad_()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yf, _, _, _ = normalize_synced(xf, gamma0, beta0, torch.zeros(C),
                                        torch.ones(C), all_reduce)
            (yf * w).sum().backward()
        out[f"{key}_y"], out[f"{key}_dx"] = yf.detach().clone(), xf.grad
        out[f"{key}_warning"] = [str(c.message) for c in caught
                                 if issubclass(c.category, FutureWarning)]

    # 4. The backward written out: two per-channel sums, all-reduced (torch calls them
    #    sum_dy and sum_dy_xmu), give every replica the gradient of the global batch.
    #    n is the all-reduced count of section 2, not an assumed one.
    with torch.no_grad():
        g = w                                       # dL/dy for L = sum(w * y)
        invstd = torch.rsqrt(var + EPS).view(1, C, 1, 1)
        xmu = x - mean.view(1, C, 1, 1)
        sums = torch.cat([g.sum((0, 2, 3)), (g * xmu).sum((0, 2, 3))])
        dist.all_reduce(sums)
        sum_dy, sum_dy_xmu = sums[:C].view(1, C, 1, 1), sums[C:].view(1, C, 1, 1)
        out["formula_dx"] = gamma0.view(1, C, 1, 1) * invstd * (
            g - sum_dy / n - xmu * invstd ** 2 * sum_dy_xmu / n)

    # 5. torch.nn.SyncBatchNorm with CPU tensors, inside an initialized process group.
    sbn = nn.SyncBatchNorm(C)
    try:
        sbn(x)
        out["syncbn"] = "ran without error"
    except Exception as e:                          # report, never a traceback
        out["syncbn"] = f"{type(e).__name__}: {e}"

    torch.save(out, f"{out_dir}/rank{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
