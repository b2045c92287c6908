"""The tests ``make test-cpu-checks`` selects carry the marker ``cpu_check``: every chapter 1-6
has some, so renaming or moving a test cannot silently drop a chapter from the target."""
import ast
import pathlib
import re

TESTS = pathlib.Path(__file__).resolve().parent


def _is_cpu_check(node) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "cpu_check"


def marked_tests(folder: pathlib.Path = TESTS) -> dict[str, list[str]]:
    """{file name: its tests that carry cpu_check (a file-wide ``pytestmark``: '*')}."""
    out = {}
    for path in sorted(folder.glob("test_*.py")):
        tree = ast.parse(path.read_text())
        found = []
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark"
                                                    for t in node.targets):
                if any(_is_cpu_check(n) for n in ast.walk(node.value)):
                    found.append("*")
            elif isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                if any(_is_cpu_check(n) for d in node.decorator_list for n in ast.walk(d)):
                    found.append(node.name)
        if found:
            out[path.name] = found
    return out


def test_every_chapter_has_cpu_checks():
    marked = marked_tests()
    chapters = {int(m.group(1)) for name in marked if (m := re.match(r"test_ch(\d)_", name))}
    assert chapters >= {1, 2, 3, 4, 5, 6}, f"chapters without a cpu_check test: " \
        f"{sorted({1, 2, 3, 4, 5, 6} - chapters)}"
    assert marked["test_tolerances.py"] == ["*"]


def test_the_finder_sees_decorators_and_file_marks(tmp_path):
    (tmp_path / "test_ch9_x.py").write_text(
        "import pytest\n\n\n@pytest.mark.cpu_check\n@pytest.mark.parametrize('n', [1])\n"
        "def test_a(n):\n    pass\n\n\n@pytest.mark.slow\ndef test_b():\n    pass\n")
    (tmp_path / "test_y.py").write_text("import pytest\n\npytestmark = [pytest.mark.cpu_check]\n")
    (tmp_path / "test_z.py").write_text("def test_c():\n    pass\n")
    assert marked_tests(tmp_path) == {"test_ch9_x.py": ["test_a"], "test_y.py": ["*"]}
