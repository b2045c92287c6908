"""``python -m gpucourse doctor``: check the environment and say how to fix each problem."""
from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from dataclasses import dataclass

OK, WARN, FAIL = "ok", "warn", "FAIL"


@dataclass
class Finding:
    status: str
    what: str
    detail: str
    fix: str = ""


def _module_version(name: str):
    try:
        mod = importlib.import_module(name)
    except Exception as exc:  # a broken install counts as missing, with its reason
        return None, f"{type(exc).__name__}: {exc}"
    return getattr(mod, "__version__", "?"), ""


def _essential_module(name: str, pip_name: str, why: str) -> Finding:
    version, err = _module_version(name)
    if version is None:
        return Finding(FAIL, name, f"not importable ({err})",
                       f"run `make lab` (it installs the course's dependencies) or "
                       f"`pip install -e .` ({pip_name}; {why})")
    return Finding(OK, name, version)


def _nvidia_smi() -> str | None:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _cxx_compiler() -> Finding:
    # Ask the emulator, so that doctor reports the compiler it will really use ($CXX first).
    # Lazy, as every import of the package here: doctor must run to say what is missing.
    from .emulator.build import compiler  # lazy: see above
    from .errors import DeviceError  # lazy: see above

    try:
        exe, identity = compiler(fresh=True)
    except DeviceError as exc:
        return Finding(FAIL, "C++ compiler", str(exc),
                       "install one (Debian/Ubuntu: `sudo apt install g++`; macOS: "
                       "`xcode-select --install`) or set CXX; the CPU emulator compiles kernels "
                       "with it")
    return Finding(OK, "C++ compiler", f"{identity} ({exe})")


def _emulator_builds() -> Finding:
    """Build (or find cached) what every kernel build on the emulator links."""
    import time

    from .check.lab import build_shared_parts  # lazy: see _cxx_compiler

    start = time.perf_counter()
    problems = build_shared_parts()
    if problems:
        return Finding(FAIL, "kernel emulator", "; ".join(problems),
                       "fix the C++ compiler above (or set CXX to one that builds C++17)")
    return Finding(OK, "kernel emulator", f"runtime and instrumentation built or cached "
                   f"({time.perf_counter() - start:.1f} s)")


def findings() -> list[Finding]:
    """Every check, in the order a learner would fix them."""
    out: list[Finding] = []
    py = sys.version_info
    out.append(Finding(OK if py >= (3, 10) else FAIL, "python", sys.version.split()[0],
                       "" if py >= (3, 10) else "use Python 3.10 or newer"))
    out.append(_essential_module("numpy", "numpy", "arrays everywhere"))
    out.append(_essential_module("matplotlib", "matplotlib", "every figure"))
    out.append(_essential_module("torch", "torch", "PyTorch experiments"))
    out.append(_essential_module("ipywidgets", "ipywidgets", "the interactive controls"))
    out.append(_essential_module("ipykernel", "ipykernel", "runs the notebooks' Python"))
    out.append(_essential_module("tqdm", "tqdm", "progress bars of the headless run"))
    lab_version, _ = _module_version("jupyterlab")
    out.append(Finding(OK if lab_version else WARN, "jupyterlab", lab_version or "not installed",
                       "" if lab_version else "`make lab` installs it (or pip install jupyterlab)"))
    out.append(_cxx_compiler())
    if out[-1].status == OK:
        out.append(_emulator_builds())

    from . import device  # lazy: it needs NumPy, which the checks above report on

    smi = _nvidia_smi()
    torch_cuda = device.torch_cuda_works()
    cupy_version, _ = _module_version("cupy")
    cupy_ok = device.cupy_works()
    if smi:
        out.append(Finding(OK, "NVIDIA driver", smi))
    else:
        out.append(Finding(OK, "NVIDIA driver", "no nvidia-smi: CPU mode "
                           "(kernels on the emulator, GPU figures from models and reference data)"))
    if smi and not torch_cuda:
        out.append(Finding(WARN, "torch CUDA", "a GPU is present but torch has no CUDA",
                           "install a CUDA build of torch, e.g. `pip install torch "
                           "--index-url https://download.pytorch.org/whl/cu128`"))
    elif torch_cuda:
        import torch  # heavy and optional: only where PyTorch has CUDA

        out.append(Finding(OK, "torch CUDA", f"CUDA {torch.version.cuda}, "
                           f"{torch.cuda.get_device_name(0)}"))
    if smi and not cupy_ok:
        fix = ("`pip install -e .[gpu]` (CUDA 12 driver) or `pip install -e .[gpu-cuda13]` "
               "(CUDA 13 driver)")
        detail = f"cupy {cupy_version} cannot use the GPU" if cupy_version else "cupy not installed"
        out.append(Finding(WARN, "cupy", detail + "; kernels fall back to the emulator", fix))
    elif cupy_ok:
        import cupy as cp  # optional: only where CuPy works

        rt = cp.cuda.runtime.runtimeGetVersion()
        out.append(Finding(OK, "cupy", f"{cupy_version}, CUDA runtime {rt // 1000}.{rt % 1000 // 10}"))
    else:
        out.append(Finding(OK, "cupy", f"{cupy_version or 'not installed'} (only needed on a GPU)"))
    try:
        out.append(Finding(OK, "backend", device.banner().lines()[0]))
    except Exception as exc:
        out.append(Finding(FAIL, "backend", str(exc), "unset GPUCOURSE_DEVICE or fix the GPU setup"))
    out += _reference_files()
    return out


def _reference_files(folder=None) -> list[Finding]:
    """One warning per reference file that figures leave out, naming it and why; none when all
    are fine (a warning: the course runs without them)."""
    from . import paths, reference  # lazy: see _cxx_compiler

    folder = paths.REFERENCE_DIR if folder is None else folder
    return [Finding(WARN, "reference data", problem,
                    f"figures leave this file out: fix or delete it in {folder} (`make gpu-check` "
                    "on a GPU writes a new one)")
            for problem in reference.problems(folder)]


def main() -> int:
    """Print the report; exit status 1 when something essential is missing."""
    rows = findings()
    width = max(len(f.what) for f in rows)
    for f in rows:
        print(f"[{f.status:>4}] {f.what:<{width}}  {f.detail}")
        if f.fix:
            print(f"{'':>7} {'':<{width}}  fix: {f.fix}")
    failed = [f for f in rows if f.status == FAIL]
    print("\nAll essential checks passed." if not failed else
          f"\n{len(failed)} essential check(s) failed: fix them as shown above.")
    return 1 if failed else 0
