"""The import structure, stated in one table and checked: each package imports only packages of lower layers
(or its own), no modules import each other in a cycle, and a module imports other Ember modules inside a
function only where the table of deferred imports below says why.

    ir, limits, files, signals  <  dialects, isa, machine, predictor, host, bounded_zip  <  backend  <  frontends
      <  passes  <  sim  <  bench  <  plan  <  fuzz  <  cli

Data flows frontends -> passes -> backend -> sim; the backend sits below the passes in imports because the
`codegen` pass wraps it, and `ember-opt` writes `.dae` through that pass.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "ember"
LAYERS = [("ir", "limits", "files", "signals"), ("dialects", "isa", "machine", "predictor", "host", "bounded_zip"),
          ("backend",), ("frontends",), ("passes",), ("sim",), ("bench",), ("plan",), ("fuzz",), ("cli",)]
RANK = {pkg: k for k, layer in enumerate(LAYERS) for pkg in layer}
# Ember imports a function may make, and why it cannot make them at the top of its module.
DEFERRED = {
    "cli": "a command imports the library when it runs, so `--help` and a usage error answer at once",
    "ember.frontends": "an importer loads its reader (and onnx) only for a file of that kind",
    "ember.bench.gpu": "the Triton kernel needs triton, an optional extra",
}


def module_name(path: Path) -> str:
    parts = ["ember", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports(path: Path, text: str | None = None) -> list[tuple[str, bool, int]]:
    """(module imported, whether inside a function, line) of every Ember import of `path` (or of `text` as if it
    were that file), TYPE_CHECKING aside.  `from pkg import name` counts as an import of pkg.name when that is a
    module, else of pkg."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: list[tuple[str, bool, int]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _type_checking(child):
                continue
            inside = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[:len(package.split(".")) - child.level + 1]
                    base = ".".join(up + ([child.module] if child.module else []))
                if base.startswith("ember"):
                    for alias in child.names:
                        full = f"{base}.{alias.name}"
                        is_module = (ROOT.parent / (full.replace(".", "/") + ".py")).exists() or \
                            (ROOT.parent / full.replace(".", "/") / "__init__.py").exists()
                        out.append((full if is_module else base, inside, child.lineno))
            elif isinstance(child, ast.Import):
                out.extend((a.name, inside, child.lineno) for a in child.names if a.name.startswith("ember"))
            visit(child, inside)

    visit(ast.parse(path.read_text() if text is None else text), False)
    return out


def package_of(module: str) -> str:
    return module.split(".")[1] if module.count(".") else "ir"


def graph() -> dict[str, list[tuple[str, bool, int]]]:
    return {module_name(p): imports(p) for p in sorted(ROOT.rglob("*.py"))}


def test_every_package_has_a_layer() -> None:
    packages = {package_of(m) for m in graph() if m != "ember"}
    assert packages <= set(RANK), f"packages missing from LAYERS: {sorted(packages - set(RANK))}"


def test_no_module_imports_a_higher_layer() -> None:
    bad = []
    for mod, edges in graph().items():
        if mod == "ember":
            continue
        for target, _, line in edges:
            if target != "ember" and RANK[package_of(target)] > RANK[package_of(mod)]:
                bad.append(f"{mod}:{line} imports {target}")
    assert not bad, "\n".join(bad)


def test_no_import_cycles() -> None:
    """Tarjan's strongly connected components over every import, deferred ones included: a deferred import
    that only dodges a cycle is still the cycle."""
    g = graph()
    edges = {m: sorted({t for t, _, _ in e if t in g and t != m}) for m, e in g.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in edges:
        if v not in index:
            strong(v)
    assert not cycles, "modules that import each other: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_deferred_imports_have_a_reason() -> None:
    bad = []
    for mod, edges in graph().items():
        reason = DEFERRED.get(package_of(mod)) or DEFERRED.get(mod)
        bad += [f"{mod}:{line} imports {t} inside a function" for t, inside, line in edges if inside and not reason]
    assert not bad, "\n".join(bad)


def test_the_checker_sees_a_violation() -> None:
    """The parsing above finds a relative import of a higher layer, at the top and in a function (so the tests
    above can fail): a module of `ir` written to import the cli and the simulator."""
    text = "from ..cli import common\n\n\ndef f() -> None:\n    from ..sim import reference\n"
    found = imports(ROOT / "ir" / "probe.py", text)
    assert found == [("ember.cli.common", False, 1), ("ember.sim.reference", True, 5)]
