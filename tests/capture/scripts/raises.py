"""Trains a few steps, then fails inside iteration 7 (after forward, before backward)."""

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(16, 16)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)


def broken_loss(out, i):
    if i == 7:
        raise ValueError("loss went wrong at iteration 7")
    return out.pow(2).mean()


for i in range(20):
    x = torch.randn(8, 16)
    out = model(x)
    loss = broken_loss(out, i)
    loss.backward()
    opt.step()
    opt.zero_grad()
    print(f"iteration {i} loss {loss.item():.4f}")
