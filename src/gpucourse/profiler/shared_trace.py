"""The profiler's subscript trace: each thread's shared-memory accesses in order, per warp.

``trace_shared_accesses`` rebuilds a CUDA C kernel with each static ``__shared__`` array
wrapped so that every subscript logs the element each thread of block (0, 0, 0) touched; the
k-th access of each thread of a warp is one warp access, which goes through
``models.bank_conflicts``. Where ``profile`` counts every access per source line (a pointer
into the tile too), the trace names the access, its lanes and their banks, which is what a
learner needs to see why a tile conflicts. It follows subscripts of the array itself only:
dynamic (``extern``) shared memory or a tile passed to a function is a :class:`TraceError`.
"""
from __future__ import annotations

import re

import numpy as np

from .. import kernels, models
from ..emulator.source import strip_comments
from ..errors import CompileError

# Byte widths of the element types a shared array may have (vector types count whole).
_ELEM_BYTES = {"float": 4, "int": 4, "unsigned": 4, "unsigned int": 4, "uint32_t": 4, "int32_t": 4,
               "double": 8, "long long": 8, "unsigned long long": 8, "int64_t": 8, "uint64_t": 8,
               "short": 2, "unsigned short": 2, "__half": 2, "half": 2, "__nv_bfloat16": 2,
               "char": 1, "unsigned char": 1, "int8_t": 1, "uint8_t": 1, "float2": 8, "int2": 8,
               "float4": 16, "int4": 16}

TRACE_THREADS = 1024
TRACE_SLOTS = 64  # accesses logged per thread (the first is the count)

_TRACE_PRELUDE = r"""
// ---- added by gpucourse.profiler: log every shared-memory access of block (0, 0, 0)
static unsigned int gc_trace_buf[%(threads)d * %(slots)d];
static inline void gc_trace_note(int array, long long byte_offset) {
  if (blockIdx.x || blockIdx.y || blockIdx.z) return;
  unsigned r = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  if (r >= %(threads)d) return;
  unsigned int* slot = gc_trace_buf + r * %(slots)d;
  unsigned k = slot[0];
  if (k + 1 < %(slots)d) {
    slot[k + 1] = ((unsigned)array << 24) | (unsigned)(byte_offset & 0xFFFFFF);
    slot[0] = k + 1;
  }
}
template <class T, long long P> struct gc_trace_row {
  T* base; long long r; int id;
  T& operator[](long long c) const { gc_trace_note(id, (r * P + c) * (long long)sizeof(T)); return base[r * P + c]; }
};
template <class T, long long P> struct gc_trace_2d {
  T* base; int id;
  gc_trace_row<T, P> operator[](long long r) const { return gc_trace_row<T, P>{base, r, id}; }
};
template <class T> struct gc_trace_1d {
  T* base; int id;
  T& operator[](long long i) const { gc_trace_note(id, i * (long long)sizeof(T)); return base[i]; }
};
extern "C" __global__ void gc_trace_read(unsigned int* out) {
  for (int i = 0; i < %(threads)d * %(slots)d; i++) { out[i] = gc_trace_buf[i]; gc_trace_buf[i] = 0; }
}
// ---- end of the added code
"""

_SHARED_DECL = re.compile(
    r"__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s*)?((?:(?:const|volatile|unsigned|signed|long|short)\s+)*"
    r"[A-Za-z_]\w*)\s+([A-Za-z_]\w*)\s*\[([^\]\[;]+)\]\s*(?:\[([^\]\[;]+)\])?\s*;")


class TraceError(Exception):
    """The kernel's shared-memory accesses could not be traced (unusual declarations)."""


