"""Reading CUDA C source: kernel signatures, parameter types, constructs the emulator lacks.

Shared by both backends: ``gpucourse.kernels`` checks launch arguments against the
signatures found here, and the emulator build rewrites the few things g++ cannot take.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np

from ..errors import CompileError
from . import preprocess
from .declarations import aliases_and_structs

# --------------------------------------------------------------------------- text


def strip_comments(code: str, *, blank_strings: bool = False) -> str:
    """``code`` with comments (and, if asked, string contents) replaced by spaces.

    Newlines are kept, so offsets and line numbers stay those of the original.
    """
    out = list(code)
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if c == "/" and i + 1 < n and code[i + 1] == "/":
            j = code.find("\n", i)
            j = n if j < 0 else j
            out[i:j] = " " * (j - i)
            i = j
        elif c == "/" and i + 1 < n and code[i + 1] == "*":
            j = code.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and code[j] != c and code[j] != "\n":
                j += 2 if code[j] == "\\" else 1
            if blank_strings:
                for k in range(i + 1, min(j, n)):
                    out[k] = " "
            i = j + 1
        else:
            i += 1
    return "".join(out)


def line_of(code: str, pos: int) -> int:
    """1-based line number of offset ``pos``."""
    return code.count("\n", 0, pos) + 1


# --------------------------------------------------------------------------- types

# C type -> (NumPy element dtype, lanes). Vector types (float4, ...) are passed as arrays
# of their element type. `long` is 64-bit, as on Linux and in CUDA device code there.
# bfloat16, which NumPy lacks, travels as its bits in uint16 (emulator.bfloat16 makes them).
_SCALARS = {
    "float": "float32", "double": "float64",
    "int": "int32", "signed": "int32", "signed int": "int32", "int32_t": "int32",
    "unsigned": "uint32", "unsigned int": "uint32", "uint32_t": "uint32", "uint": "uint32",
    "long": "int64", "long int": "int64", "long long": "int64", "long long int": "int64",
    "signed long long": "int64", "int64_t": "int64", "ptrdiff_t": "int64",
    "unsigned long": "uint64", "unsigned long int": "uint64", "unsigned long long": "uint64",
    "unsigned long long int": "uint64", "uint64_t": "uint64", "size_t": "uint64",
    "ulong": "uint64",
    "short": "int16", "short int": "int16", "int16_t": "int16",
    "unsigned short": "uint16", "unsigned short int": "uint16", "uint16_t": "uint16",
    "ushort": "uint16",
    "char": "int8", "signed char": "int8", "int8_t": "int8",
    "unsigned char": "uint8", "uint8_t": "uint8", "bool": "bool",
    "__half": "float16", "half": "float16",
    "__nv_bfloat16": "uint16", "nv_bfloat16": "uint16",
}
#: The 16-bit float types whose values travel as uint16 bits.
BFLOAT16_TYPES = frozenset({"__nv_bfloat16", "nv_bfloat16", "__nv_bfloat162", "nv_bfloat162"})
_VECTOR_ELEMENTS = {
    "char": "int8", "uchar": "uint8", "short": "int16", "ushort": "uint16", "int": "int32",
    "uint": "uint32", "long": "int64", "ulong": "uint64", "longlong": "int64",
    "ulonglong": "uint64", "float": "float32", "double": "float64",
}
_VECTORS = {f"{k}{n}": (v, n) for k, v in _VECTOR_ELEMENTS.items() for n in (1, 2, 3, 4)}
_VECTORS.update({"__half2": ("float16", 2), "half2": ("float16", 2),
                 "__nv_bfloat162": ("uint16", 2), "nv_bfloat162": ("uint16", 2)})
#: sizeof of a vector type passed by value (as CUDA and the emulator's prelude lay them out).
_VECTOR_SIZES = {name: np.dtype(elem).itemsize * lanes for name, (elem, lanes) in _VECTORS.items()}
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict",
               "__grid_constant__", "struct", "class", "union", "__align__"}
_TYPE_WORDS = {"int", "float", "double", "char", "short", "long", "unsigned", "signed", "bool",
               "void", "size_t"} | set(_VECTORS) | {k for k in _SCALARS if " " not in k}


@dataclass(frozen=True)
class Param:
    """One kernel parameter as declared in the source."""

    index: int
    name: str
    decl: str               # the type as written, e.g. "const float*"
    base: str               # "float", "float4", "void", ... (after typedefs and macros)
    pointer: bool
    const: bool             # a pointer to const data (an input)
    dtype: np.dtype | None  # element or scalar dtype; None for void* or a struct
    lanes: int = 1          # 4 for float4*, ...
    problem: str = ""       # why it cannot be passed from Python, if it cannot
    struct: bool = False    # a struct (or a vector type) passed by value: a structured scalar
    size: int | None = None  # its bytes, where known from the source alone

    def __str__(self) -> str:
        return f"{self.decl} {self.name}"


@dataclass(frozen=True)
class KernelSignature:
    """An ``extern "C"`` ``__global__`` function: its name, parameters and source line."""

    name: str
    params: tuple[Param, ...]
    line: int

    def __str__(self) -> str:
        return f"{self.name}({', '.join(map(str, self.params))})"


def _resolve(words: list[str], stars: int, view) -> tuple[str, int]:
    """The type that ``words`` name once macros and typedefs are followed, and its stars."""
    seen = set()
    base = " ".join(words)
    while view is not None and base not in _SCALARS and base not in _VECTORS and base not in seen:
        seen.add(base)
        if base in view.macros and view.macros[base].params is None:
            body = view.macros[base].body
            stars += body.count("*")
            base = " ".join(w for w in re.findall(r"[A-Za-z_]\w*", body) if w not in _QUALIFIERS)
        elif base in view.aliases:
            alias = view.aliases[base]
            stars += alias.stars
            base = " ".join(alias.words)
        else:
            break
    return base, stars


def _parse_param(index: int, text: str, view=None) -> Param:
    text = text.split("=", 1)[0].strip()  # a default value plays no part in a launch
    text = re.sub(r"\b(?:__align__|alignas|__attribute__)\s*\((?:[^()]|\([^()]*\))*\)", " ", text)
    tokens = re.findall(r"[A-Za-z_]\w*|\*|&|\[|\]", text)
    stars = tokens.count("*") + (1 if "[" in tokens else 0)
    words = [t for t in tokens if re.match(r"[A-Za-z_]", t)]
    first_star = tokens.index("*") if "*" in tokens else len(tokens)
    const = stars > 0 and "const" in tokens[:first_star]
    plain = [w for w in words if w not in _QUALIFIERS]
    known = set(_TYPE_WORDS)
    if view is not None:
        known |= set(view.aliases) | view.structs | {k for k, m in view.macros.items()
                                                     if m.params is None}
    if len(plain) >= 2 and plain[-1] not in known:
        name, type_words = plain[-1], plain[:-1]
    else:
        name, type_words = f"arg{index + 1}", plain
    written = " ".join(type_words)
    decl = ("const " if const else "") + written + ("*" * stars)
    base, stars = _resolve(type_words, stars, view)
    problem, dtype, lanes, struct, size = "", None, 1, False, None
    if "&" in tokens:
        problem = "a reference parameter cannot be passed from Python; use a pointer or a value"
    elif stars > 1:
        problem = "a pointer to a pointer cannot be passed from Python; pass a flat array"
    elif base in _SCALARS:
        dtype = np.dtype(_SCALARS[base])
    elif base in _VECTORS:
        elem, lanes = _VECTORS[base]
        dtype = np.dtype(elem)
        if not stars:  # by value: a structured scalar, as CuPy passes CUDA's vector types
            struct, size, dtype = True, _VECTOR_SIZES.get(base), None
    elif base == "void" and stars:
        dtype = None
    elif view is not None and base in view.structs:
        struct = not stars  # by value: a structured scalar; a pointer: any array, as void*
    else:
        problem = f"the type `{base}` cannot be passed from Python"
    return Param(index, name, decl, base, stars == 1, const, dtype, lanes, problem, struct, size)


def _split_params(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for c in text:
        if c in "(<[":
            depth += 1
        elif c in ")>]":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    parts = [p.strip() for p in parts]
    return [] if parts in ([""], ["void"]) else parts


_AFTER_GLOBAL = re.compile(r"\s*(?P<ret>[A-Za-z_][\w\s\*]*?)\s+(?P<name>[A-Za-z_]\w*)\s*\(")


def _past_close(text: str, i: int, pair: str = "()") -> int:
    """The index just past the bracket that closes the one opened before ``i`` (``pair``:
    the opening and closing characters, nested ones counted); len(text) if none does."""
    depth = 1
    while i < len(text) and depth:
        depth += {pair[0]: 1, pair[1]: -1}.get(text[i], 0)
        i += 1
    return i


def _blank_launch_bounds(text: str) -> str:
    """``text`` with each ``__launch_bounds__(...)`` (nested parentheses too) blanked."""
    out = list(text)
    for m in re.finditer(r"\b__launch_bounds__\s*\(", text):
        i = _past_close(text, m.end())
        for k in range(m.start(), i):
            if out[k] != "\n":
                out[k] = " "
    return "".join(out)


def _extern_c_blocks(code: str) -> list[tuple[int, int]]:
    spans = []
    for m in re.finditer(r'extern\s+"C"\s*\{', code):
        spans.append((m.start(), _past_close(code, m.end(), "{}")))
    return spans


@dataclass(frozen=True)
class SourceView:
    """A CUDA C source as the compiler sees it, for checks: ``text`` without comments and
    string contents, ``includes`` without comments (strings kept), both without the lines of
    inactive ``#if`` branches (line numbers kept); its macros, type aliases and struct names."""

    text: str
    includes: str
    macros: dict
    aliases: dict
    structs: frozenset


