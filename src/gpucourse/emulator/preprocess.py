"""Which lines of a CUDA C file the compiler sees: conditional directives, evaluated in Python.

The source checks and the reading of kernel signatures look at the code the compiler will
compile, so that a construct the emulator lacks in an inactive ``#if`` branch (a bf16 path
under ``#if defined(ENABLE_BF16)``) is no error, and a parameter typed with a macro or a
typedef chosen by ``#if`` is read as the type the compiler sees. :func:`preprocess` blanks the
lines of inactive branches and keeps every other line as written (line numbers stay those of
the file), and records the object-like and function-like macros that are defined.

Macros are known from ``#define`` lines of the file, the ``defines`` of a build, and the
predefined macros of the target (:func:`target_macros`): ``__CUDACC__``, ``__CUDA_ARCH__`` and
the compiler version, as NVRTC defines them. An identifier no macro names is 0 in ``#if``, as
in C. Headers are not read: ``#include`` changes no macro here (``__has_include`` knows the
headers the emulator provides).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

#: The CUDA architecture the emulator compiles for (``__CUDA_ARCH__``): what it runs matches
#: compute capability 8.0 (bf16, warp reductions, cooperative groups, WMMA).
EMULATOR_ARCH = 800
#: Headers the emulator provides, for ``__has_include``.
PROVIDED_HEADERS = frozenset({
    "cuda_runtime.h", "cuda_runtime_api.h", "cuda.h", "device_launch_parameters.h",
    "device_functions.h", "math_constants.h", "vector_types.h", "cuda_fp16.h", "cuda_bf16.h",
    "cooperative_groups.h", "cooperative_groups/reduce.h", "mma.h", "climits", "limits.h",
    "cstdint", "stdint.h", "cmath", "math.h", "cfloat", "float.h", "cstdio", "stdio.h",
    "cstdlib", "stdlib.h", "assert.h", "cassert", "cstring", "string.h", "type_traits",
    "utility", "limits", "cstddef", "stddef.h"})


def target_macros(arch: int = EMULATOR_ARCH) -> dict[str, str]:
    """The macros a CUDA compiler predefines for device code of compute capability ``arch``."""
    return {"__CUDACC__": "1", "__CUDA_ARCH__": str(int(arch)), "__CUDACC_VER_MAJOR__": "12",
            "__CUDACC_VER_MINOR__": "0", "__CUDACC_VER_BUILD__": "0", "__cplusplus": "201703L",
            "__NVCC_DIAG_PRAGMA_SUPPORT__": "1"}


@dataclass
class Macro:
    """A ``#define``: its body and, for a function-like macro, its parameters."""

    body: str
    params: tuple[str, ...] | None = None


@dataclass
class Preprocessed:
    """``text``: the file with inactive lines blank; ``macros``: those defined at its end."""

    text: str
    macros: dict[str, Macro] = field(default_factory=dict)
    blank: frozenset[int] = frozenset()  # indices of the lines left out

    def apply(self, other: str) -> str:
        """``other`` (the same file, e.g. with strings kept) with the same lines left out."""
        rows = other.split("\n")
        return "\n".join("" if i in self.blank else r for i, r in enumerate(rows))

    def expand(self, text: str) -> str:
        """``text`` with object-like macros (and simple function-like ones) expanded."""
        return expand(text, self.macros)


_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*([A-Za-z_]\w*)?(.*)$", re.S)
_IDENT = re.compile(r"[A-Za-z_]\w*")


def _logical_lines(text: str) -> list[tuple[int, int, str]]:
    """(first line index, line count, joined text) of each line, backslash-newlines joined."""
    rows = text.split("\n")
    out, i = [], 0
    while i < len(rows):
        start, joined = i, rows[i]
        while joined.endswith("\\") and i + 1 < len(rows):
            i += 1
            joined = joined[:-1] + " " + rows[i]
        out.append((start, i - start + 1, joined))
        i += 1
    return out