def instrument_shared(source: str) -> tuple[str, list[dict]]:
    """``source`` with every static ``__shared__`` array wrapped in a logging proxy.

    Only the declarations change (``T a[N][M]`` and ``T a[N]``); the index expressions stay
    exactly as written, so what is logged is what the kernel computes.
    """
    text = strip_comments(source)
    arrays: list[dict] = []

    def wrap(m):
        typ, name, d1, d2 = m.group(1), m.group(2), m.group(3), m.group(4)
        base = re.sub(r"\b(const|volatile)\b", "", typ).strip()
        base = re.sub(r"\s+", " ", base)
        if base not in _ELEM_BYTES:
            raise TraceError(f"shared array `{name}` has element type {base!r}, which the trace "
                             "does not know; use float.")
        idx = len(arrays)
        arrays.append({"name": name, "type": base, "elem_bytes": _ELEM_BYTES[base]})
        raw = f"gc_raw_{name}"
        if d2 is None:
            return (f"__shared__ {typ} {raw}[{d1}]; "
                    f"gc_trace_1d<{typ}> {name}{{&{raw}[0], {idx}}};")
        return (f"__shared__ {typ} {raw}[{d1}][{d2}]; "
                f"gc_trace_2d<{typ}, ({d2})> {name}{{&{raw}[0][0], {idx}}};")

    out = _SHARED_DECL.sub(wrap, text)
    if re.search(r"\bextern\s+__shared__", text):
        raise TraceError("the kernel uses dynamic (extern) shared memory; declare the tile as a "
                         "static array, e.g. `__shared__ float tile[TILE][TILE + 1];`.")
    prelude = _TRACE_PRELUDE % {"threads": TRACE_THREADS, "slots": TRACE_SLOTS}
    return prelude + "\n" + out, arrays


def traced_module(code: str, defines=None):
    """The emulator module of ``code`` (``instrument_shared``'s output), built (on the emulator
    ``from_source`` compiles at once: a compile error is the caller's TraceError)."""
    return kernels.from_source(code, defines=defines, name="traced.cu", backend="cpu")


def trace_shared_accesses(source: str, kernel: str, grid, block, args, defines=None) -> dict:
    """Run ``kernel`` on the emulator with its shared arrays traced; return the bank conflicts
    of every warp-wide access of block (0, 0, 0).

    The k-th shared access of each thread of a warp is taken as one warp instruction (right
    when the threads of a warp take the same path, as in a full tile). Each such access goes
    through ``models.bank_conflicts``. Returns ``{"accesses": [...], "worst": ways, ...}``.
    """
    code, arrays = instrument_shared(source)
    if not arrays:
        return {"arrays": [], "accesses": [], "worst": 0}
    try:
        mod = traced_module(code, defines)
    except CompileError as exc:
        raise TraceError("the kernel could not be rebuilt with its shared arrays traced "
                         f"({str(exc).splitlines()[0]}); index the tile as tile[row][col].") from None
    getattr(mod, kernel)(grid, block, args)
    buf = np.zeros(TRACE_THREADS * TRACE_SLOTS, dtype=np.uint32)
    mod.gc_trace_read(1, 1, (buf,))
    log = buf.reshape(TRACE_THREADS, TRACE_SLOTS)
    bx, by, bz = (tuple(block) + (1, 1))[:3] if not isinstance(block, int) else (block, 1, 1)
    threads = min(TRACE_THREADS, bx * by * bz)
    accesses = []
    for w in range(0, threads, 32):
        lanes = range(w, min(w + 32, threads))
        depth = max(int(log[r, 0]) for r in lanes)
        for k in range(depth):
            entries = [(r - w, int(log[r, k + 1])) for r in lanes if log[r, 0] > k]
            by_array: dict[int, list[tuple[int, int]]] = {}
            for lane, e in entries:
                by_array.setdefault(e >> 24, []).append((lane, e & 0xFFFFFF))
            for a, pairs in by_array.items():
                info = arrays[a]
                addrs = [off for _, off in pairs]
                bc = models.bank_conflicts(addrs, word_bytes=min(info["elem_bytes"], 16))
                accesses.append({"warp": w // 32, "access": k, "array": info["name"],
                                 "lanes": [lane for lane, _ in pairs], "byte_offsets": addrs,
                                 "ways": bc.ways,
                                 "banks": [(off // 4) % 32 for off in addrs]})
    worst = max((a["ways"] for a in accesses), default=0)
    return {"arrays": arrays, "accesses": accesses, "worst": worst}
