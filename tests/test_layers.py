"""The package's layers: a module imports only from its own layer or below, its top-level
imports form no circle, and an import inside a function is an exception that says why.

``LAYERS`` is the one table of the layers; docs/design.md draws the same order, and a test
here keeps the two in step.
"""
from __future__ import annotations

import ast
import io
import pathlib
import re
import tokenize
from dataclasses import dataclass

import pytest

PACKAGE = "gpucourse"

#: Lowest first. A module may import from its own layer and the layers before it; the
#: package's ``__init__`` sits above all of them and loads submodules on first use.
LAYERS = (
    ("errors", "display", "paths"),
    ("device", "specs", "bench", "precision"),
    ("emulator",),
    ("kernels",),
    ("models", "profiler", "reference"),
    ("check",),
    ("experiments",),
    ("plot", "widgets", "draw", "runner", "doctor", "grade", "__main__"),
)

#: Imports of the package inside functions, without a comment saying why, that the chapter
#: modules still hold: (file, imported module). The chapter phase of the layout work (one
#: package per chapter, one module per section) empties this list; never add to it.
ALLOWED_UNCOMMENTED: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class Import:
    """One import of a package module: who imports what, where, and how."""

    file: str        # relative to the package folder, e.g. "check/ch2.py"
    line: int
    source: str      # the importing module, e.g. "gpucourse.check.ch2"
    target: str      # the imported module, e.g. "gpucourse.profiler"
    in_function: bool
    commented: bool  # the statement's lines carry a `# ...` comment


def _module_name(path: pathlib.Path, root: pathlib.Path, package: str) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((package, *parts))


def _is_module(name: str, root: pathlib.Path, package: str) -> bool:
    rel = pathlib.Path(*name.split(".")[1:]) if name != package else pathlib.Path()
    return (root / rel).with_suffix(".py").is_file() or (root / rel / "__init__.py").is_file()


def _comment_lines(text: str) -> set[int]:
    """Line numbers that hold a comment (a `#` outside strings)."""
    out = set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            out.add(tok.start[0])
    return out


def package_imports(root: pathlib.Path, package: str = PACKAGE) -> list[Import]:
    """Every import of a module of ``package`` (its folder: ``root``) in its own modules."""
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        tree = ast.parse(text)
        comments = _comment_lines(text)
        source = _module_name(path, root, package)
        own_package = source if path.name == "__init__.py" else source.rsplit(".", 1)[0]
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}

        def in_function(node) -> bool:
            while node in parents:
                node = parents[node]
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    return True
            return False

        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names
                           if a.name == package or a.name.startswith(package + ".")]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = own_package.split(".")
                    base = base[:len(base) - (node.level - 1)]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                if module != package and not module.startswith(package + "."):
                    continue
                # `from pkg import name`: the submodule pkg.name where there is one
                subs = [f"{module}.{a.name}" for a in node.names]
                targets = [s for s in subs if _is_module(s, root, package)]
                if len(targets) < len(subs):
                    targets.append(module)
            lines = range(node.lineno, getattr(node, "end_lineno", node.lineno) + 1) \
                if targets else ()
            for target in targets:
                found.append(Import(str(path.relative_to(root)), node.lineno, source, target,
                                    in_function(node), any(n in comments for n in lines)))
    return found


def layer_of(module: str, layers=LAYERS, package: str = PACKAGE) -> int | None:
    """The index of a module's layer (None for the package's own ``__init__``)."""
    if module == package:
        return None
    top = module.split(".")[1]
    for i, names in enumerate(layers):
        if top in names:
            return i
    raise KeyError(f"{module} is in no layer: add {top!r} to LAYERS and to docs/design.md")


def _layer_text(i: int, layers=LAYERS) -> str:
    return f"layer {i + 1} ({', '.join(layers[i])})"


def upward_imports(imports: list[Import], layers=LAYERS, package: str = PACKAGE) -> list[str]:
    """One line per import of a higher layer: file, line and both layers."""
    out = []
    for imp in imports:
        src, dst = layer_of(imp.source, layers, package), layer_of(imp.target, layers, package)
        if src is None or dst is None or dst <= src:
            continue
        out.append(f"{imp.file}:{imp.line}: {imp.source} ({_layer_text(src, layers)}) imports "
                   f"{imp.target} ({_layer_text(dst, layers)})")
    return out