def preprocess(code: str, defines: dict | None = None, predefined: dict | None = None) -> Preprocessed:
    """``code`` as the compiler sees it, line for line: see the module's docstring.

    ``code`` should have its comments blanked already (``source.strip_comments``).
    """
    macros: dict[str, Macro] = {k: Macro(str(v)) for k, v in (predefined or target_macros()).items()}
    for k, v in (defines or {}).items():
        macros[str(k)] = Macro(str(int(v)) if isinstance(v, bool) else str(v))
    rows = code.split("\n")
    blank: set[int] = set()
    # Each open #if: (this group active, some earlier group of it taken, enclosing active).
    stack: list[list[bool]] = []
    active = True
    for start, count, line in _logical_lines(code):
        m = _DIRECTIVE.match(line)
        name = m.group(1) if m else None
        rest = m.group(2).strip() if m else ""
        if m and name in ("if", "ifdef", "ifndef"):
            if active:
                if name == "if":
                    taken = _truth(rest, macros)
                else:
                    word = _IDENT.match(rest)
                    taken = bool(word) and (word.group(0) in macros) == (name == "ifdef")
            else:
                taken = False
            stack.append([taken, taken, active])
            active = active and taken
        elif m and name in ("elif", "elifdef", "elifndef") and stack:
            group = stack[-1]
            if group[2] and not group[1]:
                if name == "elif":
                    taken = _truth(rest, macros)
                else:
                    word = _IDENT.match(rest)
                    taken = bool(word) and (word.group(0) in macros) == (name == "elifdef")
            else:
                taken = False
            group[0] = taken
            group[1] = group[1] or taken
            active = group[2] and taken
        elif m and name == "else" and stack:
            group = stack[-1]
            group[0] = not group[1]
            group[1] = True
            active = group[2] and group[0]
        elif m and name == "endif" and stack:
            active = stack.pop()[2]
            blank.update(range(start, start + count))
            continue
        elif m and active and name == "define":
            _define(rest, macros)
        elif m and active and name == "undef":
            word = _IDENT.match(rest)
            if word:
                macros.pop(word.group(0), None)
        if m and name in ("if", "ifdef", "ifndef", "elif", "elifdef", "elifndef", "else"):
            blank.update(range(start, start + count))
            continue
        if not active:
            blank.update(range(start, start + count))
    return Preprocessed("\n".join("" if i in blank else r for i, r in enumerate(rows)), macros,
                        frozenset(blank))


def _define(rest: str, macros: dict[str, Macro]) -> None:
    m = re.match(r"([A-Za-z_]\w*)(\(([^)]*)\))?\s*(.*)$", rest, re.S)
    if not m:
        return
    if m.group(2) is not None:
        params = tuple(p.strip() for p in m.group(3).split(",") if p.strip())
        macros[m.group(1)] = Macro(m.group(4).strip(), params)
    else:
        macros[m.group(1)] = Macro(m.group(4).strip())


def expand(text: str, macros: dict[str, Macro], depth: int = 0) -> str:
    """``text`` with macros expanded (a macro is not expanded inside its own expansion)."""
    if depth > 32 or not macros:
        return text
    out, i, changed = [], 0, False
    for m in _IDENT.finditer(text):
        macro = macros.get(m.group(0))
        if macro is None or m.start() < i:
            continue
        if macro.params is None:
            out.append(text[i:m.start()])
            out.append(macro.body)
            i, changed = m.end(), True
            continue
        j = m.end()
        while j < len(text) and text[j] in " \t":
            j += 1
        if j >= len(text) or text[j] != "(":
            continue
        args, k, depth_p, cur = [], j + 1, 1, []
        while k < len(text) and depth_p:
            c = text[k]
            if c == "(":
                depth_p += 1
            elif c == ")":
                depth_p -= 1
                if not depth_p:
                    break
            if c == "," and depth_p == 1:
                args.append("".join(cur))
                cur = []
            else:
                cur.append(c)
            k += 1
        if depth_p:
            continue
        args.append("".join(cur))
        body = macro.body
        for p, a in zip(macro.params, args):
            body = re.sub(rf"\b{re.escape(p)}\b", lambda _m, a=a: a.strip(), body)
        out.append(text[i:m.start()])
        out.append(body)
        i, changed = k + 1, True
    if not changed:
        return text
    out.append(text[i:])
    return expand("".join(out), macros, depth + 1)


# --------------------------------------------------------------------------- #if expressions

_TOKEN = re.compile(r"\s*(?:(0[xX][0-9a-fA-F]+|\d+)[uUlL]*|'(\\.|[^'\\])'|([A-Za-z_]\w*)"
                    r"|(<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%<>&|^!~?:()]))")
_ESCAPES = {"n": 10, "t": 9, "0": 0, "\\": 92, "'": 39, "r": 13}


