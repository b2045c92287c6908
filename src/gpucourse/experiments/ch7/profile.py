"""Step 0, profile first: ``torch.profiler`` over a few training steps, the time sorted into
categories, the kernels counted, and the peak memory of a step.

Categories. Each unit of work is put in one category by the nearest enclosing thing that
says what it is for: the optimizer's step (PyTorch marks it ``Optimizer.step#AdamW.step``),
an autograd node in the backward pass (``BmmBackward0``: the attention's batched product),
the operator the model called (``aten::matmul`` of 4-D tensors in this model is only the
attention's, ``aten::linear`` the layers'), else the kernel's own name. Time in no operator
at all is the framework's overhead between operators (Python, dispatch) on the CPU; on a GPU
the time the GPU had no kernel to run: the gaps between kernels.

Kernels. On a GPU, the kernels the profiler saw run. On the CPU, the operators that did work:
the innermost ones that are not views, allocations or reads of a single value (a view does no
work, an ``aten::linear`` only calls ``aten::addmm``), plus the C++ kernels torch.compile
generated (named in the profile because inductor's ``cpp.enable_kernel_profile`` is on).
"""
from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass, field

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from ... import device as gdev
from ...display import Table

CATEGORIES = ("matmul", "attention", "elementwise and norms", "data movement",
              "fused (torch.compile)", "custom op", "optimizer", "overhead")
OVERHEAD_NAME = {"cpu": "framework overhead between operators (Python, dispatch)",
                 "cuda": "GPU idle: gaps between kernels"}
STEP_SCOPE = "## training step ##"

#: Operators that do no work of their own (views and metadata, allocations, a value read).
NO_WORK = {
    "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "transpose", "t",
    "permute", "expand", "expand_as", "unsqueeze", "squeeze", "select", "slice", "split",
    "split_with_sizes", "chunk", "unbind", "narrow", "detach", "detach_", "alias", "lift_fresh",
    "resolve_conj", "resolve_neg", "contiguous", "numpy_T", "empty", "empty_like",
    "empty_strided", "new_empty", "new_empty_strided", "resize_", "_local_scalar_dense", "item",
    "result_type", "set_", "to", "_to_copy", "is_nonzero", "size", "stride", "lift",
    "_has_compatible_shallow_copy_type", "zeros_like", "ones_like", "zeros", "ones", "full",
    "scalar_tensor", "arange", "_efficientzerotensor", "broadcast_tensors", "flatten",
    "unflatten", "view_as", "type_as",
}
ATTENTION_OPS = {"matmul", "softmax", "_softmax", "masked_fill", "div", "dropout",
                 "scaled_dot_product_attention"}
ATTENTION_NODES = ("Bmm", "Softmax", "MaskedFill", "Div", "ScaledDotProduct", "Flash",
                   "EfficientAttention", "CudnnAttention", "NativeDropout")
MATMUL_OPS = {"linear", "addmm", "mm", "bmm", "baddbmm", "addbmm", "_addmm_activation"}
MATMUL_NODES = ("Addmm", "Mm", "Linear")
DATA_OPS = {"copy_", "_to_copy", "clone", "cat", "embedding", "embedding_dense_backward",
            "index_select", "index", "index_put_", "gather", "scatter", "contiguous", "stack",
            "_unsafe_index", "index_add_"}
DATA_NODES = ("Embedding", "ToCopy", "Clone", "Cat", "Index")


@contextlib.contextmanager
def quiet_native_output():
    """Silence what PyTorch's C++ profiler prints straight to the process's stdout and stderr
    (a line at each start and stop, an allocator warning): in a notebook it would bury the
    results. Python's own output and warnings are not affected."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, ValueError):
            pass
    try:
        saved = [os.dup(1), os.dup(2)]
    except OSError:  # no file descriptors to redirect (an embedded interpreter)
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)


def _op(name: str) -> str | None:
    """'aten::addmm' -> 'addmm'; None for a name that is not an operator."""
    for prefix in ("aten::", "gpucourse::"):
        if name.startswith(prefix):
            return name[len(prefix):].split(".")[0]
    return None


def _compiled_kernel(name: str) -> bool:
    return "cpp_fused" in name or name.startswith(("triton_", "cpp_CppKernelProxy"))


def does_work(e) -> bool:
    """Whether a profiler event on the CPU is an operator that computes something itself."""
    if _compiled_kernel(e.name):
        return True
    op = _op(e.name)
    return op is not None and op not in NO_WORK


def is_kernel(e) -> bool:
    """A CPU operator that does work and calls no other operator that does (an innermost one)."""
    if not does_work(e):
        return False
    stack = list(e.cpu_children)
    while stack:
        c = stack.pop()
        if does_work(c):
            return False
        stack.extend(c.cpu_children)
    return True


def _ancestors(e):
    while e is not None:
        yield e
        e = e.cpu_parent


def category(e) -> str:
    """The category of a unit of work (a CPU operator, or the CPU operator that launched a
    GPU kernel): see the module's docstring."""
    for a in _ancestors(e):
        name = a.name
        if name.startswith("Optimizer."):
            return "optimizer"
        if name.startswith("gpucourse::"):
            return "custom op"
        if name.startswith("autograd::engine::evaluate_function:"):
            node = name.split(":")[-1].strip()
            if node.startswith(ATTENTION_NODES):
                return "attention"
            if node.startswith(MATMUL_NODES):
                return "matmul"
            if node.startswith(DATA_NODES):
                return "data movement"
            if "BiasGelu" in node or node.startswith("GpucourseBackward"):
                return "custom op"
            break
    if (_op(e.name) or "") in DATA_OPS:
        return "data movement"
    top = None  # the outermost operator below the step (what the model's code called)
    for a in _ancestors(e):
        if _op(a.name) or _compiled_kernel(a.name):
            top = a
    top_op = _op(top.name) if top is not None else None
    if top_op in ATTENTION_OPS or (top_op or "").startswith("_scaled_dot_product"):
        return "attention"
    if _compiled_kernel(e.name):
        return "fused (torch.compile)"
    op = _op(e.name) or ""
    if op in MATMUL_OPS or top_op in MATMUL_OPS:
        return "matmul"
    if top_op in ("embedding", "to", "_to_copy"):
        return "data movement"
    return "elementwise and norms"


