"""A model and a loss each built on one line and called on another, batches from a DataLoader
(issue 33: source lines name the call, never the construction, and never advisor's hooks)."""

import torch
from torch.utils.data import DataLoader, TensorDataset


def main(epochs: int = 3) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
    loss_fn = torch.nn.MSELoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(640, 256), torch.randn(640, 1))
    loader = DataLoader(data, batch_size=64)
    for _ in range(epochs):
        for x, y in loader:
            out = model(x)
            loss = loss_fn(out, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


if __name__ == "__main__":
    main()