def view(code: str, defines: dict | None = None, arch: int | None = None) -> SourceView:
    """:class:`SourceView` of ``code`` built with ``defines`` for ``__CUDA_ARCH__`` ``arch``
    (the emulator's by default)."""
    key = tuple(sorted((str(k), _define_text(v)) for k, v in (defines or {}).items()))
    return _view(code, key, arch or preprocess.EMULATOR_ARCH)


@functools.lru_cache(maxsize=256)
def _view(code: str, defines: tuple, arch: int) -> SourceView:
    includes = strip_comments(code)
    seen = preprocess.preprocess(includes, dict(defines), preprocess.target_macros(arch))
    text = seen.apply(strip_comments(code, blank_strings=True))
    aliases, structs = aliases_and_structs(text)
    return SourceView(text, seen.text, seen.macros, aliases, frozenset(structs))


def find_kernels(code: str, filename: str = "kernel.cu", defines: dict | None = None,
                 arch: int | None = None) -> list[KernelSignature]:
    """The ``__global__`` functions defined in ``code`` (the lines a compiler sees with
    ``defines``), in source order.

    Raises CompileError for a kernel that Python could not call by name: one that is not
    ``extern "C"`` (C++ mangles its name), a template, or one that does not return void.
    """
    seen = view(code, defines, arch)
    text = _blank_launch_bounds(seen.includes)
    blocks = _extern_c_blocks(text)
    found: dict[str, KernelSignature] = {}
    for m in re.finditer(r"\b__global__\b", text):
        line = line_of(text, m.start())
        bol = text.rfind("\n", 0, m.start()) + 1
        if text[bol:m.start()].lstrip().startswith("#"):
            continue  # inside a macro definition
        start = max(text.rfind(c, 0, m.start()) for c in ";{}") + 1
        prefix = text[start:m.start()]
        after = _AFTER_GLOBAL.match(text, m.end())
        if not after:
            continue
        name = after.group("name")
        if re.search(r"\btemplate\b", prefix):
            raise CompileError(
                f"{filename} line {line}: kernel {name} is a template; the course launches "
                f"kernels by name, so write its body as a template __device__ function and one "
                f"extern \"C\" __global__ kernel per instantiation that calls it (e.g. "
                f"{name}_16 calling {name}_body<16>(...)).")
        in_block = any(a <= m.start() < b for a, b in blocks)
        if not in_block and not re.search(r'\bextern\s+"C"', prefix):
            raise CompileError(
                f"{filename} line {line}: kernel {name} is not declared extern \"C\", so its "
                f"name gets mangled; write `extern \"C\" __global__ void {name}(...)`.")
        if re.sub(r"\s+", " ", after.group("ret")).strip() not in ("void", "static void"):
            raise CompileError(f"{filename} line {line}: kernel {name} must return void.")
        i = _past_close(text, after.end())  # the parameter list's closing parenthesis
        rest = text[i:].lstrip()
        if not rest.startswith("{"):
            continue  # a declaration; the definition comes elsewhere
        params = tuple(_parse_param(k, p, seen)
                       for k, p in enumerate(_split_params(text[after.end():i - 1])))
        found[name] = KernelSignature(name, params, line)
    return list(found.values())