@dataclass
class StepProfile:
    """What a few profiled steps showed, per step."""

    device: str
    backend: str
    steps: int
    step_ms: float
    ms_by_category: dict
    kernels: int
    kernels_by_name: dict = field(default_factory=dict)
    peak_bytes: int | None = None
    peak_how: str = ""

    def to_dict(self) -> dict:
        from dataclasses import asdict

        return asdict(self)

    def table(self) -> Table:
        rows = [{"category": k if k != "overhead" else OVERHEAD_NAME[self.backend],
                 "ms per step": v, "share": v / self.step_ms if self.step_ms else 0.0}
                for k, v in sorted(self.ms_by_category.items(), key=lambda kv: -kv[1])]
        return Table(rows, caption=f"Where a training step's {self.step_ms:.3g} ms go "
                                   f"(torch.profiler, {self.steps} steps, {self.device}); "
                                   f"{self.kernels} kernels per step")


def _memory_peak(prof, resident: int) -> int:
    """Tensors alive at the start plus the highest running sum of the allocations and frees the
    profiler recorded (CPU allocator)."""
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    events.sort(key=lambda e: e.start_ns())
    now = top = 0
    for e in events:
        if e.device_type() != torch.autograd.DeviceType.CPU:
            continue
        now += e.nbytes()
        top = max(top, now)
    return resident + top


def resident_bytes(*groups) -> int:
    """Bytes of the distinct storages of the tensors in ``groups`` (lists, dicts of tensors)."""
    seen = {}

    def visit(t):
        if torch.is_tensor(t):
            s = t.untyped_storage()
            seen[s.data_ptr()] = max(seen.get(s.data_ptr(), 0), s.nbytes())
        elif isinstance(t, dict):
            for v in t.values():
                visit(v)
        elif isinstance(t, (list, tuple)):
            for v in t:
                visit(v)

    for g in groups:
        visit(g)
    return sum(seen.values())


def profile_trainer(trainer, steps: int = 3, memory: bool = True) -> StepProfile:
    """Profile ``steps`` training steps of a :class:`~.step.Trainer` (after one unprofiled)."""
    dev = trainer.device
    trainer.step()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])
    resident = 0
    if memory and dev == "cpu":
        resident = resident_bytes([p for p in trainer.model.parameters()],
                                  [p.grad for p in trainer.model.parameters()],
                                  list(trainer.opt.state.values()), [trainer.x, trainer.y])
    if dev == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    with quiet_native_output():
        with profile(activities=acts, profile_memory=memory and dev == "cpu") as prof:
            for _ in range(steps):
                with record_function(STEP_SCOPE):
                    trainer.step()
                    if dev == "cuda":
                        torch.cuda.synchronize()
        prof.events()  # parsed here, while the allocator's warning is silenced
    peak, how = None, ""
    if memory:
        if dev == "cuda":
            peak, how = torch.cuda.max_memory_allocated(), "torch.cuda.max_memory_allocated"
        else:
            peak = _memory_peak(prof, resident)
            how = "tensors alive at a step's start + the profiler's allocation events"
    summary = summarize(prof.events(), dev, steps)
    return StepProfile(device=gdev.describe(dev).short_name, backend=dev, steps=steps,
                       peak_bytes=peak, peak_how=how, **summary)


def summarize(events, dev: str, steps: int) -> dict:
    """Per-step milliseconds by category, kernels per step, and the kernels' names."""
    events = list(events)
    wall_us = sum(e.time_range.end - e.time_range.start for e in events if e.name == STEP_SCOPE)
    by_cat = {c: 0.0 for c in CATEGORIES}
    names: dict = {}
    if dev == "cuda":
        kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA
                   and not e.name.lower().startswith(("memcpy", "memset"))]
        count = len(kernels)
        for e in events:
            if e.device_type == torch.autograd.DeviceType.CPU and e.kernels:
                cat = category(e)
                for k in e.kernels:
                    by_cat[cat] += k.duration
        for k in kernels:
            names[k.name[:60]] = names.get(k.name[:60], 0) + 1
    else:
        units = [e for e in events if e.device_type == torch.autograd.DeviceType.CPU
                 and is_kernel(e)]
        count = len(units)
        for e in units:
            by_cat[category(e)] += e.time_range.end - e.time_range.start
            key = _op(e.name) or e.name
            names[key] = names.get(key, 0) + 1
    busy = sum(by_cat.values())
    by_cat["overhead"] = max(0.0, wall_us - busy)
    per = {k: v / steps / 1e3 for k, v in by_cat.items() if v > 0}
    return {"step_ms": wall_us / steps / 1e3, "ms_by_category": per,
            "kernels": round(count / steps),
            "kernels_by_name": {k: v / steps for k, v in sorted(names.items(),
                                                                 key=lambda kv: -kv[1])}}
