"""Which backend runs the course's code, what that device is, and moving arrays to it.

The backend is ``cuda`` when a CUDA GPU works through CuPy or PyTorch, else ``cpu``.
The environment variable ``GPUCOURSE_DEVICE=cpu|cuda`` overrides the choice.
"""
from __future__ import annotations

import contextlib
import functools
import html
import os
import platform
import sys
from dataclasses import asdict, dataclass, field

import numpy as np

from .errors import DeviceError, MissingDependency

ENV_VAR = "GPUCOURSE_DEVICE"
BACKENDS = ("cpu", "cuda")


def _try_import(name: str):
    try:
        return __import__(name)
    except Exception:  # a broken install is the same as a missing one here
        return None


@functools.lru_cache(maxsize=None)
def cupy_works() -> bool:
    """True when CuPy imports and can allocate on a GPU."""
    cp = _try_import("cupy")
    if cp is None:
        return False
    try:
        if not cp.is_available():
            return False
        cp.arange(1, dtype=cp.float32).sum().item()
        return True
    except Exception:
        return False


@functools.lru_cache(maxsize=None)
def torch_cuda_works() -> bool:
    """True when PyTorch sees a usable CUDA GPU."""
    torch = _try_import("torch")
    if torch is None:
        return False
    try:
        return bool(torch.cuda.is_available()) and torch.cuda.device_count() > 0
    except Exception:
        return False


def cuda_available() -> bool:
    """True when a CUDA GPU works through CuPy or PyTorch."""
    return cupy_works() or torch_cuda_works()


def backend() -> str:
    """The active backend, ``"cuda"`` or ``"cpu"``, honouring ``GPUCOURSE_DEVICE``."""
    wanted = os.environ.get(ENV_VAR, "").strip().lower()
    if wanted and wanted not in BACKENDS:
        raise DeviceError(
            f"{ENV_VAR}={wanted!r} is not a backend: set it to 'cpu' or 'cuda', or unset it."
        )
    if wanted == "cpu":
        return "cpu"
    if wanted == "cuda":
        if not cuda_available():
            raise DeviceError(
                f"{ENV_VAR}=cuda was asked for but no CUDA GPU works here "
                "(check `nvidia-smi` and `python -m gpucourse doctor`), or unset it to run on the CPU."
            )
        return "cuda"
    return "cuda" if cuda_available() else "cpu"


def is_cuda() -> bool:
    """True when the active backend is a CUDA GPU."""
    return backend() == "cuda"


def on_gpu() -> bool:
    """True when the course's CUDA C kernels run on a real GPU: the backend is cuda and CuPy
    works (else they run on the CPU emulator)."""
    return is_cuda() and cupy_works()


def require_cuda(what: str = "this step", needs: str | None = None) -> None:
    """Raise a clear error when the active backend is not a CUDA GPU, or (``needs`` "cupy" or
    "torch") when the library the step runs on the GPU is missing: MissingDependency, which
    ``make gpu-check`` reports as a skipped step."""
    if not is_cuda():
        raise DeviceError(
            f"{what} needs a CUDA GPU and this machine runs the course on the CPU; "
            "use the model or reference data shown next to it, or run on a machine with a GPU."
        )
    if needs == "cupy" and not cupy_works():
        raise MissingDependency(f"{what} runs CUDA C kernels through CuPy, which is missing "
                                "here: install it (pip install -e .[gpu]).")
    if needs == "torch" and not torch_cuda_works():
        raise MissingDependency(f"{what} runs PyTorch on the GPU; install a CUDA build of "
                                "PyTorch (see the README).")


# --------------------------------------------------------------------------- arrays

def asarray(array, dtype=None):
    """Copy a NumPy array to the active backend (a CuPy array on cuda, NumPy on cpu)."""
    if is_cuda() and cupy_works():
        import cupy as cp  # optional: present only where a GPU is

        return cp.ascontiguousarray(cp.asarray(array, dtype=dtype))
    return np.ascontiguousarray(np.asarray(array, dtype=dtype))


def empty(shape, dtype=np.float32):
    """Uninitialised array on the active backend (poisoned on the CPU: never trust it)."""
    if is_cuda() and cupy_works():
        import cupy as cp  # optional: present only where a GPU is

        return cp.empty(shape, dtype=dtype)
    out = np.empty(shape, dtype=dtype)
    if np.issubdtype(out.dtype, np.floating):
        out.fill(np.nan)
    else:
        out.fill(np.iinfo(out.dtype).max if np.issubdtype(out.dtype, np.integer) else 0)
    return out


def to_host(array) -> np.ndarray:
    """Return a NumPy copy of a CuPy, torch or NumPy array."""
    if hasattr(array, "get") and type(array).__module__.startswith("cupy"):
        return array.get()
    if type(array).__module__.startswith("torch"):
        t = array.detach().cpu()
        # NumPy has no bfloat16: widen to float32, which holds every bf16 value exactly.
        return (t.float() if str(t.dtype) == "torch.bfloat16" else t).numpy()
    return np.asarray(array)


