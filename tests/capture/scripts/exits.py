"""Trains a few steps, then exits with status 3."""

import sys

import torch
from torch import nn

model = nn.Linear(8, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(12):
    loss = model(torch.randn(4, 8)).sum()
    loss.backward()
    opt.step()
    opt.zero_grad()
print("exits: leaving with 3")
sys.exit(3)
