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


def conda_deps(root, name="environment.yml") -> dict[str, str]:
    env = yaml.safe_load((root / name).read_text())
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


def test_binder_environment_is_the_runtime_and_lab_dependencies(root):
    """Binder gets what a learner needs to run the notebooks, not the test tools."""
    data = tomllib.loads((root / "pyproject.toml").read_text())
    project = data["project"]
    want = dict(_split(r) for r in project["dependencies"] + project["optional-dependencies"]["lab"])
    assert conda_deps(root, "binder/environment.yml") == want
    env = yaml.safe_load((root / "binder/environment.yml").read_text())
    assert any(re.fullmatch(r"python=3\.\d+", d) for d in env["dependencies"] if isinstance(d, str)), \
        "repo2docker needs an exact Python version (python=3.X)"
    # repo2docker builds the environment before the repository is there: no local install in it.
    assert not any(isinstance(d, dict) for d in env["dependencies"])
    post = root / "binder/postBuild"
    assert post.stat().st_mode & 0o111, "binder/postBuild must be executable"
    assert "pip install --no-deps -e ." in post.read_text()


def test_torch_is_a_range_and_ci_pins_it(root):
    py = pyproject_deps(root)
    assert py["torch"].startswith(">="), "torch must be a range so an installed build is kept"
    assert re.search(r"^TORCH_SPEC \?= torch==\d", (root / "Makefile").read_text(), re.M), \
        "the Makefile must pin the torch that CI installs"


def test_cupy_only_in_gpu_extras(root):
    data = tomllib.loads((root / "pyproject.toml").read_text())
    assert not any("cupy" in d for d in data["project"]["dependencies"])
    assert any("cupy" in d for d in data["project"]["optional-dependencies"]["gpu"])


def test_wheel_carries_every_package_file(root, tmp_path):
    """Colab and other non-editable installs get the kernels, emulator sources and data too."""
    import shutil
    import subprocess
    import sys
    import zipfile

    src = tmp_path / "src"
    shutil.copytree(root / "src", src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(root / name, tmp_path / name)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           "--no-build-isolation", "-w", str(tmp_path / "dist"), str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    [wheel] = (tmp_path / "dist").glob("gpucourse-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    wanted = {str(p.relative_to(src)) for p in (src / "gpucourse").rglob("*")
              if p.is_file() and p.suffix != ".pyc" and "__pycache__" not in p.parts}
    missing = sorted(wanted - shipped)
    assert not missing, f"not in the wheel (add them to package-data): {missing}"