def synchronize(which: str | None = None) -> None:
    """Wait for all queued GPU work (no-op on the CPU).

    ``which`` is the backend to wait for (default: the active one): a timer of CUDA work
    passes ``"cuda"``, because it must wait even when ``GPUCOURSE_DEVICE=cpu`` makes the CPU
    the active backend.
    """
    if (which or backend()) != "cuda":
        return
    if cupy_works():
        import cupy as cp  # optional: present only where a GPU is

        cp.cuda.Device().synchronize()
    if torch_cuda_works():
        import torch  # heavy: loaded only where a GPU is

        torch.cuda.synchronize()


@contextlib.contextmanager
def tf32(enabled: bool):
    """Let PyTorch's FP32 matmuls and convolutions use TF32 tensor cores inside the block, or
    force true FP32 with ``enabled=False``; the previous settings come back afterwards."""
    import torch  # heavy: only a PyTorch caller switches TF32

    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def torch_device() -> str:
    """The torch device string for the active backend: ``"cuda"`` or ``"cpu"``."""
    return "cuda" if is_cuda() and torch_cuda_works() else "cpu"


# --------------------------------------------------------------------------- description

@dataclass
class DeviceInfo:
    """What runs the course's code here. GPU fields are None on the CPU."""

    backend: str
    name: str
    compute_capability: tuple[int, int] | None = None
    sm_count: int | None = None
    memory_bytes: int | None = None
    l2_bytes: int | None = None
    memory_clock_khz: int | None = None
    memory_bus_width_bits: int | None = None
    peak_bandwidth_Bps: float | None = None
    driver_version: str | None = None
    runtime_version: str | None = None
    cpu_model: str = ""
    cpu_cores: int = 0
    python_version: str = field(default_factory=lambda: platform.python_version())
    numpy_version: str = field(default_factory=lambda: np.__version__)
    torch_version: str | None = None
    cupy_version: str | None = None
    torch_cuda: bool = False
    cupy_cuda: bool = False

    @property
    def is_cuda(self) -> bool:
        return self.backend == "cuda"

    @property
    def short_name(self) -> str:
        """A name fit for a plot title."""
        if self.is_cuda:
            return self.name
        return f"CPU: {self.cpu_model or 'unknown'} ({self.cpu_cores} cores)"

    def to_dict(self) -> dict:
        return asdict(self)

    def rows(self) -> list[tuple[str, str]]:
        """(label, value) pairs for a table, skipping unknown values."""
        gib = 1024**3
        rows = [("backend", self.backend), ("device", self.short_name)]
        if self.is_cuda:
            if self.compute_capability:
                rows.append(("compute capability", "%d.%d" % self.compute_capability))
            if self.sm_count:
                rows.append(("SMs", str(self.sm_count)))
            if self.memory_bytes:
                rows.append(("memory", f"{self.memory_bytes / gib:.1f} GiB"))
            if self.l2_bytes:
                rows.append(("L2", f"{self.l2_bytes / 2**20:.0f} MiB"))
            if self.peak_bandwidth_Bps:
                rows.append(("peak bandwidth (from clock x bus width)",
                             f"{self.peak_bandwidth_Bps / 1e9:.0f} GB/s"))
            if self.driver_version:
                rows.append(("driver / runtime", f"{self.driver_version} / {self.runtime_version}"))
        rows += [("python", self.python_version), ("numpy", self.numpy_version),
                 ("torch", self.torch_version or "not installed"),
                 ("cupy", self.cupy_version or "not installed")]
        return rows

    def __str__(self) -> str:
        width = max(len(k) for k, _ in self.rows())
        return "\n".join(f"{k:<{width}}  {v}" for k, v in self.rows())

    def _repr_html_(self) -> str:
        body = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
                       f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
                       for k, v in self.rows())
        return f"<table>{body}</table>"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(module_name: str) -> str | None:
    mod = _try_import(module_name)
    return getattr(mod, "__version__", None) if mod is not None else None


