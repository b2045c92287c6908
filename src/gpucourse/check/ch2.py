"""Lab checkers of chapter 2 (memory management), and the probes they use.

- ``TorchAllocationCounter``: counts tensors whose storage is new (an allocation) while a
  block runs, through a ``TorchFunctionMode``.
- ``HostTensor``: a CPU tensor that records how a training loop moves it (was it pinned,
  was the copy ``non_blocking``, was it used for compute before being moved), so a loop
  written for a GPU can be checked on any machine.

Exercise 2.2's bank conflicts come from the profiler: its subscript trace
(``profiler.trace_shared_accesses``) names the access, lanes and banks of a conflict, and
``profiler.profile`` counts every access per line, however the kernel reaches the tile.
"""
from __future__ import annotations

import copy
import threading
from typing import Callable

import numpy as np

from .. import emulator, models, precision, profiler
from ..errors import CourseError
from ..kernels import transpose as transpose_home
from .compare import assert_close, random_array, rng
from .lab import (Exercise, answer_error, callable_answer, learner_kernel, run_learner_kernel,
                  whole_answer)

# --------------------------------------------------------------------------- allocation counter


def _storage_ptrs(obj, out: set) -> None:
    import torch  # heavy: loaded by the checks that use it, not on import

    if isinstance(obj, torch.Tensor):
        try:
            out.add(obj.untyped_storage().data_ptr())
        except Exception:  # tensors without storage (meta, sparse) allocate nothing we count
            pass
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _storage_ptrs(v, out)
    elif isinstance(obj, dict):
        for v in obj.values():
            _storage_ptrs(v, out)


