"""A nanoGPT-shaped loop: the next batch is fetched between the forward and the backward."""

import time

import torch


def get_batch():
    time.sleep(0.004)  # the host assembling a batch (reading, stacking, pinning)
    return torch.randn(32, 64), torch.randn(32, 1)


def main(iters: int = 24) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = get_batch()
    for _ in range(iters):
        loss = torch.nn.functional.mse_loss(model(x), y)
        x, y = get_batch()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


if __name__ == "__main__":
    main()
