"""Reading CUDA C source: kernel signatures, parameter types, constructs the emulator lacks.

Shared by both backends: ``gpucourse.kernels`` checks launch arguments against the
signatures found here, and the emulator build rewrites the few things g++ cannot take.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..errors import CompileError

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
_SCALARS = {
    "float": "float32", "double": "float64",
    "int": "int32", "signed": "int32", "signed int": "int32", "int32_t": "int32",
    "unsigned": "uint32", "unsigned int": "uint32", "uint32_t": "uint32",
    "long": "int64", "long int": "int64", "long long": "int64", "long long int": "int64",
    "signed long long": "int64", "int64_t": "int64", "ptrdiff_t": "int64",
    "unsigned long": "uint64", "unsigned long int": "uint64", "unsigned long long": "uint64",
    "unsigned long long int": "uint64", "uint64_t": "uint64", "size_t": "uint64",
    "short": "int16", "short int": "int16", "int16_t": "int16",
    "unsigned short": "uint16", "unsigned short int": "uint16", "uint16_t": "uint16",
    "char": "int8", "signed char": "int8", "int8_t": "int8",
    "unsigned char": "uint8", "uint8_t": "uint8", "bool": "bool",
}
_VECTOR_ELEMENTS = {
    "char": "int8", "uchar": "uint8", "short": "int16", "ushort": "uint16", "int": "int32",
    "uint": "uint32", "long": "int64", "ulong": "uint64", "longlong": "int64",
    "ulonglong": "uint64", "float": "float32", "double": "float64",
}
_VECTORS = {f"{k}{n}": (v, n) for k, v in _VECTOR_ELEMENTS.items() for n in (1, 2, 3, 4)}
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict",
               "__grid_constant__", "struct"}
_TYPE_WORDS = {"int", "float", "double", "char", "short", "long", "unsigned", "signed", "bool",
               "void", "size_t"} | set(_VECTORS) | {k for k in _SCALARS if " " not in k}


@dataclass(frozen=True)
class Param:
    """One kernel parameter as declared in the source."""

    index: int
    name: str
    decl: str               # the type as written, e.g. "const float*"
    base: str               # "float", "float4", "void", ...
    pointer: bool
    const: bool             # a pointer to const data (an input)
    dtype: np.dtype | None  # element or scalar dtype; None for void* or an unsupported type
    lanes: int = 1          # 4 for float4*, ...
    problem: str = ""       # why it cannot be passed from Python, if it cannot

    def __str__(self) -> str:
        return f"{self.decl} {self.name}"


@dataclass(frozen=True)
class KernelSignature:
    """An ``extern "C" __global__`` function: its name, parameters and source line."""

    name: str
    params: tuple[Param, ...]
    line: int

    def __str__(self) -> str:
        return f"{self.name}({', '.join(map(str, self.params))})"


def _parse_param(index: int, text: str) -> Param:
    text = text.split("=", 1)[0].strip()  # a default value plays no part in a launch
    tokens = re.findall(r"[A-Za-z_]\w*|\*|&|\[|\]", text)
    stars = tokens.count("*") + (1 if "[" in tokens else 0)
    words = [t for t in tokens if re.match(r"[A-Za-z_]", t)]
    first_star = tokens.index("*") if "*" in tokens else len(tokens)
    const = stars > 0 and "const" in tokens[:first_star]
    plain = [w for w in words if w not in _QUALIFIERS]
    if len(plain) >= 2 and plain[-1] not in _TYPE_WORDS:
        name, type_words = plain[-1], plain[:-1]
    else:
        name, type_words = f"arg{index + 1}", plain
    base = " ".join(type_words)
    decl = ("const " if const else "") + base + ("*" * stars)
    problem, dtype, lanes = "", None, 1
    if "&" in tokens:
        problem = "a reference parameter cannot be passed from Python; use a pointer or a value"
    elif stars > 1:
        problem = "a pointer to a pointer cannot be passed from Python; pass a flat array"
    elif base in _SCALARS:
        dtype = np.dtype(_SCALARS[base])
    elif base in _VECTORS:
        elem, lanes = _VECTORS[base]
        dtype = np.dtype(elem)
        if not stars:
            problem = (f"a {base} passed by value cannot be passed from Python; "
                       f"pass a pointer ({base}*) or its {lanes} components")
    elif base == "void" and stars:
        dtype = None
    else:
        problem = f"the type `{base}` cannot be passed from Python"
    return Param(index, name, decl, base, stars == 1, const, dtype, lanes, problem)


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


def find_kernels(code: str, filename: str = "kernel.cu") -> list[KernelSignature]:
    """The ``__global__`` functions defined in ``code``, in source order.

    Raises CompileError for a kernel that Python could not call by name: one that is not
    ``extern "C"`` (C++ mangles its name), a template, or one that does not return void.
    """
    text = _blank_launch_bounds(strip_comments(code))
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
                f"kernels by name, so write one extern \"C\" kernel per type (or use defines).")
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
        params = tuple(_parse_param(k, p) for k, p in enumerate(_split_params(text[after.end():i - 1])))
        found[name] = KernelSignature(name, params, line)
    return list(found.values())


# --------------------------------------------------------------------------- emulator subset

# (pattern, what it is, what to do instead). Checked on code without comments and strings.
_UNSUPPORTED = [
    (r"#\s*include\s*[<\"]\s*(cooperative_groups[^>\"]*|mma\.h|cuda_fp16\.h|cuda_bf16\.h"
     r"|cuda_fp8\.h|cuda_pipeline[^>\"]*|curand[^>\"]*|cub/[^>\"]*|thrust/[^>\"]*|cuda/[^>\"]*)",
     "the header <{0}>", "the emulator covers the course's subset of CUDA C"),
    (r"\bcooperative_groups\b|\bcg::", "cooperative groups",
     "use __syncthreads() and the __*_sync warp functions"),
    (r"<<<", "launching a kernel from a kernel (dynamic parallelism)",
     "launch kernels from Python"),
    (r"\basm\s*(?:volatile\s*)?\(|\b__asm__\b|\b__asm\b", "inline PTX assembly (asm)",
     "write the operation in CUDA C"),
    (r"\b(tex1D|tex2D|tex3D|tex1Dfetch|tex2DLayered|texture|surf1Dread|surf1Dwrite|surf2Dread"
     r"|surf2Dwrite|cudaTextureObject_t|cudaSurfaceObject_t)\b",
     "texture and surface memory ({0})", "read the array through a pointer (or __ldg)"),
    (r"\bwmma\b|\bnvcuda\b", "tensor-core matrix operations (wmma)",
     "use plain float arithmetic on the emulator"),
    (r"\b(__shfl|__shfl_up|__shfl_down|__shfl_xor|__ballot|__any|__all)\s*\(",
     "the pre-CUDA-9 warp function {0}()",
     "use its _sync form, e.g. __shfl_down_sync(0xffffffff, v, offset)"),
    (r"\b(__half2?|__nv_bfloat162?|__float2half\w*|__half2float|__float2bfloat16\w*)\b",
     "16-bit floating-point types ({0})", "use float on the emulator"),
    (r"\b__activemask\s*\(", "__activemask()",
     "the emulator does not track which lanes run together; compute the mask, e.g. "
     "__ballot_sync(0xffffffff, condition) before the branch"),
    (r"\b__managed__\b", "managed memory (__managed__)", "pass arrays as kernel arguments"),
    (r"\bcuda[A-Z]\w*\s*\(", "the host-side CUDA runtime call {0}",
     "a kernel file holds device code only; allocate and copy arrays from Python "
     "(gc.device.asarray)"),
    (r"\bcuda::", "the CUDA C++ standard library (cuda::)", "use the plain CUDA C built-ins"),
    (r"(?<![\w.])clock\s*\(\s*\)", "clock()", "use clock64()"),
]


# Constructs g++ would take but CUDA rejects: (pattern, the error, one sentence).
_INVALID = [
    (r"\b__shared__\b[^;{}#]*?(?<![=!<>])=(?!=)",
     "a __shared__ variable cannot have an initializer (CUDA rejects it: shared memory starts "
     "undefined in every block); assign it in the kernel, then __syncthreads()"),
]


def check_supported(code: str, filename: str = "kernel.cu") -> None:
    """Raise CompileError naming the first construct of ``code`` the emulator does not run,
    or that CUDA rejects although the host compiler would take it."""
    text = strip_comments(code, blank_strings=True)
    for pattern, message in _INVALID:
        m = re.search(pattern, text)
        if m:
            raise CompileError(f"{filename} line {line_of(text, m.start())}: {message}.")
    shared_in_template = _shared_in_template(text)
    if shared_in_template is not None:
        raise CompileError(
            f"{filename} line {line_of(text, shared_in_template)}: the CPU emulator does not "
            "support a __shared__ array inside a function template (the host compiler places "
            "it outside shared memory); declare it in the kernel and pass a pointer, or make "
            "the function a plain __device__ function.")
    # #include lines keep their header names: blank_strings emptied "..." includes.
    includes = strip_comments(code)
    hits = []
    for pattern, what, instead in _UNSUPPORTED:
        src = includes if pattern.startswith("#") else text
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


def _shared_in_template(text: str) -> int | None:
    """Offset of the first __shared__ inside the body of a function template, or None."""
    for m in re.finditer(r"\btemplate\s*<", text):
        i = _past_close(text, m.end(), "<>")  # the template's parameter list
        body = text.find("{", i)
        stop = text.find(";", i)
        if body < 0 or (0 <= stop < body and "(" not in text[i:stop]):
            continue  # a declaration without a body
        j = _past_close(text, body + 1, "{}")
        hit = re.search(r"\b__shared__\b", text[body:j])
        if hit:
            return body + hit.start()
    return None


_DROPPED_INCLUDES = re.compile(
    r"^[ \t]*#[ \t]*include[ \t]*[<\"](assert\.h|cassert|cuda_runtime\.h|cuda_runtime_api\.h"
    r"|cuda\.h|device_launch_parameters\.h|device_functions\.h|math_constants\.h"
    r"|vector_types\.h|sm_\d+_intrinsics\.h)[>\"][^\n]*$", re.M)
_EXTERN_SHARED = re.compile(r"\bextern\s+__shared__\s+([^;]*?)\s*;")
# `__shared__ T name[d1][d2];` (static: `extern` is handled above), without commas (they
# would split the macro's arguments) or an initializer (refused by check_supported).
_STATIC_SHARED_ARRAY = re.compile(
    r"(?<!extern )\b__shared__\s+([A-Za-z_][\w\s()]*?)\s+([A-Za-z_]\w*)\s*((?:\[[^\];,]+\]\s*)+);")


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


def _initialize_constants(code: str) -> str:
    # The prelude makes __constant__ `const`, which C++ wants initialized: CUDA zeroes it.
    text = strip_comments(code, blank_strings=True)
    ends = []  # where each declarator without an initializer ends
    for m in re.finditer(r"\b__constant__\b[^;{}#]*;", text):
        depth, start = 0, m.start()
        for i in range(m.start(), m.end()):
            depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(text[i], 0)
            if depth == 0 and text[i] in ",;":
                if "=" not in text[start:i]:
                    ends.append(len(text[:i].rstrip()))
                start = i + 1
    for end in reversed(ends):
        code = code[:end] + " = {}" + code[end:]
    return code


def _kernel_bodies(text: str) -> list[tuple[int, int]]:
    """(start, end) of the body of each ``__global__`` function defined in ``text``."""
    text = _blank_launch_bounds(text)
    spans = []
    for m in re.finditer(r"\b__global__\b", text):
        bol = text.rfind("\n", 0, m.start()) + 1
        if text[bol:m.start()].lstrip().startswith("#"):
            continue
        i = text.find("(", m.end())
        if i < 0:
            break
        i = _past_close(text, i + 1)
        while i < len(text) and text[i].isspace():
            i += 1
        if i < len(text) and text[i] == "{":
            spans.append((i, _past_close(text, i + 1, "{}")))
    return spans


def _mark_returns(code: str) -> str:
    # A kernel's `return;` tells the runtime first, which then blames an early return, not
    # a branch, for a barrier that threads never reached.
    text = strip_comments(code, blank_strings=True)
    hits = sorted(a + m.start() for a, b in _kernel_bodies(text)
                  for m in re.finditer(r"\breturn(?=\s*;)", text[a:b]))
    for pos in reversed(hits):
        code = code[:pos] + "return __gcemu_return()" + code[pos + len("return"):]
    return code


def _keep_static_shared(code: str) -> str:
    # The host compiler drops a static __shared__ variable that it can prove unused (or only
    # written); marked `used` it stays in the library, so that the 48 KB check counts every
    # array the source declares, not only those the optimizer kept.
    text = strip_comments(code, blank_strings=True)
    hits = []
    for m in re.finditer(r"\b(?:__shared__|GCEMU_SHARED_ARRAY)\b", text):
        line = text[text.rfind("\n", 0, m.start()) + 1:m.start()].lstrip()
        if line.startswith("#") and not re.match(r"#\s*define\b", line):
            continue  # #ifdef __shared__ and the like
        if not re.search(r"\bextern\s+$", text[max(0, m.start() - 40):m.start()]):
            hits.append(m.start())
    for pos in reversed(hits):
        code = code[:pos] + "__attribute__((used)) " + code[pos:]
    return code


def rewrite_for_emulator(code: str) -> str:
    """Make ``code`` compile on the host without changing its line numbers.

    - ``extern __shared__ T name[];`` names the runtime's dynamic shared buffer;
    - ``__shared__ T name[N];`` becomes ``GCEMU_SHARED_ARRAY(T, name, [N]);`` (the race
      detector's build puts guard bytes after it); every static ``__shared__`` variable is
      marked ``used``, so that the compiler keeps it even where it is never read;
    - a ``__constant__`` variable without an initializer gets ``= {}`` (the prelude makes
      it ``const``, so that device code cannot write it);
    - a kernel's ``return;`` becomes ``return __gcemu_return();``, which tells the runtime;
    - includes of CUDA's own headers are dropped (the prelude defines what they declare),
      and so is <assert.h>, which would replace the kernel-safe ``assert`` of the prelude.
    """
    code = _mark_returns(_initialize_constants(code))
    code = _DROPPED_INCLUDES.sub("", code)
    code = re.sub(r"\bstatic(\s+)__shared__\b", r"\1__shared__", code)  # the macro adds static
    code = _STATIC_SHARED_ARRAY.sub(
        lambda m: f"GCEMU_SHARED_ARRAY({m.group(1)}, {m.group(2)}, {m.group(3).strip()});", code)
    code = _EXTERN_SHARED.sub(
        lambda m: ("extern __attribute__((visibility(\"hidden\"))) " + m.group(1)
                   + " __asm__(\"__gcemu_dynamic_shared_buf\");"), code)
    return _keep_static_shared(code)


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
