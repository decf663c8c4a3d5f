"""The line that makes a call, read from the user's source file when it is readable.

torch.profiler's Python frames carry the line a function starts at, not the line a caller is
on. Where the source file can be read (the script's directory, the working directory, the
trace's directory), `SourceFiles.call_lines` finds the calls of a named callee inside one
function's own body (nested functions and classes excluded) with the standard library's `ast`.
When there are several, the calls inside a loop of that body come first: time that recurs every
training step is spent in the loop. Nothing is guessed when the file cannot be read or holds no
such call: the frame is then named by its function alone.

A module call is named by its class (``nn.Module: Sequential_0`` -> ``Sequential``), but the
line that *calls* a module calls its instance: ``model(xb)``, ``loss_fn(out, y)``,
``self.c_attn(x)``. A call of the class itself is where the module is built, never where it
runs, so for a class name (`is_class_name`) the instances are found instead: names assigned
from an expression that builds the class anywhere in the file (``model = nn.Sequential(...)``,
``self.attn = Attention(cfg)``), and names assigned from those (``model = torch.compile(model)``,
``raw = model.module``); the call lines are the calls of those names.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_ITERATION = frozenset({"__next__", "__iter__"})
"""Calls a ``for`` statement makes: their line is the loop's header."""


def _callee(node: ast.Call) -> str:
    f = node.func
    if isinstance(f, ast.Attribute):
        return f.attr
    if isinstance(f, ast.Name):
        return f.id
    return ""


def is_class_name(callee: str) -> bool:
    """``Sequential``, ``CrossEntropyLoss``: a module's class as its call is labelled."""
    return bool(callee) and callee[0].isupper() and callee.isidentifier()


def _target_names(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Attribute):
        return {node.attr}
    if isinstance(node, (ast.Tuple, ast.List)):
        return {n for elt in node.elts for n in _target_names(elt)}
    return set()


def _refers(node: ast.AST, names: set[str]) -> bool:
    """``node`` is one of ``names`` (``model``, ``self.model``) or an attribute of one
    (``model.module``), not a call on it (``model.parameters()``, ``model(x)``)."""
    if isinstance(node, ast.Name):
        return node.id in names
    if isinstance(node, ast.Attribute):
        return node.attr in names or _refers(node.value, names)
    if isinstance(node, ast.Subscript):
        return _refers(node.value, names)
    return False


def _wraps(value: ast.AST, names: set[str]) -> bool:
    """An expression that is still the instance: the name itself, or a call that takes it as
    an argument (``torch.compile(model)``, ``DDP(model, device_ids=[0])``)."""
    if _refers(value, names):
        return True
    return isinstance(value, ast.Call) and any(
        _refers(a, names) for a in (*value.args, *(k.value for k in value.keywords)))


def instance_names(tree: ast.Module, cls: str) -> set[str]:
    """Names bound to instances of ``cls`` in the file (see the module docstring)."""
    assigns: list[tuple[set[str], ast.AST]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            assigns.append(({n for t in node.targets for n in _target_names(t)}, node.value))
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            assigns.append((_target_names(node.target), node.value))
        elif isinstance(node, (ast.For, ast.AsyncFor)):  # for block in self.blocks: block(x)
            assigns.append((_target_names(node.target), node.iter))
    names: set[str] = set()
    for targets, value in assigns:
        if any(isinstance(n, ast.Call) and _callee(n) == cls for n in ast.walk(value)):
            names |= targets
    for _ in range(4):  # model = torch.compile(model); raw_model = model.module
        grown = set(names)
        for targets, value in assigns:
            if _wraps(value, names):
                grown |= targets
        if grown == names:
            break
        names = grown
    return names


def _calls(body: list[ast.stmt], name: str, in_loop: bool = False,
           instances: frozenset[str] = frozenset()) -> list[tuple[int, bool]]:
    """(line, inside a loop) of each call of ``name`` (or, given ``instances``, of any of
    those names instead) in ``body``, not entering nested scopes."""
    out: list[tuple[int, bool]] = []
    stack: list[tuple[ast.AST, bool]] = [(s, in_loop) for s in body if not isinstance(s, _SCOPES)]
    while stack:
        node, loop = stack.pop()
        if isinstance(node, ast.Call) and (
                _callee(node) in instances if instances else _callee(node) == name):
            out.append((node.lineno, loop))
        elif name in _ITERATION and isinstance(node, (ast.For, ast.AsyncFor)) and not (
                isinstance(node.iter, ast.Call) and _callee(node.iter) == "range"):
            out.append((node.lineno, loop))  # ``for x, y in loader:`` calls __next__
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _SCOPES):
                continue
            stack.append((child, loop or isinstance(node, _LOOPS)))
    return sorted(set(out))


@dataclass
class SourceFiles:
    """Source files found under ``roots`` (first match wins), parsed once each."""

    roots: list[Path] = field(default_factory=list)
    _texts: dict[str, list[str] | None] = field(default_factory=dict)
    _trees: dict[str, ast.Module | None] = field(default_factory=dict)

    def path(self, file: str) -> Path | None:
        p = Path(file)
        candidates = [p] if p.is_absolute() else [r / p for r in self.roots]
        for c in candidates:
            try:
                if c.is_file():
                    return c
            except OSError:
                continue
        return None

    def lines(self, file: str) -> list[str] | None:
        if file not in self._texts:
            p = self.path(file)
            try:
                self._texts[file] = p.read_text(errors="replace").splitlines() if p else None
            except OSError:
                self._texts[file] = None
        return self._texts[file]

    def _tree(self, file: str) -> ast.Module | None:
        if file not in self._trees:
            text = self.lines(file)
            try:
                self._trees[file] = ast.parse("\n".join(text)) if text is not None else None
            except (SyntaxError, ValueError):
                self._trees[file] = None
        return self._trees[file]

    def _body(self, file: str, function: str, line: int) -> list[ast.stmt] | None:
        tree = self._tree(file)
        if tree is None:
            return None
        if function == "<module>":
            return tree.body
        best = None
        named = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function:
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                end = node.end_lineno or node.lineno
                named.append((abs(first - line), node))
                if (line == 0 or first <= line <= end) and (best is None or first == line):
                    best = node
        if best is None and named:
            # The file was edited since the capture (lines moved): the function of that name
            # nearest to where the trace saw it.
            best = min(named, key=lambda d: d[0])[1]
        return best.body if best is not None else None

    def call_lines(self, file: str, function: str, line: int, callee: str) -> list[int]:
        """Lines in ``function``'s own body that call ``callee``, those in loops first."""
        if not callee:
            return []
        body = self._body(file, function, line)
        if body is None:
            return []
        if is_class_name(callee):  # a module: the calls of its instances, not of its class
            tree = self._tree(file)
            names = frozenset(instance_names(tree, callee)) if tree is not None else frozenset()
            found = _calls(body, callee, instances=names) if names else []
        else:
            found = _calls(body, callee)
        return [ln for ln, _ in sorted(found, key=lambda x: (not x[1], x[0]))]

    def excerpt(self, file: str, line: int, context: int = 2) -> list[tuple[int, str]]:
        """Numbered lines around ``line`` (empty when the file cannot be read)."""
        text = self.lines(file)
        if not text or line <= 0 or line > len(text):
            return []
        lo, hi = max(1, line - context), min(len(text), line + context)
        return [(n, text[n - 1]) for n in range(lo, hi + 1)]
