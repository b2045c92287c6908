"""Compiler errors in a learner's words: the first useful error of a g++/clang log, at the
kernel file's own line, with the CUDA rule or header it comes from."""
from __future__ import annotations

import os
import re

from .source import constant_names

_ERROR = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?:\d+:)? (?:fatal )?error: (?P<msg>.*)$")


def source_line(source: str | None, line: int | str) -> str:
    """Line ``line`` (1-based) of ``source``, stripped; '' when there is none."""
    rows = (source or "").splitlines()
    return rows[int(line) - 1].strip() if 0 < int(line) <= len(rows) else ""


# Device functions of CUDA that a kernel may call and the emulator's prelude may lack.
_CUDA_FUNCTIONS = set("""
    cospi cospif cyl_bessel_i0 cyl_bessel_i0f cyl_bessel_i1 cyl_bessel_i1f erfcinv erfcinvf erfcx
    erfcxf erfinv erfinvf fdividef norm norm3d norm3df norm4d norm4df normcdf normcdff normcdfinv
    normcdfinvf normf rcbrt rcbrtf rhypot rhypotf rnorm rnorm3d rnorm3df rnorm4d rnorm4df rnormf
    rsqrt rsqrtf sincospi sincospif sinpi sinpif llmax llmin ullmax ullmin umax umin
    __brev __brevll __byte_perm __clz __clzll __dp2a_hi __dp2a_lo __dp4a __ffs __ffsll __fns
    __funnelshift_l __funnelshift_lc __funnelshift_r __funnelshift_rc __hadd __mul24 __mul64hi
    __mulhi __popc __popcll __rhadd __sad __uhadd __umul24 __umul64hi __umulhi __urhadd __usad
    __cosf __exp10f __expf __fdividef __fsqrt_rn __frsqrt_rn __log10f __log2f __logf __powf
    __saturatef __sincosf __sinf __tanf __double2hiint __double2loint __hiloint2double
    __double_as_longlong __longlong_as_double __float_as_int __float_as_uint __int_as_float
    __uint_as_float __isGlobal __isShared __isConstant __isLocal __cvta_generic_to_shared
    __prof_trigger __nanosleep __ldg __ldcg __ldca __ldcs __ldlu __ldcv __stwb __stcg __stcs __stwt
""".split())
# The families with a rounding suffix (__fadd_rz, __double2ll_ru, ...) and the SIMD ones (__vadd4).
_CUDA_FUNCTION_FAMILIES = re.compile(
    r"__(?:f(?:add|sub|mul|div|sqrt|rcp|maf|maf_ieee)|d(?:add|sub|mul|div|sqrt|rcp)|fma"
    r"|(?:float|double|int|uint|ll|ull)2(?:float|double|int|uint|ll|ull))_r[nzdu]$"
    r"|__v\w+(?:2|4)$")


def _missing_cuda_function(msg: str) -> str:
    """A sentence for "'name' was not declared" where name is a CUDA device function, or ''."""
    m = re.match(r"['\u2018](\w+)['\u2019] was not declared in this scope"
                 r"|use of undeclared identifier '(\w+)'", msg)
    name = m and (m.group(1) or m.group(2))
    if name and (name in _CUDA_FUNCTIONS or _CUDA_FUNCTION_FAMILIES.match(name)):
        return (f"CUDA has {name}(); the emulator does not: write it from operations it has, "
                f"or run this kernel on a GPU")
    return ""


# Names that come from a CUDA header a file must include, under nvcc too.
_HEADER_OF = [
    (re.compile(r"__half2?|half2?|__(?:float|double|int|uint|short|ushort|ll|ull)2half\w*|__half2\w+"
                r"|__h(?:add|sub|mul|div|fma)2?\w*|h(?:sqrt|exp|log)\w*|CUDART_\w+_FP16"), "cuda_fp16.h"),
    (re.compile(r"__nv_bfloat162?|nv_bfloat162?|__\w*2bfloat16\w*|__bfloat16\w*|CUDART_\w+_BF16"),
     "cuda_bf16.h"),
    (re.compile(r"cooperative_groups|cg"), "cooperative_groups.h"),
    (re.compile(r"nvcuda|wmma"), "mma.h"),
]


def _missing_header(msg: str) -> str:
    """A sentence for an undeclared name that a CUDA header declares, or ''."""
    m = re.match(r"['\u2018](\w+)['\u2019] (?:was not declared in this scope|does not name a type"
                 r"|has not been declared|is not a namespace-name)"
                 r"|use of undeclared identifier '(\w+)'|unknown type name '(\w+)'", msg)
    name = m and next((g for g in m.groups() if g), None)
    for pattern, header in _HEADER_OF if name else ():
        if pattern.fullmatch(name):
            return (f"`{name}` comes from <{header}>: add #include <{header}> at the top of the "
                    f"file (nvcc needs it too)")
    return ""