# --------------------------------------------------------------------------- emulator subset

# (pattern, what it is, what to do instead). Checked on the code the compiler sees, without
# comments and strings.
_UNSUPPORTED = [
    (r"#\s*include\s*[<\"]\s*(cuda_fp8\.h|cuda_fp6\.h|cuda_fp4\.h|cuda_pipeline[^>\"]*"
     r"|cooperative_groups/(?!reduce\.h|scan\.h)[^>\"]*|curand[^>\"]*|cub/[^>\"]*|thrust/[^>\"]*"
     r"|cuda/[^>\"]*|cuda_awbarrier[^>\"]*|cublas[^>\"]*|cudnn[^>\"]*|cusparse[^>\"]*)",
     "the header <{0}>", "the emulator covers CUDA C with cooperative groups, 16-bit floats and "
     "WMMA, not CUDA's libraries"),
    (r"<<<", "launching a kernel from a kernel (dynamic parallelism)",
     "launch kernels from Python"),
    (r"\basm\s*(?:volatile\s*)?\(|\b__asm__\b|\b__asm\b", "inline PTX assembly (asm)",
     "write the operation in CUDA C"),
    (r"\b(tex1D|tex2D|tex3D|tex1Dfetch|tex2DLayered|texture|surf1Dread|surf1Dwrite|surf2Dread"
     r"|surf2Dwrite|cudaTextureObject_t|cudaSurfaceObject_t)\b",
     "texture and surface memory ({0})", "read the array through a pointer (or __ldg)"),
    (r"\b(__shfl|__shfl_up|__shfl_down|__shfl_xor|__ballot|__any|__all)\s*\(",
     "the pre-CUDA-9 warp function {0}()",
     "use its _sync form, e.g. __shfl_down_sync(0xffffffff, v, offset)"),
    (r"\b(coalesced_threads|coalesced_group|labeled_partition|binary_partition)\b",
     "the cooperative group {0}, whose lanes are those that happen to run together",
     "use tiled_partition<32>(this_thread_block()), or a __*_sync function with an explicit mask"),
    (r"\b(this_cluster|cluster_group|this_multi_grid|multi_grid_group)\b",
     "thread block clusters and multi-GPU groups ({0})",
     "the emulator runs one block at a time: share data between blocks through global memory "
     "and a second launch"),
    (r"\b(__nv_fp8\w*|__nv_fp6\w*|__nv_fp4\w*)\b", "8-bit and smaller floating-point types ({0})",
     "use __half or __nv_bfloat16"),
    (r"\b(__pipeline_memcpy_async|__pipeline_commit|__pipeline_wait_prior|memcpy_async)\b",
     "asynchronous copies ({0})", "copy with plain loads and stores, then __syncthreads()"),
    (r"\b__activemask\s*\(", "__activemask()",
     "the emulator does not track which lanes run together; compute the mask, e.g. "
     "__ballot_sync(0xffffffff, condition) before the branch"),
    (r"\b__managed__\b", "managed memory (__managed__)", "pass arrays as kernel arguments"),
    (r"\bcuda[A-Z]\w*\s*\(", "the host-side CUDA runtime call {0}",
     "a kernel file holds device code only; allocate and copy arrays from Python "
     "(gc.device.asarray), and set __constant__ memory with module.get_global(name)"),
    (r"\bcuda::", "the CUDA C++ standard library (cuda::)", "use the plain CUDA C built-ins"),
    (r"(?<![\w.])clock\s*\(\s*\)", "clock()", "use clock64()"),
]


