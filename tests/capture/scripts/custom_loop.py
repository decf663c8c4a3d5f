"""A loop the hooks cannot see: no torch.optim optimizer, a manual SGD update.

It marks its own steps and phases with the public API.
"""

import torch

import advisor.capture as ac

w = torch.randn(32, 1, requires_grad=True)
data = [(torch.randn(16, 32), torch.randn(16, 1)) for _ in range(4)]

for i in range(16):
    with ac.step():
        with ac.phase("data"):
            x, y = data[i % len(data)]
        with ac.phase("forward"):
            pred = x @ w
        with ac.phase("loss"):
            loss = (pred - y).pow(2).mean()
        with ac.phase("backward"):
            loss.backward()
        with ac.phase("optimizer"), torch.no_grad():
            w -= 0.01 * w.grad
            w.grad = None
print("custom_loop: done")