def _truth(expr: str, macros: dict[str, Macro]) -> bool:
    """Whether a ``#if`` condition holds; an expression that cannot be read counts as true
    (the compiler then reports it)."""
    expr = re.sub(r"\bdefined\s*\(\s*([A-Za-z_]\w*)\s*\)|\bdefined\s+([A-Za-z_]\w*)",
                  lambda m: "1" if (m.group(1) or m.group(2)) in macros else "0", expr)
    expr = re.sub(r"\b__has_include\s*\(\s*[<\"]([^>\"]+)[>\"]\s*\)",
                  lambda m: "1" if m.group(1).strip() in PROVIDED_HEADERS else "0", expr)
    expr = expand(expr, macros)
    expr = re.sub(r"\bdefined\s*\(\s*([A-Za-z_]\w*)\s*\)|\bdefined\s+([A-Za-z_]\w*)",
                  lambda m: "1" if (m.group(1) or m.group(2)) in macros else "0", expr)
    try:
        return _Parser(expr).value() != 0
    except (ValueError, ZeroDivisionError, IndexError):
        return True


class _Parser:
    """C's integer constant expressions, by precedence climbing."""

    _BINARY = {"||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6, "<": 7, ">": 7,
               "<=": 7, ">=": 7, "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10}

    def __init__(self, text: str, strict: bool = False):
        self.tokens, pos = [], 0
        text = text.strip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                raise ValueError(text)
            pos = m.end()
            if m.group(1):
                self.tokens.append(int(m.group(1), 0) if not re.fullmatch(r"0\d+", m.group(1))
                                   else int(m.group(1), 8))
            elif m.group(2):
                ch = m.group(2)
                self.tokens.append(_ESCAPES.get(ch[1], ord(ch[1])) if ch.startswith("\\") else ord(ch))
            elif m.group(3):
                if strict and m.group(3) not in ("true", "false"):
                    raise ValueError(f"unknown name {m.group(3)}")
                self.tokens.append(1 if m.group(3) == "true" else 0)  # unknown names are 0
            else:
                self.tokens.append(m.group(4))
        self.i = 0

    def value(self) -> int:
        v = self._conditional()
        if self.i != len(self.tokens):
            raise ValueError("trailing tokens")
        return v

    def _peek(self):
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _take(self):
        t = self.tokens[self.i]
        self.i += 1
        return t

    def _conditional(self) -> int:
        cond = self._binary(1)
        if self._peek() == "?":
            self._take()
            a = self._conditional()
            if self._take() != ":":
                raise ValueError(":")
            b = self._conditional()
            return a if cond else b
        return cond

    def _binary(self, level: int) -> int:
        left = self._unary()
        while True:
            op = self._peek()
            prec = self._BINARY.get(op) if isinstance(op, str) else None
            if prec is None or prec < level:
                return left
            self._take()
            right = self._binary(prec + 1)
            left = self._apply(op, left, right)

    @staticmethod
    def _apply(op: str, a: int, b: int) -> int:
        if op in ("/", "%"):
            q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
            return q if op == "/" else a - b * q
        return {"||": lambda: int(bool(a) or bool(b)), "&&": lambda: int(bool(a) and bool(b)),
                "|": lambda: a | b, "^": lambda: a ^ b, "&": lambda: a & b,
                "==": lambda: int(a == b), "!=": lambda: int(a != b), "<": lambda: int(a < b),
                ">": lambda: int(a > b), "<=": lambda: int(a <= b), ">=": lambda: int(a >= b),
                "<<": lambda: a << b, ">>": lambda: a >> b, "+": lambda: a + b,
                "-": lambda: a - b, "*": lambda: a * b}[op]()

    def _unary(self) -> int:
        t = self._take()
        if t == "(":
            v = self._conditional()
            if self._take() != ")":
                raise ValueError(")")
            return v
        if t == "!":
            return int(not self._unary())
        if t == "~":
            return ~self._unary()
        if t == "-":
            return -self._unary()
        if t == "+":
            return self._unary()
        if isinstance(t, int):
            return t
        raise ValueError(f"unexpected {t!r}")


def evaluate(expr: str, macros: dict[str, Macro]) -> int | None:
    """The value of an integer constant expression (an array size), or None where it names
    something other than a macro (a template parameter, sizeof)."""
    try:
        return _Parser(expand(expr, macros), strict=True).value()
    except (ValueError, ZeroDivisionError, IndexError):
        return None