class TorchAllocationCounter:
    """Context manager counting torch results that live in NEW storage (an allocation).

    In-place ops, ``out=`` and views reuse their inputs' storage and count nothing.

    >>> with TorchAllocationCounter() as c:
    ...     y = a * b + c        # two allocations: a*b and the sum
    >>> c.count
    2
    """

    def __init__(self):
        self.count = 0
        self.bytes = 0
        self.ops: list[str] = []
        self._mode = None

    def __enter__(self):
        from torch.overrides import TorchFunctionMode  # heavy, as above

        counter = self

        class _Mode(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                before: set = set()
                _storage_ptrs(args, before)
                _storage_ptrs(kwargs, before)
                out = func(*args, **kwargs)
                counter._record(func, out, before)
                return out

        self._mode = _Mode()
        self._mode.__enter__()
        return self

    def _record(self, func, out, before: set) -> None:
        import torch  # heavy: loaded by the checks that use it, not on import

        outs = out if isinstance(out, (list, tuple)) else (out,)
        for o in outs:
            if not isinstance(o, torch.Tensor):
                continue
            try:
                st = o.untyped_storage()
            except Exception:
                continue
            if st.nbytes() and st.data_ptr() not in before:
                before.add(st.data_ptr())
                self.count += 1
                self.bytes += st.nbytes()
                self.ops.append(getattr(func, "__name__", str(func)))

    def __exit__(self, *exc):
        self._mode.__exit__(*exc)
        return False


def count_torch_allocations(fn: Callable, *args, **kwargs) -> TorchAllocationCounter:
    """Run ``fn`` once under a TorchAllocationCounter and return the counter."""
    with TorchAllocationCounter() as c:
        fn(*args, **kwargs)
    return c


# --------------------------------------------------------------------------- host-tensor spy

_VIEW_OPS = {"__getitem__", "narrow", "view", "reshape", "split", "chunk", "unbind", "select",
             "__len__", "size", "dim", "numel", "stride", "storage_offset", "data_ptr",
             "untyped_storage", "contiguous", "__iter__", "__format__", "__repr__", "__get__",
             "is_contiguous", "element_size", "nelement", "detach", "__reduce_ex__", "__hash__",
             "__bool__", "__index__", "__int__", "__float__", "__eq__", "flatten", "squeeze",
             "unsqueeze", "expand", "tolist", "item", "__array__", "numpy", "clone"}


class _LoopRecorder:
    """What a training loop did with its host tensors."""

    def __init__(self):
        self.pinned_storages: set[int] = set()
        self.pin_calls: list[int] = []          # elements pinned per call
        self.copies: list[tuple[bool, bool]] = []  # (source pinned, non_blocking) per move
        self.host_compute: list[str] = []
        self.pinned_used = False                # was a pinned tensor touched after pinning


_RECORDER = threading.local()


def _rec() -> _LoopRecorder | None:
    return getattr(_RECORDER, "value", None)


def _is_device(x) -> bool:
    import torch  # heavy: loaded by the checks that use it, not on import

    return isinstance(x, torch.device) or (isinstance(x, str) and x.split(":")[0] in
                                           ("cpu", "cuda", "mps", "xpu", "meta"))


def _make_host_tensor_class():
    import torch  # heavy: loaded by the checks that use it, not on import

    class HostTensor(torch.Tensor):
        """A tensor in host memory whose moves to the device are recorded."""

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            rec = _rec()
            name = getattr(func, "__name__", "")
            if rec is None:
                return super().__torch_function__(func, types, args, kwargs)
            if name == "pin_memory":
                src = args[0]
                with torch._C.DisableTorchFunctionSubclass():
                    pinned = src.clone()  # pinning copies into page-locked memory
                out = pinned.as_subclass(cls)
                rec.pinned_storages.add(out.untyped_storage().data_ptr())
                rec.pin_calls.append(src.numel())
                return out
            if name == "is_pinned":
                return args[0].untyped_storage().data_ptr() in rec.pinned_storages
            if not rec.pinned_used and args and isinstance(args[0], cls):
                with torch._C.DisableTorchFunctionSubclass():
                    rec.pinned_used = args[0].untyped_storage().data_ptr() in rec.pinned_storages
            if name in ("to", "cuda"):
                src = args[0]
                moves = name == "cuda" or any(_is_device(a) for a in args[1:]) or \
                    _is_device(kwargs.get("device"))
                if moves:
                    pinned = src.untyped_storage().data_ptr() in rec.pinned_storages
                    rec.copies.append((pinned, bool(kwargs.get("non_blocking", False))))
                    with torch._C.DisableTorchFunctionSubclass():
                        plain = torch.Tensor.as_subclass(src, torch.Tensor)
                        dtype = kwargs.get("dtype") or next(
                            (a for a in args[1:] if isinstance(a, torch.dtype)), None)
                        return plain.clone() if dtype is None else plain.to(dtype)
            if name == "copy_" and len(args) > 1 and isinstance(args[1], cls) \
                    and not isinstance(args[0], cls):
                src = args[1]
                pinned = src.untyped_storage().data_ptr() in rec.pinned_storages
                rec.copies.append((pinned, bool(kwargs.get("non_blocking",
                                                           args[2] if len(args) > 2 else False))))
                with torch._C.DisableTorchFunctionSubclass():
                    return args[0].copy_(torch.Tensor.as_subclass(src, torch.Tensor))
            if name not in _VIEW_OPS and name not in ("to", "cuda"):
                rec.host_compute.append(name)
            return super().__torch_function__(func, types, args, kwargs)

    return HostTensor


_HOST_TENSOR = None


def host_tensor(t):
    """Wrap a CPU tensor as a HostTensor (records pins and device copies inside ``record_loop``)."""
    global _HOST_TENSOR
    if _HOST_TENSOR is None:
        _HOST_TENSOR = _make_host_tensor_class()
    return t.as_subclass(_HOST_TENSOR)


class record_loop:
    """Context manager: HostTensors record what happens to them while it is active."""

    def __enter__(self) -> _LoopRecorder:
        self.rec = _LoopRecorder()
        _RECORDER.value = self.rec
        return self.rec

    def __exit__(self, *exc):
        _RECORDER.value = None
        return False


# --------------------------------------------------------------------------- exercise 2.1

def _bank_cases() -> dict[str, list[int]]:
    """Warp access patterns (byte addresses, 4-byte words) that tell right from wrong."""
    g = rng(21)
    cases = {
        "stride 1 (tile[tx])": [4 * i for i in range(32)],
        "stride 2 (tile[2*tx])": [8 * i for i in range(32)],
        "stride 3": [12 * i for i in range(32)],
        "stride 8": [32 * i for i in range(32)],
        "column of float t[32][32] (t[tx][0])": [128 * i for i in range(32)],
        "column of float t[32][33] (t[tx][0])": [132 * i for i in range(32)],
        "column of float t[32][34]": [136 * i for i in range(32)],
        "broadcast (every lane reads t[0])": [0] * 32,
        "two words, 16 lanes each": [0 if i < 16 else 128 for i in range(32)],
        "pairs of lanes read one word": [4 * (i // 2) for i in range(32)],
        "shifted base (offset 4 words)": [16 + 4 * i for i in range(32)],
        "half a warp, stride 16": [64 * i for i in range(16)],
        "random permutation": [4 * int(v) for v in g.permutation(32)],
        "random words in 8 KiB": [4 * int(v) for v in g.integers(0, 2048, 32)],
        "same bank, 4 distinct words repeated": [128 * (i % 4) for i in range(32)],
    }
    return cases


def _ways(addresses, word=lambda a: a // 4, bank=lambda w: w % 32, distinct=True) -> int:
    banks: dict[int, list[int]] = {}
    for a in addresses:
        banks.setdefault(bank(word(a)), []).append(word(a))
    return max(len(set(w)) if distinct else len(w) for w in banks.values())


#: (what a known mistake answers for a pattern, what to say): chosen when a learner's answers
#: are the mistake's on every pattern.
_BANK_MISTAKES = (
    (lambda a: _ways(a, word=lambda a: a),
     "Your answers are those of banks taken from byte addresses: a bank holds 4-byte words, so "
     "the bank of byte address a is (a // 4) % 32."),
    (lambda a: _ways(a, distinct=False),
     "Your answers count lanes: lanes that read the SAME 4-byte word are served at once (a "
     "broadcast), so count distinct words per bank."),
    (lambda a: _ways(a, bank=lambda w: w % 16),
     "Your answers are those of 16 banks: shared memory has 32 banks of 4 bytes."),
    (lambda a: len({(x // 4) % 32 for x in a}),
     "Your answers count the banks a warp touches: the n of an n-way conflict is the most "
     "distinct words that fall in ONE bank."),
    (lambda a: _ways(a, word=lambda a: a // 8),
     "Your answers are those of 8-byte words: a bank holds 4-byte words, (a // 4) % 32."),
)


def check_bank_ways(bank_ways: Callable, number: str = "2.1",
                    title: str = "counting bank conflicts") -> None:
    """``bank_ways(byte_addresses) -> int`` must equal the n-way of models.bank_conflicts."""
    with Exercise(number, title):
        callable_answer(bank_ways, "bank_ways is", "def bank_ways(byte_addresses): ...")
        cases = _bank_cases()
        answers = {name: whole_answer(bank_ways(list(addrs)),
                                      f"bank_ways for the pattern {name!r} returned",
                                      "the n of an n-way conflict", strict=True)
                   for name, addrs in cases.items()}
        for name, addrs in cases.items():
            want = models.bank_conflicts(addrs).ways
            got = answers[name]
            if got != want:
                hint = next((" " + why for mistake, why in _BANK_MISTAKES
                             if all(mistake(cases[k]) == answers[k] for k in cases)), "")
                broadcast = name.startswith("broadcast") or "pairs" in name or "two words" in name
                if not hint and broadcast:
                    hint = (" Lanes that read the SAME 4-byte word are served at once "
                            "(a broadcast): count distinct words per bank, not lanes.")
                elif not hint and ("stride 8" in name or "column" in name):
                    hint = " The bank of a byte address a is (a // 4) % 32."
                raise AssertionError(f"pattern {name!r}: you say {int(got)}-way, the right answer "
                                     f"is {want}-way.{hint}")


# --------------------------------------------------------------------------- exercise 2.3

def _loop_problem(seed: int = 0, batches: int = 5, batch: int = 16, features: int = 24,
                  classes: int = 5):
    import torch  # heavy: loaded by the checks that use it, not on import

    x = random_array((batches * batch, features), np.float32, seed=seed, kind="uniform")
    w = rng(seed + 1).standard_normal((features, classes)).astype(np.float32)
    y = np.argmax(x @ w, axis=1).astype(np.int64)
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(features, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, classes))
    return torch.from_numpy(x), torch.from_numpy(y), model, batch


class MomentumSGD:
    """SGD with momentum, torch.optim.SGD's update (``v = momentum * v + grad``, then
    ``p -= lr * v``), for the loop of Exercise 2.3: the first optimizer of torch.optim a process
    builds imports torch._dynamo (about two seconds on two cores), which the check need not wait
    for. It has what a training step calls: ``zero_grad()`` and ``step()``."""

    def __init__(self, params, lr: float, momentum: float):
        self.params = list(params)
        self.lr, self.momentum = lr, momentum
        self.velocity = [None] * len(self.params)

    def __repr__(self):
        return f"MomentumSGD(lr={self.lr}, momentum={self.momentum})"

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    def step(self) -> None:
        import torch  # heavy: loaded by the checks that use it, not on import

        with torch.no_grad():
            for i, p in enumerate(self.params):
                if p.grad is None:
                    continue
                if self.velocity[i] is None:  # as torch.optim.SGD: it starts as the gradient
                    self.velocity[i] = p.grad.clone()
                else:
                    self.velocity[i].mul_(self.momentum).add_(p.grad)
                p.add_(self.velocity[i], alpha=-self.lr)


def check_pinned_loop(train_fast: Callable, train_step: Callable, number: str = "2.3",
                      title: str = "pinned memory and non-blocking copies") -> None:
    """``train_fast(model, opt, X, Y, batch, device)`` must train like the naive loop, pin
    the host data once, and copy every batch from pinned memory with ``non_blocking=True``.

    Runs on the CPU: X and Y are HostTensors that record pins and copies (a CPU build of
    PyTorch cannot pin memory, so pinning is simulated).
    """
    with Exercise(number, title):
        callable_answer(train_fast, "train_fast is",
                        "def train_fast(model, opt, X, Y, batch, device): ...")
        callable_answer(train_step, "train_step is", "def train_step(model, opt, x, y): ...")
        X, Y, model, batch = _loop_problem()
        ref = _clone_model(model)
        ref_opt = MomentumSGD(ref.parameters(), lr=0.1, momentum=0.9)
        # Each batch as a fresh copy, as every move of the recorded loop makes one: the same
        # steps on the same values at the same alignment give the same bits, whatever the BLAS.
        for i in range(0, len(X), batch):
            train_step(ref, ref_opt, X[i:i + batch].clone(), Y[i:i + batch].clone())

        opt = MomentumSGD(model.parameters(), lr=0.1, momentum=0.9)
        with record_loop() as rec:
            train_fast(model, opt, host_tensor(X.clone()), host_tensor(Y.clone()), batch, "cpu")
        n_batches = len(X) // batch
        assert rec.copies, ("the loop never moved a batch to the device: call "
                            "`.to(device, non_blocking=True)` on each batch.")
        ops = sorted(set(rec.host_compute))
        assert not ops, (
            f"the loop computed with host tensors ({', '.join(ops)}) instead of moving each "
            "batch to the device first."
            + (" (A DataLoader stacks each batch on the host, and on a machine without a GPU "
               "its pin_memory=True pins nothing: for this exercise pin X and Y once and copy "
               "slices of them.)" if "stack" in ops else ""))
        assert rec.pin_calls, ("nothing was pinned: call `.pin_memory()` on X and Y once, before "
                               "the loop (page-locked memory is what the DMA engine can read).")
        assert len(rec.pin_calls) <= 2, (
            f"pin_memory() ran {len(rec.pin_calls)} times: pinning is itself a copy into "
            "page-locked memory (and locking pages is slow); pin X and Y once, outside the loop.")
        unpinned = sum(not p for p, _ in rec.copies)
        assert rec.pinned_used or unpinned < len(rec.copies), (
            "pin_memory() ran, but no copy read the pinned tensors: pin_memory() returns a "
            "pinned copy and leaves the original as it was, so keep its result "
            "(X = X.pin_memory()) and slice that.")
        assert unpinned == 0, (
            f"{unpinned} of {len(rec.copies)} copies read pageable memory: copy slices of the "
            "PINNED tensors (slicing keeps them pinned; fancy indexing or .contiguous() does not).")
        blocking = sum(not nb for _, nb in rec.copies)
        assert blocking == 0, (
            f"{blocking} of {len(rec.copies)} copies are blocking: pass non_blocking=True so the "
            "host queues the copy and moves on.")
        assert len(rec.copies) >= 2 * n_batches, (
            f"{len(rec.copies)} copies for {n_batches} batches of X and Y: copy each batch as it "
            "is needed (the whole data set once is the 'resident' version, not this exercise).")
        for (name, a), b in zip(model.named_parameters(), ref.parameters()):
            try:  # exact: the same train_step on the same batches in the same order
                assert_close(a.detach(), b.detach(), rtol=0, atol=0,
                             name=f"{name} after training (compared with the naive loop)")
            except AssertionError as exc:
                raise AssertionError(
                    f"{exc}\nThe same train_step on the same batches in the same order gives "
                    "the same bits: copy every batch as it is (same rows, same dtype, same "
                    "order) and call train_step once for each.") from None


def _clone_model(model):
    return copy.deepcopy(model)


# --------------------------------------------------------------------------- exercise 2.4

def _momentum_reference(w, v, grads, lr, beta):
    w, v = w.clone(), v.clone()
    for g in grads:
        v = beta * v + g
        w = w - lr * v
    return w, v


def momentum_error_bound(w, v, grads, lr: float, beta: float):
    """Elementwise bounds on how far float32 momentum steps (any order of rounding, fused or
    not) may lie from the exact ones: (bound on w, bound on v), first order in 2^-24.

    A step v <- beta*v + g rounds at most three times (beta to float32, the product, the sum),
    so it adds at most gamma_3 * (beta*|v| + |g|) to v's error, which earlier steps pass on
    times beta; w <- w - lr*v likewise adds gamma_3 * (|w| + lr*|v|) plus lr times v's error.
    |v| and |w| are bounded by the same steps on magnitudes. gamma_3 of float64 per step covers
    the float64 reference.
    """
    g3 = precision.gamma(3) + precision.gamma(3, precision.U64)
    mw, mv = (np.abs(np.asarray(t, dtype=np.float64)) for t in (w, v))
    ew, ev = np.zeros_like(mw), np.zeros_like(mv)
    for g in grads:
        g = np.abs(np.asarray(g, dtype=np.float64))
        ev = beta * ev + g3 * (beta * mv + g)
        mv = beta * mv + g
        ew = ew + lr * ev + g3 * (mw + lr * mv)
        mw = mw + lr * mv
    return ew, ev


def check_buffer_reuse(momentum_steps: Callable, number: str = "2.4",
                       title: str = "a loop that reuses its buffers") -> None:
    """``momentum_steps(w, v, grads, lr, beta)`` updates w and v in place, allocating
    nothing per iteration, and matches the allocating version."""
    import torch  # heavy: loaded by the checks that use it, not on import

    with Exercise(number, title):
        callable_answer(momentum_steps, "momentum_steps is",
                        "def momentum_steps(w, v, grads, lr, beta): ...")
        for n, steps in ((1, 1), (7, 3), (4099, 5)):
            w = torch.from_numpy(random_array(n, np.float32, seed=n))
            v = torch.from_numpy(random_array(n, np.float32, seed=n + 1, kind="uniform"))
            grads = [torch.from_numpy(random_array(n, np.float32, seed=n + 2 + k)) for k in range(steps)]
            want_w, want_v = _momentum_reference(w.double(), v.double(),
                                                 [g.double() for g in grads], 0.05, 0.9)
            bound_w, bound_v = momentum_error_bound(w, v, grads, 0.05, 0.9)
            w_id, v_id = w.untyped_storage().data_ptr(), v.untyped_storage().data_ptr()
            w0, v0 = w.clone(), v.clone()
            returned = momentum_steps(w, v, grads, 0.05, 0.9)
            for name, mine in zip("wv", (w, v)):
                got = returned[0 if name == "w" else 1] if isinstance(returned, (tuple, list)) \
                    and len(returned) == 2 else None
                if isinstance(got, torch.Tensor) and got is not mine and not torch.equal(got, mine):
                    raise AssertionError(
                        f"the {name} you return is a new tensor, and the caller's {name} holds "
                        f"something else: an assignment such as `{name} = {name}.mul_(beta) + g` "
                        "makes a new tensor; keep every step in place (v.mul_(beta).add_(g), "
                        "w.add_(v, alpha=-lr)).")
            assert w.untyped_storage().data_ptr() == w_id and v.untyped_storage().data_ptr() == v_id, \
                "update w and v in place (w.add_, v.mul_, ...): keep the caller's tensors"
            assert not (torch.equal(w, w0) or torch.equal(v, v0)), (
                "the caller's w and v did not change: `w = w - ...` makes a new tensor and leaves "
                "the caller's alone; update them in place (w.add_(v, alpha=-lr), v.mul_(beta)...).")
            after = f"after {steps} step{'s' * (steps != 1)} (n={n})"
            assert_close(v, want_v, rtol=0, atol=bound_v, name=f"v {after}")
            assert_close(w, want_w, rtol=0, atol=bound_w, name=f"w {after}")
        n = 10_007
        w = torch.from_numpy(random_array(n, np.float32, seed=1))
        v = torch.from_numpy(random_array(n, np.float32, seed=2))
        few = [torch.from_numpy(random_array(n, np.float32, seed=3 + k)) for k in range(2)]
        many = [torch.from_numpy(random_array(n, np.float32, seed=3 + k)) for k in range(10)]
        c_few = count_torch_allocations(momentum_steps, w, v, few, 0.05, 0.9)
        c_many = count_torch_allocations(momentum_steps, w, v, many, 0.05, 0.9)
        per_step = (c_many.count - c_few.count) / (len(many) - len(few))
        assert per_step <= 0, (
            f"the loop allocates {per_step:g} new tensor(s) per iteration "
            f"(ops that made them: {', '.join(sorted(set(c_many.ops)))}); use in-place ops "
            "(mul_, add_ with alpha=...) or out= so every iteration reuses the same memory.")


# --------------------------------------------------------------------------- exercise 2.5

def adam_moments(params) -> list:
    """The two moments Adam keeps per parameter (exp_avg, exp_avg_sq), as torch.optim.Adam
    makes them: ``zeros_like`` each parameter. Built here rather than by a step of
    torch.optim.Adam, whose first use in a process imports torch._dynamo (about two seconds)."""
    import torch  # heavy: loaded by the checks that use it, not on import

    return [torch.zeros_like(p, memory_format=torch.preserve_format) for p in params for _ in (0, 1)]


def _mixed_reference(model) -> dict:
    """Real tensors of bf16 training with fp32 master weights and Adam, their nbytes."""
    import torch  # heavy: loaded by the checks that use it, not on import

    half = [p.detach().to(torch.bfloat16).requires_grad_() for p in model.parameters()]
    for h in half:
        h.grad = torch.zeros_like(h)
    master = [p.detach().float().clone().requires_grad_() for p in model.parameters()]
    for m in master:
        m.grad = torch.zeros_like(m)
    state = sum(m.nbytes for m in adam_moments(master))
    return {"weights": sum(h.nbytes for h in half), "gradients": sum(h.grad.nbytes for h in half),
            "master_copy": sum(m.nbytes for m in master), "optimizer_state": state}


def _footprint_models():
    import torch  # heavy: loaded by the checks that use it, not on import

    torch.manual_seed(0)
    return [torch.nn.Linear(7, 3),
            torch.nn.Sequential(torch.nn.Linear(33, 65), torch.nn.ReLU(), torch.nn.Linear(65, 17, bias=False)),
            torch.nn.Sequential(torch.nn.Embedding(101, 24), torch.nn.LayerNorm(24), torch.nn.Linear(24, 5)),
            # BatchNorm's running statistics are buffers: in state_dict(), not in parameters()
            torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 3))]


def check_mixed_bytes(mixed_precision_bytes: Callable, number: str = "2.5",
                      title: str = "memory of mixed-precision training") -> None:
    """``mixed_precision_bytes(model) -> dict`` equals the nbytes of the real tensors."""
    with Exercise(number, title):
        callable_answer(mixed_precision_bytes, "mixed_precision_bytes is",
                        "def mixed_precision_bytes(model): ...")
        for model in _footprint_models():
            got = mixed_precision_bytes(model)
            want = _mixed_reference(model)
            if not (isinstance(got, dict) and set(want) <= set(got)):
                raise answer_error("mixed_precision_bytes(model) returned", got,
                                   f"return a dict with the keys {sorted(want)}")
            what = type(model).__name__ if not hasattr(model, "__len__") else \
                " + ".join(type(m).__name__ for m in model)
            for k in want:
                said = whole_answer(got[k], f"mixed_precision_bytes(model)[{k!r}] is", "bytes")
                low = k not in ("master_copy", "optimizer_state")  # the fp32 ones
                if low and said == 2 * want[k]:
                    why = " That is 4 bytes a value: these tensors are in 2-byte bf16 or fp16."
                elif not low and 2 * said == want[k]:
                    why = " That is 2 bytes a value: these tensors stay in 4-byte fp32."
                elif said == 8 * want[k]:
                    why = " That counts bits: nbytes, and this answer, count bytes."
                elif said > want[k] and any(True for _ in model.buffers()):
                    why = (" Buffers such as BatchNorm's running statistics are not parameters: "
                           "nothing trains them, so they have no gradient, master copy or "
                           "optimizer state. Count model.parameters(), not state_dict().")
                elif k == "weights" and said < want[k]:
                    why = " Biases and norm/embedding weights are parameters too."
                else:
                    why = ""
                assert said == want[k], (
                    f"{k} of a {what} with {sum(p.numel() for p in model.parameters())} "
                    f"parameters: you say {said} bytes, the real tensors hold {want[k]}.{why}"
                    + (" Adam keeps two fp32 values per parameter." if k == "optimizer_state" else "")
                    + (" The master copy is fp32: 4 bytes per parameter." if k == "master_copy" else ""))


# --------------------------------------------------------------------------- exercise 2.2

# The exercise's kernel builds and launches as transpose.cu's versions do (kernels.transpose).
TRANSPOSE_DEFINES = transpose_home.defines()
TRANSPOSE_SHAPES = ((1, 1), (1, 35), (35, 1), (31, 33), (32, 32), (67, 45), (97, 61), (130, 257))


def check_padded_transpose(source, kernel: str = "transpose_padded", number: str = "2.2",
                           title: str = "a padded shared-memory transpose") -> dict:
    """Check a learner's transpose kernel (a source string, or a function returning one) on
    the emulator, in four steps.

    1. Races: one launch race-checked, in forward, reverse and shuffled thread orders and
       under the hazard detector (a missing ``__syncthreads()`` between writing and reading
       the tile gives different results, and the detector names both lines).
    2. Correctness at awkward shapes (1x1, a single row, a single column, non-multiples of 32).
    3. Bank conflicts: the kernel is rebuilt with its ``__shared__`` tile wrapped so each
       access logs the element every thread touched; the accesses of each warp go through
       ``models.bank_conflicts``. Every access must be conflict-free (1-way).
    4. Traffic: ``gc.profile`` counts every shared access however it is written (a pointer
       into the tile too) and every global one: no bank conflict, and 4 sectors per warp
       request for the loads of ``in`` and the stores of ``out`` (coalesced both ways).

    Returns the trace of step 3.
    """
    with Exercise(number, title):
        if callable(source):
            source = source()
        try:
            k = learner_kernel(source, "transpose_padded.cu", kernel, TRANSPOSE_DEFINES,
                               builds=("race", "profile",
                                       lambda: profiler.traced_module(
                                           profiler.instrument_shared(source)[0],
                                           TRANSPOSE_DEFINES)))
        except CourseError as exc:  # a compile error, with the line to fix
            raise AssertionError(str(exc)) from None
        rows, cols = 67, 45
        a = random_array((rows, cols), np.float32, seed=rows)
        out = emulator.empty((cols, rows))
        grid, block = transpose_home.launch_config(rows, cols)
        try:
            run_learner_kernel(k, grid, block, transpose_home.args(a, out, rows, cols),
                               f"for a {rows} x {cols} matrix", race_check=True)
        except AssertionError as exc:
            msg = str(exc)
            if "race" in msg and "hazard" not in msg:  # the detector explains its own finds
                msg += ("\nEvery thread must finish writing its part of the tile before any thread "
                        "reads a column of it: put __syncthreads() between the two loops.")
            raise AssertionError(msg) from None
        for rows, cols in TRANSPOSE_SHAPES:
            a = random_array((rows, cols), np.float32, seed=rows * 1000 + cols)
            out = emulator.empty((cols, rows))
            grid, block = transpose_home.launch_config(rows, cols)
            run_learner_kernel(k, grid, block, transpose_home.args(a, out, rows, cols),
                               f"for a {rows} x {cols} matrix")
            try:
                assert_close(out, transpose_home.reference(a), *transpose_home.TOLERANCE,
                             name=f"transpose of a {rows} x {cols} matrix")
            except AssertionError as exc:
                raise AssertionError(f"{exc}\nCheck the bounds tests: reads need row < rows and "
                                     "col < cols of `in`; writes the same of `out` (cols x rows).") \
                    from None
        a = random_array((64, 64), np.float32, seed=64)
        out = emulator.empty((64, 64))
        grid, block = transpose_home.launch_config(64, 64)
        try:
            trace = profiler.trace_shared_accesses(source, kernel, grid, block,
                                                   transpose_home.args(a, out, 64, 64),
                                                   defines=TRANSPOSE_DEFINES)
        except profiler.TraceError as exc:  # e.g. the tile passed to a helper function
            trace, untraced = None, str(exc)
        else:
            assert trace["accesses"], _NO_SHARED_MEMORY
            _assert_traced_conflict_free(trace)
        prof = _check_transpose_traffic(k, a, out, grid, block)
        if trace is None:  # only the profiler saw the tile's accesses
            if prof is None:
                raise AssertionError(untraced)
            assert prof.shared_memory.requests, _NO_SHARED_MEMORY
            trace = {"arrays": [], "accesses": [], "worst": 0}
    return trace


_NO_SHARED_MEMORY = ("the kernel never reads or writes shared memory: stage each tile in a "
                     "`__shared__ float tile[TILE][TILE + 1]` so that both global accesses are "
                     "coalesced.")


def _assert_traced_conflict_free(trace: dict) -> None:
    """Step 3: every traced warp-wide shared access is 1-way."""
    worst = max(trace["accesses"], key=lambda acc: acc["ways"])
    if worst["ways"] > 1:
        lanes = ", ".join(f"lane {lane} -> bank {b}" for lane, b in
                          list(zip(worst["lanes"], worst["banks"]))[:4])
        offsets = worst["byte_offsets"]
        steps = {b - a for a, b in zip(offsets, offsets[1:])}
        if len(steps) == 1 and steps != {4} and (words := abs(steps.pop()) // 4) % 32:
            why = (f"consecutive lanes are {words} words apart, and a row length that is even "
                   "shares a factor with the 32 banks, so lanes meet in the same bank. Pad each "
                   "row to an odd number of words: tile[TILE][TILE + 1].")
        else:
            why = ("the lanes of a warp access a column, and with rows of 32 floats a whole "
                   "column sits in one bank. Pad each row by one element: tile[TILE][TILE + 1].")
        raise AssertionError(
            f"shared access number {worst['access'] + 1} of each thread (array "
            f"`{worst['array']}`) is a {worst['ways']}-way bank conflict ({lanes}, ...): {why}")


def _check_transpose_traffic(kernel, a, out, grid, block):
    """Step 4: the profiler's counts of every access, however the kernel reaches memory
    (the trace sees only subscripts of the tile itself, not a pointer into it or a tile passed
    to a function); the Profile, or None where the profiler cannot run."""
    try:
        prof = profiler.profile(kernel, grid, block, transpose_home.args(a, out, 64, 64))
    except profiler.ProfilerError:  # no profiling toolchain here: steps 1-3 still ran
        return None
    for r in prof.lines:
        c = r.counters
        if r.access.startswith("shared") and c.max_ways > 1:
            raise AssertionError(
                f"line {r.line} (`{r.code.strip()}`) is a {c.max_ways}-way shared-memory bank "
                "conflict: a warp's lanes hit one bank. Pad each row of the tile by one element, "
                "tile[TILE][TILE + 1], and index it as tile[row][col] (a flat pointer into it keeps "
                "the unpadded stride).")
        if r.access in ("global load", "global store") and c.sectors_per_request > 4.5:
            raise AssertionError(
                f"line {r.line} (`{r.code.strip()}`) is a {r.access} of {c.sectors_per_request:.0f} "
                "sectors per warp request where 4 would do: consecutive threadIdx.x must touch "
                "consecutive addresses of both `in` and `out`; the column walk belongs in shared "
                "memory.")
    return prof
