"""Declarations read from CUDA C source: type aliases, structs, file-scope variables, and the
``__shared__`` variables of functions whose statics the host compiler cannot place in shared
memory.

Every function takes text whose comments (and string contents) are blanked and whose inactive
``#if`` branches are left out (``source.strip_comments``, ``preprocess.preprocess``), so that
offsets are those of the file.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_WORD = re.compile(r"[A-Za-z_]\w*")
#: Words that qualify a type without naming it.
QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "__grid_constant__",
              "struct", "class", "union", "typename", "static", "extern", "inline",
              "__device__", "__host__", "__forceinline__", "__constant__", "__shared__"}


def _past(text: str, i: int, pair: str) -> int:
    """Index just past the bracket that closes the one opened before ``i``."""
    depth = 1
    while i < len(text) and depth:
        c = text[i]
        if c == pair[0]:
            depth += 1
        elif c == pair[1]:
            depth -= 1
        i += 1
    return i


def _statements_at_depth0(text: str):
    """(start, end) of each statement at brace depth 0 (outside every function and class
    body, but inside namespace and ``extern "C"`` blocks), ending at its ``;``."""
    i, start, n = 0, 0, len(text)
    depth_stack: list[bool] = []  # for each open brace: is it a namespace / extern "C" block
    while i < n:
        c = text[i]
        if c == "{":
            head = text[start:i]
            if re.search(r'\bnamespace\b[^;{}]*$|\bextern\s+"C"\s*$', head):
                depth_stack.append(True)
                start = i + 1
                i += 1
                continue
            j = _past(text, i + 1, "{}")
            # An initializer or a struct definition: the statement goes on to its ';'. A
            # function's body ends it.
            if not re.search(r"=\s*$|\b(?:struct|class|union|enum)\b", head):
                start = j
            i = j
            continue
        if c == "}":
            if depth_stack:
                depth_stack.pop()
            start = i + 1
        elif c == ";":
            yield start, i
            start = i + 1
        elif c == "#":  # a directive line is no statement
            eol = text.find("\n", i)
            eol = n if eol < 0 else eol
            if not text[start:i].strip():
                start = eol
            i = eol
            continue
        i += 1


def _in_namespace(text: str, pos: int) -> bool:
    """Whether ``pos`` lies inside a named or unnamed ``namespace`` block."""
    for m in re.finditer(r"\bnamespace\b[^;{}]*\{", text[:pos]):
        if _past(text, m.end(), "{}") > pos:
            return True
    return False


@dataclass(frozen=True)
class Alias:
    """``typedef TARGET NAME;`` or ``using NAME = TARGET;``: the target's words and stars."""

    words: tuple[str, ...]
    stars: int = 0


def aliases_and_structs(text: str) -> tuple[dict[str, Alias], set[str]]:
    """The type aliases and the names of structs (classes, unions) that ``text`` defines."""
    aliases: dict[str, Alias] = {}
    structs: set[str] = set()
    for m in re.finditer(r"\b(?:struct|class|union)\s+(?:__align__\s*\([^)]*\)\s*|alignas\s*\([^)]*\)\s*"
                         r"|__attribute__\s*\(\([^)]*\)\)\s*)*([A-Za-z_]\w*)\s*(?::[^{;]*)?\{", text):
        head = text[max(0, m.start() - 200):m.start()]
        if re.search(r"template\s*<[^;{}]*>\s*$", head):
            continue  # a class template is no parameter type without its arguments
        structs.add(m.group(1))
    for m in re.finditer(r"\btypedef\b", text):
        i, depth = m.end(), 0
        body = None
        while i < len(text):
            c = text[i]
            if c == "{":
                j = _past(text, i + 1, "{}")
                body = (i, j)
                i = j
                continue
            if c == ";":
                break
            i += 1
        stmt = text[m.end():i]
        if body is not None:  # typedef struct [Tag] { ... } Name, *PName;
            for part in text[body[1]:i].split(","):
                words = _WORD.findall(part)
                if words and "*" not in part:
                    structs.add(words[-1])
            continue
        if "(" in stmt:
            continue  # a function pointer type
        stmt = re.sub(r"\[[^\]]*\]", "", stmt)
        words = _WORD.findall(stmt)
        if len(words) < 2:
            continue
        aliases[words[-1]] = Alias(tuple(w for w in words[:-1] if w not in QUALIFIERS),
                                   stmt.count("*"))
    for m in re.finditer(r"\busing\s+([A-Za-z_]\w*)\s*=\s*([^;{}()]*);", text):
        head = text[max(0, m.start() - 200):m.start()]
        if re.search(r"template\s*<[^;{}]*>\s*$", head):
            continue
        target = m.group(2)
        aliases[m.group(1)] = Alias(tuple(w for w in _WORD.findall(target) if w not in QUALIFIERS),
                                    target.count("*"))
    return aliases, structs


