"""host-sync: the host waits for the GPU in the middle of a step, outside the loss."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import ClassVar

from advisor.engine.context import RuleContext
from advisor.engine.effects import RemoveWaits
from advisor.engine.rule import (
    Category,
    Confidence,
    Finding,
    FixVariant,
    Requirement,
    Rule,
    Status,
    Validation,
)
from advisor.engine.rule import Evidence as Ev
from advisor.graph import api_names
from advisor.graph.kernels import short_name
from advisor.graph.model import OpGraph
from advisor.graph.queries import inside, loss_spans, per_step, process_calls, step_indices
from advisor.graph.syncs import host_waits


class HostSync(Rule):
    """Host synchronizations in the step hold the GPU back.

    What it detects
    ---------------
    Host calls inside steady-state steps that block until the GPU has drained its queue:
    ``cudaStreamSynchronize``/``cudaDeviceSynchronize``/``cudaEventSynchronize`` and blocking
    device-to-host scalar copies (``.item()``, ``.cpu()``, ``.tolist()``, ``print(tensor)``),
    outside the loss computation (that is `cpu-bound-loss`) and outside pageable input copies
    (that is `pageable-memcpy`).

    Why it is slow
    --------------
    While the host waits, it enqueues nothing. When the wait returns the GPU queue is empty, so
    the GPU idles for as long as the host then needs to launch the next kernels: every sync
    turns the host's launch time, normally hidden behind GPU work, into GPU idle time.

    Evidence
    --------
    The blocking calls per step with the time each held the host, and the kernel each waited for.

    Example
    -------
    ```python
    loss = model(x).loss
    torch.cuda.synchronize()          # left over from timing
    print(f"loss {loss.item():.3f}")  # blocking copy every step
    loss.backward()
    if grad_norm(model).item() > 1e3: # data-dependent branch on a GPU value
        ...
    ```

    Speedup model
    -------------
    Replay of the analysed steps with those calls no longer waiting (each costs the ~1.5 µs of a
    call that finds the GPU done): the host keeps enqueuing while the GPU runs, so the launch
    time after each sync overlaps GPU work. Low bound: only ``cudaStreamSynchronize``/device
    syncs removed (scalar copies kept, as when a value really must reach the host).

    Known false positives
    ---------------------
    A sync needed for correctness (host reads a value to decide control flow) can only move:
    to the end of the step, or to every N steps. Syncs at the very end of a step cost little and
    usually fall under the 2% reporting threshold.

    References
    ----------
    PyTorch CUDA semantics, "Asynchronous execution";
    ``torch.cuda.set_sync_debug_mode("warn")`` reports every synchronizing call.
    """

    code = "HOST001"
    name = "host-sync"
    validation = Validation(  # fixtures/scenarios-check
        {"batch": 2, "seq": 8192, "d": 1024, "heads": 16, "ff": 1024},
        measured=1.49, runs=3)
    category = Category.HOST
    gate_signals = ("sync-calls",)
    status = Status.STABLE  # validated on its H100 scenario: docs/validation.md
    requires = (Requirement.STEPS, Requirement.GPU_WORK, Requirement.LAUNCHES)
    mechanisms: ClassVar[Mapping[str, str]] = {
        "host-waits": "the host blocks on the GPU inside the step (.item(), .cpu(), "
                      "torch.cuda.synchronize(), printing or checking tensors), so it cannot "
                      "queue the next work ahead",
    }
    fixes: ClassVar[tuple[FixVariant, ...]] = (
        FixVariant(
            "host-waits",
            "Remove the host syncs from the step: keep values on the GPU, read them every N steps",
            "# find them: torch.cuda.set_sync_debug_mode(\"warn\")\n"
            "loss.backward()\n"
            "running = running + loss.detach()   # stays on the GPU, no .item()\n"
            "if step % log_every == 0:           # one sync per log interval\n"
            "    print(f\"loss {(running / log_every).item():.3f}\")\n"
            "clip_grad_norm_(model.parameters(), max_norm)   # its result unread\n"
            "# and no torch.cuda.synchronize() in the loop"),
        FixVariant(
            "host-waits",
            "Remove the host syncs from the step: log every N steps (TrainingArguments(logging_steps=N)), "
            "no .item() in compute_loss or callbacks",
            "args = TrainingArguments(..., logging_steps=50)  # syncs to log\n"
            "# in compute_loss / callbacks: keep tensors, no .item() per step\n"
            "# find them: torch.cuda.set_sync_debug_mode(\"warn\")",
            framework="hf-trainer", kind="config"),
        FixVariant(
            "host-waits",
            "Remove the host syncs from the step: log tensors every N steps (Trainer(log_every_n_steps=N)), "
            "no .item() in training_step",
            "trainer = Trainer(..., log_every_n_steps=50)\n"
            "def training_step(self, batch, batch_idx):\n"
            "    loss = self.loss_fn(self(batch[0]), batch[1])\n"
            "    self.log(\"train_loss\", loss.detach())  # a tensor, read when logged\n"
            "    return loss           # no loss.item(), no torch.cuda.synchronize()",
            framework="lightning"),
    )
    model = "replay with the listed calls no longer blocking the host"
    assumptions = ("the synced values are not needed by the host every step",
                   "host work per step is unchanged")
    confidence = Confidence.MODELED

    def check(self, graph: OpGraph, ctx: RuleContext) -> Iterable[Finding]:
        steps = ctx.steps
        loss = loss_spans(graph, steps)
        data = [span for s in steps for span in s.phases.get("data", [])]
        calls = process_calls(graph, steps, lambda c: api_names.may_block(c.name)
                              and c.name not in api_names.DEVICE_SYNCING_ALLOC_CALLS)
        waits = []
        for w in host_waits(graph, calls):
            if inside(w.call.start_ns, loss):
                continue  # the loss's own syncs: cpu-bound-loss
            if w.op.kind.value == "memcpy" and (w.op.copy_kind == "HtoD" or inside(w.call.start_ns, data)):
                continue  # input copies: pageable-memcpy
            waits.append(w)
        if not waits:
            return
        hard = [w for w in waits if api_names.is_sync(w.call.name)]
        kinds = Counter(w.call.name for w in waits)
        waited = Counter(short_name(w.op.name) for w in waits)
        total_wait = sum(w.wait_ns for w in waits)
        n = len(steps)
        yield ctx.finding(
            type(self),
            message=(f"{len(waits) / n:.1f} host syncs per step outside the loss hold the host "
                     f"{per_step(total_wait, steps) / 1e6:.2f} ms per step "
                     f"({', '.join(f'{k} x{v}' for k, v in kinds.most_common(3))})"),
            evidence=Ev(
                steps=step_indices(steps, (w.call.start_ns for w in waits)),
                kernels=tuple(k for k, _ in waited.most_common(5)),
                api_calls=tuple(kinds),
                node_ids=tuple(f"api:{w.call.id}" for w in waits[:50]),
                quantities={"syncs_per_step": len(waits) / n,
                            "host_wait_ns_per_step": per_step(total_wait, steps)},
            ),
            mechanism="host-waits",
            effects=[RemoveWaits(tuple(w.call.id for w in waits))],
            low_effects=[RemoveWaits(tuple(w.call.id for w in hard))],
        )
