"""The line that makes a call, read from the user's source file when it is readable.

torch.profiler's Python frames carry the line a function starts at, not the line a caller is
on. Where the source file can be read (the script's directory, the working directory, the
trace's directory), `SourceFiles.call_lines` finds the calls of a named callee inside one
function's own body (nested functions and classes excluded) with the standard library's `ast`.
When there are several, the calls inside a loop of that body come first: time that recurs every
training step is spent in the loop. Nothing is guessed when the file cannot be read or holds no
such call: the frame is then named by its function alone.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def _callee(node: ast.Call) -> str:
    f = node.func
    if isinstance(f, ast.Attribute):
        return f.attr
    if isinstance(f, ast.Name):
        return f.id
    return ""


def _calls(body: list[ast.stmt], name: str, in_loop: bool = False) -> list[tuple[int, bool]]:
    """(line, inside a loop) of each call of ``name`` in ``body``, not entering nested scopes."""
    out: list[tuple[int, bool]] = []
    stack: list[tuple[ast.AST, bool]] = [(s, in_loop) for s in body if not isinstance(s, _SCOPES)]
    while stack:
        node, loop = stack.pop()
        if isinstance(node, ast.Call) and _callee(node) == name:
            out.append((node.lineno, loop))
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
        found = _calls(body, callee)
        return [ln for ln, _ in sorted(found, key=lambda x: (not x[1], x[0]))]

    def excerpt(self, file: str, line: int, context: int = 2) -> list[tuple[int, str]]:
        """Numbered lines around ``line`` (empty when the file cannot be read)."""
        text = self.lines(file)
        if not text or line <= 0 or line > len(text):
            return []
        lo, hi = max(1, line - context), min(len(text), line + context)
        return [(n, text[n - 1]) for n in range(lo, hi + 1)]
