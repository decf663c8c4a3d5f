"""No import circles inside advisor: lazy imports inside functions count (a lazy import still
makes the two modules depend on each other, and only hides the circle from the interpreter);
imports under ``if TYPE_CHECKING:`` do not (annotations only, never executed).

Complements `tests/test_layers.py`, which orders the packages; this orders the modules inside
each one. The graph is read with `ast`, as there.
"""

from __future__ import annotations

from pathlib import Path

from tests.test_layers import imports, module_of, sources


def _runtime_imports(path: Path) -> set[str]:
    return imports(path, runtime_only=True)


def import_circles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    graph = {module_of(p): _runtime_imports(p) for p in sources()}
    graph = {m: {d for d in deps if d in graph and d != m} for m, deps in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_itself_through_others():
    assert import_circles() == []


def test_lazy_imports_count_and_typing_only_ones_do_not(tmp_path):
    """An import inside a function is an edge; one under TYPE_CHECKING is not."""
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("from advisor.engine import rule\n", encoding="utf-8")
    b.write_text("def f():\n    from advisor.engine import docs\n"
                 "if TYPE_CHECKING:\n    from advisor.report import model\n", encoding="utf-8")
    assert _runtime_imports(a) == {"advisor.engine.rule"}
    assert _runtime_imports(b) == {"advisor.engine.docs"}
