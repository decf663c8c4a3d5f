"""compiler-fusion: eager memory-bound kernel chains around the GEMMs that torch.compile fuses."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar

from advisor.engine.context import RuleContext
from advisor.engine.effects import DropOps, Effect
from advisor.engine.rule import Category, Confidence, Evidence, Finding, FixVariant, Rule, Status, Validation
from advisor.engine.runner import MIN_SPEEDUP
from advisor.graph.chains import find_chains
from advisor.graph.kernels import classify, short_name
from advisor.graph.loss_chains import loss_kernels
from advisor.graph.model import GpuOp, OpGraph
from advisor.graph.queries import per_step, uses_cuda_graphs

SECOND_KEPT = 0.5
"""Share of a chain's second-largest kernel that the fused kernel still costs.

A fused kernel reads the chain's inputs once and writes its outputs once: at least the traffic of
the chain's largest member (kept whole). In training it must also write the activations the
backward pass reads, about one more tensor: between 0 and 1 of the second-largest member, the
midpoint taken. On the H100 the three choices predicted the time compile saved on four models
(two planted GPTs, nanoGPT, timm ViT-B) as 1.14-1.86x (0), 0.97-1.54x (0.5) and 0.70-1.23x (1)
of the measured saving (docs/validation.md, compiler-fusion)."""


def fusion_effects(chains: Sequence[Sequence[GpuOp]], second_kept: float = SECOND_KEPT,
                   keep_launches: bool = False) -> list[Effect]:
    """Each chain becomes one kernel: its largest member stays as it is, the second largest keeps
    ``second_kept`` of its time, the others go (with their launches and dispatch, unless
    ``keep_launches``: the compiled program's own host work taken to cost what they did)."""
    dropped: list[int] = []
    kept: list[int] = []
    for c in chains:
        if len(c) < 2:
            continue
        by_time = sorted(c, key=lambda o: o.duration_ns, reverse=True)
        (dropped if second_kept == 0.0 else kept).append(by_time[1].id)
        dropped.extend(o.id for o in by_time[2:])
    effects: list[Effect] = [DropOps(tuple(dropped), keep_launches=keep_launches)]
    if kept and second_kept < 1.0:
        effects.append(DropOps(tuple(kept), second_kept))
    return effects


def fusion_saving_ns(chains: Sequence[Sequence[GpuOp]], ops: Iterable[GpuOp],
                     second_kept: float = SECOND_KEPT) -> float:
    """The GPU time `fusion_effects` takes off ``ops`` (members of ``chains``): what a fix
    covering only ``ops`` (the loss's kernels) is predicted to save, where the chains' time
    alone would count the kernels fusion keeps (each chain's largest, part of its second)."""
    saved: dict[int, float] = {}
    for effect in fusion_effects(chains, second_kept):
        if isinstance(effect, DropOps):
            saved.update(dict.fromkeys(effect.op_ids, 1.0 - effect.keep_fraction))
    return sum(o.duration_ns * saved.get(o.id, 0.0) for o in ops)


class CompilerFusion(Rule):
    """Eager elementwise, normalization, softmax and reduction kernels that torch.compile would fuse.

    What it detects
    ---------------
    Chains of two or more eager PyTorch (ATen) memory-bound kernels (elementwise, casts,
    normalization, softmax, reductions) between the compute kernels (GEMMs, convolutions,
    attention) on a stream, in a step that is not compiled: no Inductor kernels
    (``triton_poi_fused_*``, ``triton_red_fused_*`` ...) carry most of that work and no CUDA graph
    is replayed. Kernels of the data and optimizer phases are left out (``torch.compile(model)``
    does not cover them). Chains of a loss computed after the model (a ``loss`` phase that
    launches no GEMM, and the gradient autograd runs first in backward;
    ``advisor.graph.loss_chains``) are counted, and where fusing them alone saves 2% of the step
    (`fusion_saving_ns`) the fix names compiling the loss too: ``torch.compile(model)`` leaves them eager.

    Why it is slow
    --------------
    Each eager kernel reads its inputs from HBM and writes its output back, so a chain such as
    residual add -> LayerNorm -> cast moves the same activation through memory several times and
    pays a launch and the framework's dispatch per op. Inductor fuses each chain into one Triton
    kernel that reads the inputs once and keeps the intermediates in registers.

    Evidence
    --------
    Chains and their kernels per step, their time by category and share of the step, the
    launches fusion removes, the largest chains' kernels.

    Example
    -------
    ```python
    model = GPT(config).cuda()                    # eager: every LayerNorm, GELU, add, softmax
    loss = model(x, y); loss.backward()           # is its own kernel between the GEMMs
    ```

    Speedup model
    -------------
    Replay of the analysed steps with each chain fused: its largest kernel kept, its second
    largest at half its time (the activation the fused kernel still writes for backward), the
    others removed together with their launches and dispatch, so a host-bound step gains too.
    Bounds: the second largest kept whole and no host saving, the removed kernels' launches and
    dispatch kept as the cost of the compiled program's own host work (low: guards, AOTAutograd's
    wrappers and Inductor's Python launches; on host-bound fixed steps compile measured
    0.92-1.04x where the dropped launches promised 1.04-1.10x); the second largest removed
    (high).

    Known false positives
    ---------------------
    Chains inside code that cannot be compiled (custom autograd functions, graph breaks the user
    cannot remove) are counted. Compile also changes GEMM layouts and may pick different GEMM
    kernels; the model leaves GEMMs as they are.

    References
    ----------
    PyTorch ``torch.compile`` tutorial and "TorchInductor" design notes; Ansel et al., "PyTorch 2"
    (ASPLOS 2024), fusion of pointwise and reduction ops.
    """

    code = "KERN004"
    name = "compiler-fusion"
    validation = Validation(  # fixtures/scenarios-check
        {"d": 1024, "layers": 8, "heads": 16, "batch": 8},
        measured=1.28, runs=3)
    category = Category.KERNELS
    opportunity = True  # fast GEMMs leave eager elementwise chains worth compiling
    status = Status.PREVIEW
    GAIN_TOLERANCE: ClassVar[float] = 0.20
    """Relative error on the gain (share of the step saved) this rule is validated to, tighter
    than the default 30%: on the captures where torch.compile was measured (the planted GPT-2
    scenario, nanoGPT, timm ViT-B; tests/test_public_gain.py) the estimate is within 18%, while
    the choice of how much of a chain's second kernel remains (``SECOND_KEPT`` 0 or 1 instead of
    0.5) moves the gain by 27-35%: a 30% bound could not tell those mechanisms apart."""
    mechanisms: ClassVar[Mapping[str, str]] = {
        "eager-chains": "elementwise, normalization and softmax kernels run one by one in eager "
                        "mode, each reading and writing its tensors in HBM",
        "eager-chains-and-loss": "the same, and a large part of them is the loss, computed after "
                                 "the model, which torch.compile(model) leaves eager (forward and "
                                 "backward)",
    }
    knobs: ClassVar[Mapping[str, tuple[str, ...]]] = {"eager-chains": ("compile",)}
    """No knob for ``eager-chains-and-loss``: the compile knob compiles the model, not the loss
    computed after it, so ``--try`` would time part of the fix."""
    fixes: ClassVar[tuple[FixVariant, ...]] = (
        FixVariant(
            "eager-chains",
            "Compile the model with torch.compile to fuse its eager kernel chains (and remove what "
            "breaks its graph)",
            "model = torch.compile(model)\n"
            "# graph breaks keep code eager: .item()/.tolist()/print in forward,\n"
            "# data-dependent `if` on tensors (use torch.where / torch.cond), hooks\n"
            "# added after compiling. Find them: TORCH_LOGS=graph_breaks python train.py"),
        FixVariant(
            "eager-chains",
            "Fuse the eager kernel chains: TrainingArguments(torch_compile=True)",
            "args = TrainingArguments(..., torch_compile=True)\n"
            "# graph breaks keep code eager; find them: TORCH_LOGS=graph_breaks python train.py",
            framework="hf-trainer", kind="config"),
        FixVariant(
            "eager-chains",
            "Fuse the eager kernel chains: torch.compile the LightningModule before fit",
            "model = torch.compile(model)          # the LightningModule\n"
            "trainer.fit(model, datamodule=dm)\n"
            "# graph breaks keep code eager; find them: TORCH_LOGS=graph_breaks python train.py",
            framework="lightning"),
        FixVariant(
            "eager-chains",
            "Fuse the eager kernel chains: Accelerator(dynamo_backend=\"inductor\")",
            "accelerator = Accelerator(dynamo_backend=\"inductor\")   # compiles in prepare()\n"
            "model, opt, loader = accelerator.prepare(model, opt, loader)",
            framework="accelerate"),
        FixVariant(
            "eager-chains-and-loss",
            "Fuse the eager kernel chains: compile the model and the loss computed after it "
            "(torch.compile(model) leaves the loss's chains eager)",
            "import torch.nn.functional as F\n"
            "model = torch.compile(model)\n"
            "# the loss runs after the model, outside what torch.compile(model) compiles:\n"
            "@torch.compile\n"
            "def loss_fn(logits, targets):\n"
            "    return F.cross_entropy(logits.float(), targets)   # your loss, casts included\n"
            "loss = loss_fn(model(x), y)\n"
            "# graph breaks keep code eager; find them: TORCH_LOGS=graph_breaks python train.py"),
        FixVariant(
            "eager-chains-and-loss",
            "Fuse the eager kernel chains: compile the LightningModule and the loss its "
            "training_step computes",
            "import torch.nn.functional as F\n"
            "@torch.compile\n"
            "def loss_fn(logits, targets):   # training_step's loss runs outside forward\n"
            "    return F.cross_entropy(logits.float(), targets)   # your loss, casts included\n"
            "\n"
            "class LitModel(L.LightningModule):\n"
            "    def training_step(self, batch, batch_idx):\n"
            "        x, y = batch\n"
            "        return loss_fn(self(x), y)\n"
            "\n"
            "model = torch.compile(LitModel())   # compiles forward\n"
            "trainer.fit(model, datamodule=dm)",
            framework="lightning"),
        FixVariant(
            "eager-chains-and-loss",
            "Fuse the eager kernel chains: compile the model in prepare() and the loss your loop "
            "computes after it",
            "import torch.nn.functional as F\n"
            "accelerator = Accelerator(dynamo_backend=\"inductor\")   # compiles the model in prepare()\n"
            "model, opt, loader = accelerator.prepare(model, opt, loader)\n"
            "# the loss runs after the model, outside what prepare() compiles:\n"
            "@torch.compile\n"
            "def loss_fn(logits, targets):\n"
            "    return F.cross_entropy(logits.float(), targets)   # your loss, casts included\n"
            "loss = loss_fn(model(x), y)\n"
            "accelerator.backward(loss)",
            framework="accelerate"),
        FixVariant(
            "eager-chains-and-loss",
            "Fuse the eager kernel chains: torch_compile=True compiles the model, and a compiled "
            "compute_loss_func the loss the Trainer computes after it",
            "import torch.nn.functional as F\n"
            "@torch.compile\n"
            "def loss_fn(outputs, labels, num_items_in_batch=None):   # Trainer(compute_loss_func=...)\n"
            "    logits = outputs[\"logits\"]                          # your loss, casts included\n"
            "    # a causal LM predicts the next token: logits[:, :-1] against labels[:, 1:]\n"
            "    return F.cross_entropy(logits.float().flatten(0, -2), labels.flatten(),\n"
            "                           ignore_index=-100)\n"
            "\n"
            "args = TrainingArguments(..., torch_compile=True)\n"
            "trainer = Trainer(model=model, args=args, train_dataset=train_ds, compute_loss_func=loss_fn)",
            framework="hf-trainer"),
        FixVariant(
            "eager-chains-and-loss",
            "Fuse the eager kernel chains: compile the DeepSpeed engine and the loss computed "
            "after it",
            "import torch.nn.functional as F\n"
            "engine, opt, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),\n"
            "                                       config=ds_config)\n"
            "engine.compile()        # torch.compile under DeepSpeed: the model only\n"
            "@torch.compile\n"
            "def loss_fn(logits, targets):\n"
            "    return F.cross_entropy(logits.float(), targets)   # your loss, casts included\n"
            "loss = loss_fn(engine(x), y)\n"
            "engine.backward(loss)",
            framework="deepspeed"),
        FixVariant(
            "eager-chains",
            "Fuse the eager kernel chains: compile the DeepSpeed engine",
            "engine, opt, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),\n"
            "                                       config=ds_config)\n"
            "engine.compile()        # torch.compile under DeepSpeed",
            framework="deepspeed"),
    )

    def check(self, graph: OpGraph, ctx: RuleContext) -> Iterable[Finding]:
        steps = ctx.steps
        found = find_chains(graph, steps)
        if found.compiled or uses_cuda_graphs(graph, steps):
            return
        chains = found.fusable
        total = found.fusable_ns
        step_total = sum(s.time_ns for s in steps)
        share = total / step_total if step_total else 0.0
        if not chains:  # a negligible share falls under the runner's reporting threshold
            return
        kernels = [o for c in chains for o in c]
        loss_ops = loss_kernels(graph, steps, chains)
        loss_ns = sum(o.duration_ns for o in loss_ops)
        # the loss gets its own fix where what fusing its kernels saves is worth a finding
        loss_saving_ns = fusion_saving_ns(chains, loss_ops)
        outside_loss = step_total and loss_saving_ns / step_total >= 1 - 1 / MIN_SPEEDUP
        by_cat: Counter[str] = Counter()
        for o in kernels:
            by_cat[classify(o).value] += o.duration_ns
        removed = sum(len(c) - 2 for c in chains)  # the second largest keeps its launch
        names = Counter(short_name(o.name) for o in kernels)
        cats = ", ".join(f"{k} {per_step(v, steps) / 1e6:.2f}" for k, v in by_cat.most_common())
        yield ctx.finding(
            type(self),
            message=(f"{len(chains) / len(steps):.0f} chains of {len(kernels) / len(steps):.0f} eager "
                     f"memory-bound kernels per step take {per_step(total, steps) / 1e6:.2f} ms "
                     f"({share:.0%} of the step; ms: {cats}); torch.compile fuses each chain"
                     + (f"; {per_step(loss_ns, steps) / 1e6:.2f} ms of them are the loss, computed "
                        "after the model: torch.compile(model) leaves it eager, compile it too"
                        if outside_loss else "")),
            evidence=Evidence(
                steps=tuple(s.index for s in steps),
                kernels=tuple(k for k, _ in names.most_common(5)),
                node_ids=tuple(f"gpu:{o.id}" for o in kernels[:50]),
                quantities={"chains_per_step": len(chains) / len(steps),
                            "chain_kernels_per_step": len(kernels) / len(steps),
                            "chain_ns_per_step": per_step(total, steps), "chain_share": share,
                            "launches_removed_per_step": removed / len(steps),
                            "loss_chain_ns_per_step": per_step(loss_ns, steps),
                            "loss_fusion_saving_ns_per_step": per_step(loss_saving_ns, steps),
                            **{f"{k}_ns_per_step": per_step(v, steps) for k, v in by_cat.items()}},
            ),
            mechanism="eager-chains-and-loss" if outside_loss else "eager-chains",
            effects=fusion_effects(chains),
            # pessimistic: the second kernel of each chain kept whole, and no host saving (the
            # compiled program's guards, wrappers and Python launches cost what the eager
            # dispatch of the fused kernels did: on host-bound fixed steps compile measured
            # 0.92-1.04x where the dropped launches promised 1.04-1.10x, wave 11)
            low_effects=fusion_effects(chains, 1.0, keep_launches=True),
            high_effects=fusion_effects(chains, 0.0),
            model=("replay with each eager memory-bound chain fused into one kernel: largest member "
                   "kept, half of the second largest, the rest and their launches removed"),
            assumptions=("the whole model compiles (no graph breaks inside the chains)"
                         + (", and the loss computed after it is compiled too" if outside_loss
                            else ""),
                         "GEMMs, attention and the optimizer unchanged by compile",
                         "fp8-candidate, where raised, assumes this fix: its route needs compile"),
            confidence=Confidence.MODELED,
        )