# Constructs g++ would take but CUDA rejects: (pattern, the error, one sentence).
_INVALID = [
    (r"\b__shared__\b[^;{}#]*?(?<![=!<>])=(?!=)",
     "a __shared__ variable cannot have an initializer (CUDA rejects it: shared memory starts "
     "undefined in every block); assign it in the kernel, then __syncthreads()"),
]


def check_supported(code: str, filename: str = "kernel.cu", defines: dict | None = None) -> None:
    """Raise CompileError naming the first construct of ``code`` the emulator does not run,
    or that CUDA rejects although the host compiler would take it; only the lines that the
    compiler sees with ``defines`` count (not those of an inactive ``#if`` branch)."""
    seen = view(code, defines)
    text = seen.text
    for pattern, message in _INVALID:
        m = re.search(pattern, text)
        if m:
            raise CompileError(f"{filename} line {line_of(text, m.start())}: {message}.")
    # #include lines keep their header names: blank_strings emptied "..." includes.
    hits = []
    for pattern, what, instead in _UNSUPPORTED:
        src = seen.includes if pattern.startswith("#") else text
        m = re.search(pattern, src)
        if m:
            hits.append((m.start(), src, m, what, instead))
    if hits:
        pos, src, m, what, instead = min(hits, key=lambda h: h[0])
        name = m.group(1) if m.groups() else m.group(0)
        name = re.sub(r"\s*\($", "", name.strip())
        raise CompileError(
            f"{filename} line {line_of(src, pos)}: the CPU emulator does not support "
            f"{what.format(name)}; {instead}.")


