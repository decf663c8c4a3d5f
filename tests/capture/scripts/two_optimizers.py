"""A GAN-shaped loop: two models, two optimizers stepped once each per iteration."""

import torch
from torch import nn

gen = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8))
disc = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(disc.parameters(), lr=1e-3)
bce = nn.BCEWithLogitsLoss()

for _i in range(16):
    real = torch.randn(8, 8)
    fake = gen(torch.randn(8, 8))
    d_loss = bce(disc(real), torch.ones(8, 1)) + bce(disc(fake.detach()), torch.zeros(8, 1))
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
    g_loss = bce(disc(fake), torch.ones(8, 1))
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
print("two_optimizers: done")