def import_circles(imports: list[Import]) -> list[list[str]]:
    """The circles among top-level imports: each a list of modules, the first repeated last."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        if not imp.in_function and imp.source != imp.target:
            graph.setdefault(imp.source, set()).add(imp.target)
    circles, done = [], set()

    def visit(node, path, on_path):
        for nxt in sorted(graph.get(node, ())):
            if nxt in on_path:
                cycle = path[path.index(nxt):] + [nxt]
                key = frozenset(cycle)
                if key not in done:
                    done.add(key)
                    circles.append(cycle)
            elif nxt not in finished:
                on_path.add(nxt)
                visit(nxt, path + [nxt], on_path)
                on_path.discard(nxt)
        finished.add(node)

    finished: set[str] = set()
    for start in sorted(graph):
        if start not in finished:
            visit(start, [start], {start})
    return circles


def uncommented_function_imports(imports: list[Import], allowed=frozenset()) -> list[str]:
    """Imports of the package inside functions with no comment saying why, less ``allowed``."""
    return [f"{imp.file}:{imp.line}: {imp.source} imports {imp.target} inside a function "
            f"without a comment saying why (import it at the top, or say why not)"
            for imp in imports
            if imp.in_function and not imp.commented and (imp.file, imp.target) not in allowed]


# --------------------------------------------------------------------------- the package

@pytest.fixture(scope="module")
def imports(root):
    return package_imports(root / "src" / PACKAGE)


@pytest.fixture(scope="module")
def root():
    return pathlib.Path(__file__).resolve().parent.parent


def test_every_module_is_in_a_layer(root):
    folder = root / "src" / PACKAGE
    for path in folder.rglob("*.py"):
        layer_of(_module_name(path, folder, PACKAGE))  # raises KeyError naming it


def test_no_module_imports_a_higher_layer(imports):
    bad = upward_imports(imports)
    assert not bad, "imports of a higher layer:\n" + "\n".join(bad)


def test_top_level_imports_form_no_circle(imports):
    circles = import_circles(imports)
    assert not circles, "import circles:\n" + "\n".join(" -> ".join(c) for c in circles)


def test_imports_inside_functions_say_why(imports):
    bad = uncommented_function_imports(imports, ALLOWED_UNCOMMENTED)
    assert not bad, "\n".join(bad)


def test_the_allow_list_only_shrinks(imports):
    """Every allowed exception still exists: one that was fixed leaves the list."""
    present = {(i.file, i.target) for i in imports if i.in_function and not i.commented}
    stale = sorted(ALLOWED_UNCOMMENTED - present)
    assert not stale, f"fixed, so remove from ALLOWED_UNCOMMENTED: {stale}"


def test_docs_draw_the_same_layers(root):
    """docs/design.md shows LAYERS as one line, lowest first: `a, b -> c -> ...`."""
    text = (root / "docs" / "design.md").read_text()
    drawn = re.search(r"^```layers\n(.*?)\n```", text, re.M | re.S)
    assert drawn, "docs/design.md needs a ```layers block drawing LAYERS"
    layers = tuple(tuple(n.strip().strip("`") for n in part.split(","))
                   for part in re.split(r"\s*(?:->|→)\s*", " ".join(drawn.group(1).split())))
    assert layers == LAYERS


# --------------------------------------------------------------------------- the checker itself

def _fake_package(tmp_path, files: dict[str, str]) -> pathlib.Path:
    root = tmp_path / PACKAGE
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_checker_finds_a_deliberate_violation(tmp_path):
    """A small fake package: specs imports experiments (two layers up, inside a function and
    at the top), errors and display import each other, and one import hides in a function."""
    root = _fake_package(tmp_path, {
        "__init__.py": "",
        "errors.py": "from . import display\n",
        "display.py": "from .errors import CourseError\n",
        "specs.py": ("from .experiments import ch1\n\n\n"
                     "def f():\n    from . import experiments\n    return experiments\n"),
        "experiments/__init__.py": "",
        "experiments/ch1.py": ("from .. import specs\n\n\n"
                               "def g():\n    from ..errors import CourseError  # lazy: why\n"
                               "    from .. import display\n"),
    })
    imports = package_imports(root)
    up = upward_imports(imports)
    assert up == [
        "specs.py:1: gpucourse.specs (layer 2 (device, specs, bench, precision)) imports "
        "gpucourse.experiments.ch1 (layer 7 (experiments))",
        "specs.py:5: gpucourse.specs (layer 2 (device, specs, bench, precision)) imports "
        "gpucourse.experiments (layer 7 (experiments))",
    ]
    circles = {frozenset(c) for c in import_circles(imports)}
    assert circles == {frozenset({"gpucourse.errors", "gpucourse.display"}),
                       frozenset({"gpucourse.specs", "gpucourse.experiments.ch1"})}
    hidden = uncommented_function_imports(imports)
    assert sorted(hidden) == [
        "experiments/ch1.py:6: gpucourse.experiments.ch1 imports gpucourse.display inside a "
        "function without a comment saying why (import it at the top, or say why not)",
        "specs.py:5: gpucourse.specs imports gpucourse.experiments inside a function without a "
        "comment saying why (import it at the top, or say why not)",
    ]
    assert uncommented_function_imports(
        imports, {("specs.py", "gpucourse.experiments"),
                  ("experiments/ch1.py", "gpucourse.display")}) == []


def test_the_checker_passes_a_package_that_keeps_its_layers(tmp_path):
    root = _fake_package(tmp_path, {
        "__init__.py": "import importlib\n",
        "errors.py": "class CourseError(Exception):\n    pass\n",
        "specs.py": "from .errors import CourseError\n",
        "experiments/__init__.py": "",
        "experiments/ch1.py": "from .. import errors, specs\nfrom . import ch2\n",
        "experiments/ch2.py": "from ..specs import CourseError\n",
    })
    imports = package_imports(root)
    assert {(i.source, i.target) for i in imports} == {
        ("gpucourse.specs", "gpucourse.errors"),
        ("gpucourse.experiments.ch1", "gpucourse.errors"),
        ("gpucourse.experiments.ch1", "gpucourse.specs"),
        ("gpucourse.experiments.ch1", "gpucourse.experiments.ch2"),
        ("gpucourse.experiments.ch2", "gpucourse.specs")}
    assert upward_imports(imports) == [] and import_circles(imports) == []
    assert uncommented_function_imports(imports) == []