def constant_names(code: str) -> list[str]:
    """Names of the ``__constant__`` variables ``code`` declares."""
    text = strip_comments(code, blank_strings=True)
    names = []
    for m in re.finditer(r"\b__constant__\b([^;#]*);", text):
        decl = m.group(1)
        while re.search(r"\{[^{}]*\}", decl):  # initializers in braces hold commas
            decl = re.sub(r"\{[^{}]*\}", "", decl)
        for part in _split_params(decl):
            words = re.findall(r"[A-Za-z_]\w*", part.split("=", 1)[0].split("[", 1)[0])
            if words:
                names.append(words[-1])
    return names


def _define_text(value) -> str:
    """The text a define's value stands for (as :func:`define_lines` writes it)."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    return str(value)


def define_lines(defines: dict | None) -> list[str]:
    """``#define`` lines for ``defines={"TILE": 32}``; names must be C identifiers."""
    lines = []
    for key, value in (defines or {}).items():
        if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z_]\w*", key):
            raise CompileError(f"define {key!r} is not a C identifier: use names like TILE or BLOCK_ROWS.")
        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, (int, np.integer)):
            text = str(int(value))
        elif isinstance(value, (float, np.floating)):
            text = repr(float(value))
        elif isinstance(value, str) and "\n" not in value:
            text = value
        else:
            raise CompileError(f"define {key}={value!r} must be an int, a float or a one-line string.")
        lines.append(f"#define {key} {text}")
    return lines


def defines_key(defines: dict | None) -> tuple:
    """A hashable, order-independent form of ``defines``."""
    return tuple(sorted((str(k), repr(v)) for k, v in (defines or {}).items()))


def c_string(text: str) -> str:
    """``text`` escaped for a C string literal (used in #line directives)."""
    return text.replace("\\", "\\\\").replace('"', '\\"')