@dataclass(frozen=True)
class GlobalVar:
    """A file-scope ``__constant__`` or ``__device__`` variable."""

    name: str
    space: str          # "constant" or "device"
    type_words: tuple[str, ...]
    dims: tuple[str, ...]  # the array bounds as written
    start: int          # offset of the declaration's first character
    end: int            # offset of its ';'
    has_init: bool
    in_namespace: bool


def _declarators(decl: str):
    """(text, start offset) of each declarator of ``decl``, split at depth-0 commas."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(decl):
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        elif c == "," and depth == 0:
            out.append((decl[start:i], start))
            start = i + 1
    out.append((decl[start:], start))
    return out


def file_globals(text: str) -> list[GlobalVar]:
    """The ``__constant__`` and ``__device__`` variables declared outside every function."""
    found = []
    for start, end in _statements_at_depth0(text):
        stmt = text[start:end]
        m = re.search(r"\b(__constant__|__device__)\b", stmt)
        if not m or "__global__" in stmt or "__shared__" in stmt or "__managed__" in stmt:
            continue
        if re.search(r"\b(typedef|template|using|operator)\b", stmt):
            continue
        lead = stmt[:m.start()]
        if re.search(r"\bextern\b", lead + stmt):
            continue  # a declaration: the definition is elsewhere
        space = "constant" if m.group(1) == "__constant__" else "device"
        rest = stmt[m.end():]
        first_bracket = min([k for k in (rest.find("("), rest.find("=")) if k >= 0] or [len(rest)])
        if "(" in rest[:first_bracket + 1] and rest.find("(") == first_bracket:
            continue  # a function
        # The type: words before the first declarator's name.
        parts = _declarators(rest)
        first_text = parts[0][0].split("=", 1)[0]
        first_words = _WORD.findall(re.sub(r"\[[^\]]*\]", "", first_text))
        head_words = [w for w in _WORD.findall(lead) if w not in QUALIFIERS]
        if not first_words:
            continue
        type_words = tuple(head_words + [w for w in first_words[:-1] if w not in QUALIFIERS])
        for k, (part, offset) in enumerate(parts):
            decl, _, init = part.partition("=")
            words = _WORD.findall(re.sub(r"\[[^\]]*\]", "", decl))
            if not words:
                continue
            name = words[-1]
            dims = tuple(d.strip() for d in re.findall(r"\[([^\]]*)\]", decl))
            found.append(GlobalVar(name, space, type_words, dims, start, end, bool(init.strip()),
                                   _in_namespace(text, start)))
    return found


@dataclass(frozen=True)
class SharedDecl:
    """A static ``__shared__`` declaration (``__shared__ T a[N], b;``) that is to be placed at
    run time: one inside a template, an inline or member function, or a lambda."""

    start: int      # offset of `__shared__` (or of `static` before it)
    end: int        # offset of the ';'
    type_text: str
    declarators: tuple[tuple[str, str], ...]  # (name, dims as written, e.g. "[TILE][TILE+1]")


def kernel_bodies(text: str) -> list[tuple[int, int, bool]]:
    """(start, end, is a template) of the body of each ``__global__`` function of ``text``."""
    spans = []
    for m in re.finditer(r"\b__global__\b", text):
        bol = text.rfind("\n", 0, m.start()) + 1
        if text[bol:m.start()].lstrip().startswith("#"):
            continue
        i = text.find("(", m.end())
        if i < 0:
            break
        i = _past(text, i + 1, "()")
        while i < len(text) and text[i].isspace():
            i += 1
        if i < len(text) and text[i] == "{":
            prefix_start = max(text.rfind(c, 0, m.start()) for c in ";{}") + 1
            template = bool(re.search(r"\btemplate\b", text[prefix_start:m.start()]))
            spans.append((i, _past(text, i + 1, "{}"), template))
    return spans


_SHARED_DECL = re.compile(r"(?:\bstatic\s+)?\b__shared__\b(?P<decl>[^;{}#]*);")
# What makes a function's static locals land outside the section of shared memory: a
# template, an inline function (a member defined in its class is one), a lambda.
_PLACED_HEADER = re.compile(r"\btemplate\b|\binline\b|\b(?:struct|class|union)\b"
                            r"|(?:^|[(,=]|\breturn)\s*\[[^\[\]]*\]\s*(?:\([^()]*\))?\s*(?:mutable\s*)?"
                            r"(?:->\s*[\w:<>\s*&]+)?\s*$")


def placed_shared(text: str) -> list[SharedDecl]:
    """The static ``__shared__`` declarations of a template, an inline function (a class's
    member functions included) or a lambda: the host compiler puts their statics in sections
    of their own, outside the emulator's shared memory, so these get their memory from the
    runtime, block by block. Those of plain kernels and functions, and at file scope, stay."""
    out = []
    for m in _SHARED_DECL.finditer(text):
        pos = m.start()
        if re.search(r"\bextern\s+$", text[max(0, pos - 40):pos]):
            continue  # dynamic shared memory: the runtime's buffer already
        headers = enclosing_headers(text, pos)
        if not headers or not any(_PLACED_HEADER.search(h) for h in headers):
            continue
        decl = m.group("decl")
        if "=" in decl.replace("==", ""):
            continue  # an initializer: refused by the source checks
        parts = _declarators(decl)
        fm = re.match(r"\s*(?P<type>.*?)(?P<name>[A-Za-z_]\w*)\s*(?P<dims>(?:\[[^\]]*\]\s*)*)$",
                      parts[0][0], re.S)
        if not fm or not fm.group("type").strip():
            continue
        decls = [(fm.group("name"), fm.group("dims").strip())]
        for part, _ in parts[1:]:
            pm = re.match(r"\s*(?P<name>[A-Za-z_]\w*)\s*(?P<dims>(?:\[[^\]]*\]\s*)*)$", part)
            if not pm:
                break
            decls.append((pm.group("name"), pm.group("dims").strip()))
        else:
            out.append(SharedDecl(pos, m.end() - 1, fm.group("type").strip(), tuple(decls)))
    return out


def enclosing_headers(text: str, pos: int) -> list[str]:
    """The heads (``template <int N> __device__ void f(...)``, ``for (...)``) of the blocks
    open at ``pos``, outermost first, leaving out namespace and ``extern "C"`` blocks."""
    stack: list[str | None] = []
    head_start = 0
    for i in range(pos):
        c = text[i]
        if c == "{":
            head = text[head_start:i]
            plain = not re.search(r'\bnamespace\b[^;{}]*$|\bextern\s+"C"\s*$', head)
            stack.append(head.strip() if plain else None)
            head_start = i + 1
        elif c == "}":
            if stack:
                stack.pop()
            head_start = i + 1
        elif c == ";":
            head_start = i + 1
    return [h for h in stack if h is not None]
