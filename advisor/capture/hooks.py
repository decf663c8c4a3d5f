"""The hooks a capture session puts into torch to see an unmodified script's loop.

Each kind of hook is one method of `Hooks`: optimizer steps (where a step ends), module calls
(forward and loss), a DataLoader iterator's ``__next__`` (data, and which loader the loop draws
from), ``torch.autograd.backward``, a few rare calls timed as host activities (a loader's start,
``torch.save``), and CUDA graph captures (no step boundary inside one). What a hook decides is
the session's (`advisor.capture.session.Session`: its phase, its step, its state); this module
only installs the hooks on the loop's thread and removes every one of them again.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from advisor.capture.host_probe import loader_config, stack_packages

GLOBAL_OPTIMIZER_HOOKS = 2
"""The first handles are the optimizer's global hooks, kept for the whole run; the global
module hooks after them give way to per-module ones once the top modules are known."""


def starts_workers(loader: Any, *args: Any, **kwargs: Any) -> bool:
    """Whether ``iter(loader)`` starts worker processes (persistent ones start only once)."""
    if getattr(loader, "num_workers", 0) <= 0:
        return False
    return not (getattr(loader, "persistent_workers", False)
                and getattr(loader, "_iterator", None) is not None)


_HOOK_DICTS = ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks",
               "_forward_hooks_with_kwargs", "_forward_hooks_always_called")
"""A module's hook tables keyed by handle id (`torch.utils.hooks.RemovableHandle.id`)."""


