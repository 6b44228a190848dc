# Attack: torch's own batch norm, run on another thread so that the op recorder (a dispatch mode
# of the checking thread) does not see the forward. The backward runs on the checking thread and
# is seen; whatever the recorder sees, the grade command lists the thread for review.
import threading

import torch
from torch import nn


def _on_thread(function, *args):
    box = {}
    thread = threading.Thread(target=lambda: box.update(value=function(*args)))
    thread.start()
    thread.join()
    return box["value"]


class _BatchNorm(nn.Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None):
        super().__init__()
        self.inner = [nn.modules.batchnorm.BatchNorm1d(num_features, eps, momentum, affine, track_running_stats,
                                                       device=device, dtype=dtype)]
        for name, p in self.inner[0]._parameters.items():
            self.register_parameter(name, p)
        for name, b in self.inner[0]._buffers.items():
            self.register_buffer(name, b)

    def forward(self, x):
        inner = self.inner[0]
        inner.train(self.training)
        return _on_thread(lambda: torch.nn.functional.batch_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias,
            self.training or self.running_mean is None, 0.0 if inner.momentum is None else inner.momentum, inner.eps))


class BatchNorm1d(_BatchNorm):
    pass


class BatchNorm2d(_BatchNorm):
    pass