def _cuda_rule(msg: str, code: str, source: str | None) -> str:
    """The CUDA rule that a g++ error on kernel line ``code`` comes from, or ''."""
    missing = _missing_cuda_function(msg) or _missing_header(msg)
    if missing:
        return missing
    if re.search(r"ambiguous overload for 'operator", msg) and re.search(r"half|bfloat16", msg):
        return (f"{msg}: CUDA has no mixed 16-bit and float arithmetic either; convert one side "
                f"(e.g. __hadd(x, __float2half(1.0f)), or compute in float with __half2float)")
    if re.search(r"\bwarpSize\b", code) and "constant" in msg:
        return ("warpSize is not a compile-time constant in CUDA (it is a variable read at run "
                "time), so it cannot size an array or be a template argument; write 32 there")
    names = set(constant_names(source or ""))
    m = re.search(r"read-only (?:location|variable|reference) '(?:\(?[*&]?)?([A-Za-z_]\w*)", msg)
    name = m.group(1) if m and m.group(1) in names else ""
    if not name and "const" in msg:
        name = next((n for n in names if re.search(rf"\b{n}\b", code)), "")
    if name:
        return (f"`{name}` is a __constant__ variable, which device code may only read (CUDA "
                f"rejects a write to it); give its values in its initializer, or pass the data "
                f"in an array argument")
    return ""


_UNCLOSED = re.compile(r"^expected '}'(?: at end of input)?$")


def _unclosed_brace(lines: list[str], filename: str, source: str | None) -> str:
    """The sentence for a '{' of the kernel file that is never closed, or ''.

    The compiler meets the end of it only in the entry points appended after the kernel
    source, which then give errors of their own first (an `extern "C"` inside a function)."""
    for i, text in enumerate(lines):
        m = _ERROR.match(text)
        if not m or not _UNCLOSED.match(m.group("msg")) or \
                os.path.basename(m.group("file")) == filename:
            continue
        for note in lines[i + 1:]:
            o = re.match(rf"^{re.escape(filename)}:(\d+):(?:\d+:)? note: to match this '{{'", note)
            if o:
                code = source_line(source, o.group(1))
                return (f"{filename} line {o.group(1)}: expected '}}' at end of input (to match "
                        f"the '{{' on this line)" + (f"\n    {code}" if code else ""))
            if _ERROR.match(note):
                break
        return f"{filename}: expected '}}' at end of input (a '{{' is never closed)"
    return ""


def explain_compiler_errors(log: str, filename: str, source: str | None = None) -> str:
    """The first useful error of a g++/clang log, located in the kernel file's own lines.

    An error the course's own code after the kernel source gives because the kernel left a
    '{' open is passed over for the compiler's "expected '}' at end of input"."""
    lines = log.splitlines()
    for i, text in enumerate(lines):
        m = _ERROR.match(text)
        if not m:
            continue
        if os.path.basename(m.group("file")) != filename:
            unclosed = _unclosed_brace(lines, filename, source)
            if unclosed:
                return unclosed
        msg = m.group("msg").replace("static assertion failed: ", "")
        if os.path.basename(m.group("file")) == filename:
            code = source_line(source, m.group("line"))
            msg = _cuda_rule(msg, code, source) or msg
            return f"{filename} line {m.group('line')}: {msg}" + (f"\n    {code}" if code else "")
        # An error inside the prelude or the entry points: name the kernel line that led there.
        for other in lines:
            o = re.match(rf"^{re.escape(filename)}:(\d+):", other)
            if o:
                msg = _cuda_rule(msg, source_line(source, o.group(1)), source) or msg
                return f"{filename} line {o.group(1)}: {msg}"
        if "entry points" in m.group("file"):
            return f"{filename}: the emulator cannot pass this kernel's arguments: {msg}"
        return f"{filename}: {msg} (in {os.path.basename(m.group('file'))} line {m.group('line')})"
    for text in lines:
        u = re.search(r"undefined reference to [`'](.+?)'", text)
        if u:
            return (f"{filename}: `{u.group(1)}` is used but never defined (a __device__ "
                    f"function declared without a body, or one CUDA has that the emulator lacks).")
    useful = [t for t in lines if "error" in t.lower()] or lines[-3:] or ["no output"]
    return f"{filename}: the C++ compiler failed: {useful[0].strip()}"