class Hooks:
    """The session's hooks in torch; `uninstall` restores everything `install` changed."""

    def __init__(self, session: Any) -> None:
        """``session``: the `advisor.capture.session.Session` whose loop state the hooks move
        (not imported here: the session owns its hooks, so the import goes one way)."""
        self.s = session
        self.torch = session.torch
        self._handles: list[Any] = []  # global hooks (`GLOBAL_OPTIMIZER_HOOKS` first)
        self._module_handles: list[Any] = []  # hooks on the top-level modules, once known
        self._undo: list[Callable[[], None]] = []
        self._module_pre: Callable[..., None] | None = None
        self._module_post: Callable[..., None] | None = None
        self.installed = False

    def install(self) -> None:
        from torch.utils.data import dataloader as dataloader_mod

        self._hook_optimizers()
        self._hook_modules()
        self._hook_loader()
        # Starting an iterator (each epoch, unless persistent_workers) starts its worker
        # processes; the first batch then waits for them inside __next__.
        self._time_calls(dataloader_mod.DataLoader, "__iter__", "loader_start",
                         counts=self._loader_starts())
        self._time_calls(self.torch, "save", "checkpoint")
        self._keep_hooks_out_of_copies()
        self._count_graph_captures()
        self._hook_backward()
        self.installed = True

    def _loader_starts(self) -> Callable[..., bool]:
        """`starts_workers`, and which of those starts restart a loader that started before
        (``loader_restart_calls``, 0 on a loader's first): persistent workers would save those,
        not a second loader's first start (an evaluation loader's, after the first epoch)."""
        started: weakref.WeakSet[Any] = weakref.WeakSet()
        s = self.s

        def counts(loader: Any, *args: Any, **kwargs: Any) -> bool:
            if not starts_workers(loader):
                return False
            try:
                again = loader in started
                started.add(loader)
            except TypeError:  # a loader that takes no weak reference: counted as a first start
                again = False
            s.add_activity("loader_restart_calls", int(again))
            return True

        return counts

    def _hook_optimizers(self) -> None:
        """The optimizer phase, and the step boundary at the end of the cycle's last step()."""
        from torch.optim import optimizer as optimizer_mod

        get_ident, s = threading.get_ident, self.s

        def opt_pre(opt, args, kwargs):
            if get_ident() != s.tid:
                return None
            s.opt_depth += 1
            if s.opt_depth == 1 and not s.explicit_phases and s.phase != "optimizer":
                s.set_phase("optimizer")
            return None

        def opt_post(opt, args, kwargs):
            if get_ident() != s.tid:
                return
            s.opt_depth -= 1
            if s.opt_depth:
                return
            s.state.optimizer_steps += 1
            if s.state.optimizer_steps == 1:  # who runs the loop: once, a stack walk
                s.state.loop_modules = stack_packages()
            if s.phase == "optimizer":
                s.set_phase(None)
            if not s.state.explicit and s.is_boundary(opt):
                s.boundary()

        self._handles += [optimizer_mod.register_optimizer_step_pre_hook(opt_pre),
                          optimizer_mod.register_optimizer_step_post_hook(opt_post)]

    def _hook_modules(self) -> None:
        """Forward and loss: the outermost module call on the loop thread (global hooks until
        the top modules are found, `keep_only`), and forward passes with autograd off timed as
        evaluation."""
        from torch.nn.modules import module as module_mod

        torch, s = self.torch, self.s
        get_ident, clock, grad_enabled = threading.get_ident, s.clock, torch.is_grad_enabled
        is_compiling = getattr(torch.compiler, "is_compiling", lambda: False)  # torch < 2.3
        loss_type: type = torch.nn.modules.loss._Loss

        def module_pre(module, args):
            if is_compiling() or get_ident() != s.tid:
                return None
            s.depth += 1
            if s.depth == 1 and s.eval_from is None and not grad_enabled():
                s.eval_from = clock()  # a forward pass with autograd off: evaluation
            if s.depth == 1 and not (s.in_backward or s.opt_depth or s.in_data
                                     or s.explicit_phases):
                if isinstance(module, loss_type):
                    if s.phase != "loss":
                        s.set_phase("loss")
                else:
                    if s.discovering:
                        s.top[id(module)] = module
                    s.set_phase("forward")
            return None

        def module_post(module, args, output):
            if is_compiling() or get_ident() != s.tid:
                return None
            s.depth -= 1
            if s.depth == 0:
                if s.eval_from is not None:
                    s.add_activity("eval", clock() - s.eval_from)
                    s.eval_from = None
                if s.phase == "forward":
                    s.set_phase("loss")
            return None

        self._module_pre, self._module_post = module_pre, module_post
        self._handles += [module_mod.register_module_forward_pre_hook(module_pre),
                          module_mod.register_module_forward_hook(module_post, always_call=True)]

    def _hook_loader(self) -> None:
        """The data phase: a DataLoader iterator's ``__next__`` on the loop thread, timed (wall
        and the loop thread's CPU), and the settings of the loader the loop draws most from."""
        from torch.utils.data import dataloader as dataloader_mod

        s, get_ident, clock, cpu_clock = self.s, threading.get_ident, self.s.clock, time.thread_time_ns
        base_iter = dataloader_mod._BaseDataLoaderIter
        orig_next = base_iter.__next__
        batches: dict[int, int] = {}  # id(loader) -> batches drawn by the loop thread
        leading: list[Any] = [None]  # (dataset id, iterator id) whose settings state.loader holds

        def loader_seen(it):
            # the settings of the loader the loop draws the most batches from; read again only
            # when another iterator takes the lead (each batch of the same one: a count)
            key = id(getattr(it, "_dataset", it))
            n = batches[key] = batches.get(key, 0) + 1
            cur = s.state.loader
            if cur is None or n > cur.get("_batches", 0):
                if cur is not None and leading[0] == (key, id(it)):
                    cur["_batches"] = n
                else:
                    leading[0] = (key, id(it))
                    s.state.loader = {**loader_config(it), "_batches": n}

        def timed_batch(t: int, c: int | None) -> None:
            act = s._act  # `add_activity`, inlined: once per batch
            act["data"] = act.get("data", 0) + clock() - t
            act["data_batches"] = act.get("data_batches", 0) + 1
            if c is not None:
                act["data_cpu"] = act.get("data_cpu", 0) + cpu_clock() - c
                act["data_cpu_batches"] = act.get("data_cpu_batches", 0) + 1

        def __next__(it):
            if s.in_data or get_ident() != s.tid:
                return orig_next(it)
            # The loop thread's CPU time: with num_workers=0, the batch's whole loading cost
            # (`advisor.engine.host`). Read only there: the thread's CPU clock is a system call
            # (2 us a read on the shared development machine, `benchmarks/hook_cost.py --parts`),
            # and with workers the rules do not use it.
            t = clock()
            c = None if getattr(it, "_num_workers", 0) else cpu_clock()
            loader_seen(it)
            if s.explicit_phases:
                try:
                    return orig_next(it)
                finally:
                    timed_batch(t, c)
            s.in_data = True
            s.set_phase("data")
            try:
                return orig_next(it)
            finally:
                s.in_data = False
                if s.phase == "data":
                    s.set_phase(None)
                timed_batch(t, c)

        __next__.__wrapped__ = orig_next  # type: ignore[attr-defined]
        base_iter.__next__ = __next__
        self._undo.append(lambda: setattr(base_iter, "__next__", orig_next))

    def _hook_backward(self) -> None:
        """The backward phase: ``torch.autograd.backward`` (which ``Tensor.backward`` calls)."""
        autograd, s, get_ident = self.torch.autograd, self.s, threading.get_ident
        orig_backward = autograd.backward

        def backward(*args, **kwargs):
            if s.in_backward or get_ident() != s.tid:
                return orig_backward(*args, **kwargs)
            s.in_backward = True
            auto = not s.explicit_phases
            if auto:
                s.set_phase("backward")
            try:
                return orig_backward(*args, **kwargs)
            finally:
                s.in_backward = False
                if auto and s.phase == "backward":
                    # What follows backward (clipping, unscaling) belongs to the update; with
                    # gradient accumulation the next data or forward closes it at once.
                    s.set_phase("optimizer")

        backward.__wrapped__ = orig_backward  # type: ignore[attr-defined]
        backward.__doc__ = orig_backward.__doc__
        autograd.backward = backward
        self._undo.append(lambda: setattr(autograd, "backward", orig_backward))

    def _count_graph_captures(self) -> None:
        """CUDA graph captures under way, on any thread (`Session.capturing`)."""
        graph = getattr(self.torch.cuda, "CUDAGraph", None)
        if graph is None or not hasattr(graph, "capture_begin"):
            return
        s = self.s

        def wrap(attr: str, delta: int) -> None:
            orig = getattr(graph, attr)

            def counted(*args, **kwargs):
                if delta > 0:
                    s.graph_captures += 1
                    try:
                        return orig(*args, **kwargs)
                    except BaseException:
                        s.graph_captures -= 1
                        raise
                try:
                    return orig(*args, **kwargs)
                finally:
                    s.graph_captures = max(0, s.graph_captures - 1)

            counted.__wrapped__ = orig  # type: ignore[attr-defined]
            counted.__doc__ = orig.__doc__
            counted.__name__ = attr
            setattr(graph, attr, counted)
            self._undo.append(lambda: setattr(graph, attr, orig))

        wrap("capture_begin", +1)
        wrap("capture_end", -1)

    def _time_calls(self, owner: Any, attr: str, activity: str,
                    counts: Callable[..., bool] | None = None) -> None:
        """Wrap ``owner.attr`` so the loop thread's calls of it add to a host activity
        (those for which ``counts(*args)`` holds, when given)."""
        orig = getattr(owner, attr)
        get_ident, clock, s = threading.get_ident, self.s.clock, self.s

        def timed(*args, **kwargs):
            if get_ident() != s.tid or (counts is not None and not counts(*args, **kwargs)):
                return orig(*args, **kwargs)
            t = clock()
            try:
                return orig(*args, **kwargs)
            finally:
                s.add_activity(activity, clock() - t)
                s.add_activity(activity + "_calls", 1)

        timed.__wrapped__ = orig  # type: ignore[attr-defined]
        timed.__doc__ = orig.__doc__
        timed.__name__ = getattr(orig, "__name__", attr)
        setattr(owner, attr, timed)
        self._undo.append(lambda: setattr(owner, attr, orig))

    def _keep_hooks_out_of_copies(self) -> None:
        """A module's pickled or deep-copied state leaves our hooks out.

        ``Module.__getstate__`` returns the module's ``__dict__``, hooks included, and pickle,
        ``torch.save(model)`` and ``copy.deepcopy(model)`` (an EMA copy) all go through it: with
        our hooks on the top-level module they failed under `advisor profile` (our hooks are
        the session's methods) where plain Python succeeds, and a copy that worked would carry
        hooks that reach back into this session. The wrapper copies the state and drops the
        entries of our own hook handles, nothing else."""
        module_cls = self.torch.nn.Module
        orig = module_cls.__getstate__
        handles = self._module_handles

        def __getstate__(module):
            state = orig(module)
            if not handles:
                return state
            ours = {h.id for h in handles}
            copied = False
            for key in _HOOK_DICTS:
                hooks = state.get(key)
                if hooks and not ours.isdisjoint(hooks):
                    if not copied:  # never the live __dict__ the module itself uses
                        state, copied = dict(state), True
                    state[key] = type(hooks)((k, v) for k, v in hooks.items() if k not in ours)
            return state

        __getstate__.__wrapped__ = orig  # type: ignore[attr-defined]
        module_cls.__getstate__ = __getstate__
        self._undo.append(lambda: setattr(module_cls, "__getstate__", orig))

    def keep_only(self, modules: Any) -> list[str]:
        """Module hooks only on ``modules`` (the top-level ones found), none global: after the
        first steps the other modules' calls stay on PyTorch's no-hook fast path. Returns their
        type names."""
        for h in self._handles[GLOBAL_OPTIMIZER_HOOKS:]:
            h.remove()
        del self._handles[GLOBAL_OPTIMIZER_HOOKS:]
        names = []
        for module in modules:
            self._module_handles += [
                module.register_forward_pre_hook(self._module_pre),
                module.register_forward_hook(self._module_post, always_call=True),
            ]
            names.append(type(module).__name__)
        return names

    def on_uninstall(self, undo: Callable[[], None]) -> None:
        """Restore something else when the hooks are removed (a subclass's own wrapper)."""
        self._undo.append(undo)

    def uninstall(self) -> None:
        for h in self._handles + self._module_handles:
            h.remove()
        self._handles.clear()
        self._module_handles.clear()
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()
        self.installed = False