def _describe_cuda(info: DeviceInfo) -> None:
    """Fill the GPU fields, preferring CuPy's runtime properties (they include clocks)."""
    if cupy_works():
        import cupy as cp  # optional: present only where a GPU is

        dev = cp.cuda.Device()
        props = cp.cuda.runtime.getDeviceProperties(dev.id)
        name = props["name"]
        info.name = name.decode() if isinstance(name, bytes) else str(name)
        info.compute_capability = (int(props["major"]), int(props["minor"]))
        info.sm_count = int(props["multiProcessorCount"])
        info.memory_bytes = int(props["totalGlobalMem"])
        info.l2_bytes = int(props["l2CacheSize"])
        # Newer CUDA runtimes dropped these two fields from cudaDeviceProp.
        clock = props.get("memoryClockRate")
        bus = props.get("memoryBusWidth")
        if not clock:
            try:
                attr = cp.cuda.runtime.cudaDevAttrMemoryClockRate
                clock = cp.cuda.runtime.deviceGetAttribute(attr, dev.id)
                bus = cp.cuda.runtime.deviceGetAttribute(
                    cp.cuda.runtime.cudaDevAttrGlobalMemoryBusWidth, dev.id)
            except Exception:
                clock = bus = None
        if clock and bus:
            info.memory_clock_khz, info.memory_bus_width_bits = int(clock), int(bus)
            # DDR: two transfers per clock.
            info.peak_bandwidth_Bps = 2.0 * clock * 1e3 * bus / 8
        drv = cp.cuda.runtime.driverGetVersion()
        rt = cp.cuda.runtime.runtimeGetVersion()
        info.driver_version = f"{drv // 1000}.{drv % 1000 // 10}"
        info.runtime_version = f"{rt // 1000}.{rt % 1000 // 10}"
    elif torch_cuda_works():
        import torch  # heavy: loaded only where a GPU is

        p = torch.cuda.get_device_properties(0)
        info.name = p.name
        info.compute_capability = (p.major, p.minor)
        info.sm_count = p.multi_processor_count
        info.memory_bytes = p.total_memory
        info.l2_bytes = getattr(p, "L2_cache_size", None)
        info.runtime_version = torch.version.cuda


@functools.lru_cache(maxsize=4)
def _describe(which: str) -> DeviceInfo:
    info = DeviceInfo(backend=which, name="cpu", cpu_model=_cpu_model(),
                      cpu_cores=os.cpu_count() or 1,
                      torch_version=_version("torch"), cupy_version=_version("cupy"),
                      torch_cuda=torch_cuda_works(), cupy_cuda=cupy_works())
    if which == "cuda":
        _describe_cuda(info)
    else:
        info.name = info.short_name
    return info


def describe(which: str | None = None) -> DeviceInfo:
    """A record of the active device (or of backend ``which``, "cpu" or "cuda"): GPU name and
    properties, or the CPU model and cores."""
    return _describe(which or backend())


def bandwidth_buffer_bytes(factor: int = 16, cap: int = 2 * 2**30) -> int:
    """Bytes of one buffer of a bandwidth experiment on the active GPU: ``factor`` times its L2
    (so the cache cannot serve it; the course's rule is well over ten times), at least 256 MiB,
    at most ``cap`` and a tenth of the GPU's memory."""
    info = describe()
    want = max(factor * (info.l2_bytes or 50 * 2**20), 256 * 2**20)
    return int(min(want, cap, (info.memory_bytes or 8 * 2**30) // 10))


# --------------------------------------------------------------------------- banner

class Banner:
    """The first output of every notebook: what runs where, in plain words."""

    def __init__(self, info: DeviceInfo):
        self.info = info

    def lines(self) -> list[str]:
        i = self.info
        if i.is_cuda:
            cc = "%d.%d" % i.compute_capability if i.compute_capability else "?"
            how = []
            if i.cupy_cuda:
                how.append("CUDA C kernels run on the GPU through CuPy")
            else:
                how.append("CuPy is missing, so CUDA C kernels run on the CPU emulator "
                           "(pip install -e .[gpu])")
            how.append("PyTorch runs on the GPU" if i.torch_cuda else
                       "PyTorch has no CUDA here, so torch experiments run on the CPU")
            return [f"GPU mode: {i.name} (compute capability {cc}, {i.sm_count} SMs).",
                    "; ".join(how) + ". Timings are measured here with CUDA events."]
        return [
            f"CPU mode: no CUDA GPU here ({i.short_name}).",
            "CUDA C kernels run on the course's CPU emulator, for correctness only; "
            "GPU figures are labelled models or reference measurements that name their GPU. "
            "PyTorch and NumPy experiments are measured for real on this CPU.",
        ]

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        colour = "#1b7837" if self.info.is_cuda else "#2166ac"
        head, *rest = self.lines()
        body = "".join(f"<div>{html.escape(r)}</div>" for r in rest)
        return (f"<div style='border-left:4px solid {colour};padding:4px 10px'>"
                f"<b>{html.escape(head)}</b>{body}"
                f"<div style='color:#666;font-size:90%'>python {html.escape(self.info.python_version)}, "
                f"torch {html.escape(str(self.info.torch_version))}, "
                f"cupy {html.escape(str(self.info.cupy_version))}</div></div>")


def banner() -> Banner:
    """What runs where, for the first cell of a notebook."""
    return Banner(describe())


def platform_summary() -> dict:
    """Versions and host facts for result files."""
    return {"python": sys.version.split()[0], "platform": platform.platform(),
            **{k: v for k, v in describe().to_dict().items()
               if k in ("backend", "name", "torch_version", "cupy_version", "driver_version",
                        "runtime_version", "cpu_model", "cpu_cores")}}
