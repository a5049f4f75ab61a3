"""The project's import graph, read from source (AST, nothing executed), and the layer contracts
checked on it.

Every import counts, also one inside a function: a lazy import still ties two modules together.
A contract names what a layer may not import; a broken one is reported with the import chain
that breaks it (`module:line -> module:line -> target`), the way import-linter reports its
contracts, so the message says which line to move.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = ("privaudit",)
"""The project's import packages: one namespace (DESIGN.md)."""


@dataclass
class Graph:
    """Modules of the project, the project modules each one imports (with the line of the first
    such import) and the third-party top-level packages each one imports."""

    modules: dict[str, Path]
    edges: dict[str, dict[str, int]] = field(default_factory=dict)
    external: dict[str, dict[str, int]] = field(default_factory=dict)

    def chain(self, start: str, reached: Callable[[str], bool]) -> list[tuple[str, int]] | None:
        """The shortest import chain from `start` to a module for which `reached` holds, as
        (module, line of its import of the next) pairs ending with (that module, 0); None when
        there is none. Breadth-first, so the chain reported is the shortest."""
        before: dict[str, str | None] = {start: None}
        queue = deque([start])
        while queue:
            module = queue.popleft()
            if module != start and reached(module):
                path = [module]
                while before[path[-1]] is not None:
                    path.append(before[path[-1]])
                path.reverse()
                return [(m, self.edges[m][n]) for m, n in zip(path, path[1:])] + [(path[-1], 0)]
            for target in self.edges[module]:
                if target not in before:
                    before[target] = module
                    queue.append(target)
        return None

    def cycles(self) -> list[list[str]]:
        """Every strongly connected component of more than one module (Tarjan), each sorted."""
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        found: list[list[str]] = []

        def visit(module: str) -> None:
            index[module] = low[module] = len(index)
            stack.append(module)
            on_stack.add(module)
            for target in self.edges[module]:
                if target not in index:
                    visit(target)
                    low[module] = min(low[module], low[target])
                elif target in on_stack:
                    low[module] = min(low[module], index[target])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

        for module in sorted(self.modules):
            if module not in index:
                visit(module)
        return found


def _module_name(root: Path, path: Path) -> str:
    name = ".".join(path.relative_to(root).with_suffix("").parts)
    return name.removesuffix(".__init__")


def read_graph(root: Path, packages: Iterable[str] = PACKAGES) -> Graph:
    """The import graph of the `packages` under `root`."""
    modules = {_module_name(root, path): path for package in packages
               for path in sorted((root / package).rglob("*.py")) if "__pycache__" not in path.parts}
    graph = Graph(modules)

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    for module, path in modules.items():
        edges: dict[str, int] = {}
        external: dict[str, int] = {}
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = module.split(".")
                    parts = parts[: len(parts) - node.level + (1 if is_package else 0)]
                    base = ".".join(parts + ([base] if base else []))
                names = [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for name in names:
                target = resolve(name)
                if target is None:
                    external.setdefault(name.split(".")[0], node.lineno)
                elif target != module and not module.startswith(target + "."):
                    edges.setdefault(target, node.lineno)
        graph.edges[module] = edges
        graph.external[module] = external
    return graph


@dataclass(frozen=True)
class Contract:
    """Modules of `layer` (a predicate on module names) may import no module for which `forbidden`
    holds, directly (`transitive` False) or through any chain (True)."""

    name: str
    layer: Callable[[str], bool]
    forbidden: Callable[[str], bool]
    transitive: bool = False


def broken(graph: Graph, contracts: Iterable[Contract]) -> list[str]:
    """One line per import that breaks a contract: the contract and the import chain."""
    found = []
    for contract in contracts:
        for module in sorted(m for m in graph.modules if contract.layer(m)):
            if contract.transitive:
                chain = graph.chain(module, contract.forbidden)
                chains = [chain] if chain else []
            else:
                chains = [[(module, line), (target, 0)] for target, line in graph.edges[module].items()
                          if contract.forbidden(target)]
            for chain in chains:
                text = " -> ".join(f"{m}:{line}" if line else m for m, line in chain)
                found.append(f"{contract.name}: {text}")
    return found


def external_imports(graph: Graph, modules: Iterable[str], package: str) -> list[str]:
    """For each module, the shortest project chain to a module that imports the third-party
    `package` itself (`privaudit.reports.html:30 -> privaudit.store:17 -> torch`), one line each."""
    found = []
    for module in modules:
        if package in graph.external[module]:
            found.append(f"{module}:{graph.external[module][package]} -> {package}")
            continue
        chain = graph.chain(module, lambda m: package in graph.external[m])
        if chain:
            last = chain[-1][0]
            text = " -> ".join(f"{m}:{line}" for m, line in chain[:-1])
            found.append(f"{text} -> {last}:{graph.external[last][package]} -> {package}")
    return found
