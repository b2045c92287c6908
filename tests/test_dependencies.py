"""pyproject.toml and environment.yml must list the same dependencies."""
import re
import tomllib

import yaml

# conda-forge names that differ from PyPI names.
CONDA_TO_PYPI = {"pytorch": "torch"}


def _split(req: str) -> tuple[str, str]:
    m = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", req)
    return m.group(1).lower().replace("_", "-"), m.group(2).replace(" ", "")


def pyproject_deps(root) -> dict[str, str]:
    data = tomllib.loads((root / "pyproject.toml").read_text())
    reqs = list(data["project"]["dependencies"])
    extras = data["project"]["optional-dependencies"]
    reqs += extras["lab"] + extras["dev"]
    return dict(_split(r) for r in reqs)


def conda_deps(root) -> dict[str, str]:
    env = yaml.safe_load((root / "environment.yml").read_text())
    out = {}
    for dep in env["dependencies"]:
        if isinstance(dep, str):
            name, spec = _split(dep)
            if name in ("python", "pip"):
                continue
            out[CONDA_TO_PYPI.get(name, name)] = spec
    return out


def test_environment_yml_matches_pyproject(root):
    py, conda = pyproject_deps(root), conda_deps(root)
    missing = sorted(set(py) - set(conda))
    extra = sorted(set(conda) - set(py))
    differ = sorted(k for k in set(py) & set(conda) if py[k] != conda[k])
    assert not (missing or extra or differ), (
        f"environment.yml and pyproject.toml drifted: missing in environment.yml {missing}, "
        f"only in environment.yml {extra}, different versions {differ}")


def test_torch_is_a_range_and_ci_pins_it(root):
    py = pyproject_deps(root)
    assert py["torch"].startswith(">="), "torch must be a range so an installed build is kept"
    assert re.search(r"^TORCH_SPEC \?= torch==\d", (root / "Makefile").read_text(), re.M), \
        "the Makefile must pin the torch that CI installs"


def test_cupy_only_in_gpu_extras(root):
    data = tomllib.loads((root / "pyproject.toml").read_text())
    assert not any("cupy" in d for d in data["project"]["dependencies"])
    assert any("cupy" in d for d in data["project"]["optional-dependencies"]["gpu"])
