"""What the emulator build changes in a kernel's source before g++ compiles it, line numbers
kept (see :func:`rewrite_for_emulator`)."""
from __future__ import annotations

import re

from .declarations import enclosing_headers, file_globals, kernel_bodies, placed_shared
from .source import strip_comments, view

_DROPPED_INCLUDES = re.compile(
    r"^[ \t]*#[ \t]*include[ \t]*[<\"](assert\.h|cassert|cuda_runtime\.h|cuda_runtime_api\.h"
    r"|cuda\.h|device_launch_parameters\.h|device_functions\.h|math_constants\.h"
    r"|vector_types\.h|sm_\d+_intrinsics\.h|cuda_fp16\.hpp|cuda_bf16\.hpp)[>\"][^\n]*$", re.M)
# The emulator's <cooperative_groups.h> holds what reduce.h and scan.h add.
_GROUP_PARTS = re.compile(r"^([ \t]*#[ \t]*include[ \t]*[<\"])cooperative_groups/(?:reduce|scan)\.h([>\"])",
                          re.M)
_EXTERN_SHARED = re.compile(r"\bextern\s+__shared__\s+([^;]*?)\s*;")
# `__shared__ T name[d1][d2];` (static: `extern` is handled above), without commas (they
# would split the macro's arguments) or an initializer (refused by check_supported).
_STATIC_SHARED_ARRAY = re.compile(
    r"(?<!extern )\b__shared__\s+([A-Za-z_][\w\s()]*?)\s+([A-Za-z_]\w*)\s*((?:\[[^\];,]+\]\s*)+);")


def _same_lines(replacement: str, original: str) -> str:
    """``replacement`` padded with newlines so that it spans as many lines as ``original``."""
    missing = original.count("\n") - replacement.count("\n")
    return replacement + "\n" * max(0, missing)


def _place_shared(code: str, text: str) -> str:
    """The ``__shared__`` variables of templates, inline functions and lambdas ask the runtime
    for their memory (``__gcemu_shared_place``): g++ keeps such statics out of the section of
    shared memory, where they would be neither fresh in every block nor seen by the race
    detector. Each becomes a reference to memory placed once per block."""
    for d in reversed(placed_shared(text)):
        # Qualifiers written before `__shared__` belong to the variable's type.
        pre = re.search(r"(?:\b(?:volatile|const)\s+)+$", text[:d.start])
        start = pre.start() if pre else d.start
        quals = pre.group(0) if pre else ""
        parts = []
        for name, dims in d.declarators:
            t = f"{name}__gcemu_type"
            parts.append(
                f"static GcemuSharedSlot {name}__gcemu_slot; "
                f"typedef {quals}{d.type_text} {t}{dims}; "
                f"{t}& {name} = *reinterpret_cast<{t}*>(__gcemu_shared_place(&{name}__gcemu_slot, "
                f"sizeof({t}), alignof({t}), sizeof(std::remove_all_extents_t<{t}>), "
                f"\"{name}\"));")
        original = code[start:d.end + 1]
        code = code[:start] + _same_lines(" ".join(parts), original) + code[d.end + 1:]
    return code


def _constant_storage(code: str, text: str, guards: int) -> str:
    """Each ``__constant__`` variable becomes writable storage (so that ``get_global`` can set
    it from Python and g++ cannot fold its reads to the initializer) and a ``const``
    reference to it of the variable's name, which device code can only read, as in CUDA.
    With ``guards`` (the race detector's build) the storage sits between that many guard
    bytes on either side, where a read out of range is seen."""
    by_statement: dict[tuple[int, int], list] = {}
    for g in file_globals(text):
        if g.space == "constant":
            by_statement.setdefault((g.start, g.end), []).append(g)
    for (start, end), variables in sorted(by_statement.items(), reverse=True):
        start += len(code[start:end]) - len(code[start:end].lstrip())
        stmt = code[start:end]
        m = re.search(r"\b__constant__\b", stmt)
        if not m:
            continue
        lead = re.sub(r"\b(static|extern|__device__|const)\b", " ", stmt[:m.start()])
        rest_text = text[start + m.end():end]
        rest_code = stmt[m.end():]
        # The type: what comes before the first declarator's name.
        first = variables[0]
        fm = re.search(rf"\b{re.escape(first.name)}\b\s*(?:\[|=|,|$)", rest_text)
        if not fm:
            continue
        type_text = re.sub(r"\b(__device__|static|const)\b", " ", lead + rest_code[:fm.start()])
        type_text = " ".join(type_text.split())
        parts = []
        for part_text, part_code in _split_top(rest_text, rest_code):
            decl_t, eq, _ = part_text.partition("=")
            init = part_code[len(decl_t) + 1:] if eq else ""
            nm = re.search(r"([A-Za-z_]\w*)\s*((?:\[[^\]]*\]\s*)*)$", decl_t.strip())
            if not nm:
                continue
            name, dims = nm.group(1), nm.group(2).strip()
            storage = f"{name}__gcemu_const"
            if guards and "[]" not in dims.replace(" ", ""):
                body = f"{{ {{}}, {init.strip()}, {{}} }}" if init.strip() else "{}"
                parts.append(
                    f"__attribute__((used)) struct {{ unsigned char lo[{guards}]; {type_text} v{dims}; "
                    f"unsigned char hi[{guards}]; }} {storage} = {body}; "
                    f"static const auto& {name} = {storage}.v;")
            else:
                value = f" = {init.strip()}" if init.strip() else ""
                parts.append(f"__attribute__((used)) {type_text} {storage}{dims}{value}; "
                             f"static const auto& {name} = {storage};")
        if parts:
            code = code[:start] + _same_lines(" ".join(parts), code[start:end + 1]) + code[end + 1:]
    return code


def _split_top(text: str, code: str):
    """(text, code) of each declarator: ``text`` split at its depth-0 commas, ``code`` at the
    same offsets (``text`` is ``code`` with comments and strings blanked)."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        elif c == "," and depth == 0:
            out.append((text[start:i], code[start:i]))
            start = i + 1
    out.append((text[start:], code[start:]))
    return out


def _mark_returns(code: str) -> str:
    # A kernel's `return;` tells the runtime first, which then blames an early return, not
    # a branch, for a barrier that threads never reached.
    text = strip_comments(code, blank_strings=True)
    hits = sorted(a + m.start() for a, b, _ in kernel_bodies(text)
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


def _dynamic_shared(m: re.Match) -> str:
    """``extern __shared__ T name[];`` as a pointer to the runtime's dynamic shared buffer (a
    pointer, not an asm label: g++ drops an asm label on a block-scope extern in a template)."""
    d = re.match(r"(?P<type>.*?)(?P<name>[A-Za-z_]\w*)\s*\[\s*\]\s*$", m.group(1), re.S)
    if not d or not d.group("type").strip():
        return m.group(0)
    t = d.group("type").strip()
    return (f"{t}* const {d.group('name')} = reinterpret_cast<{t}*>(__gcemu_dynamic_shared_buf);")


def rewrite_for_emulator(code: str, defines: dict | None = None, guards: int = 0) -> str:
    """Make ``code`` compile on the host without changing its line numbers.

    - the ``__shared__`` variables of templates, inline functions and lambdas get their
      memory from the runtime, once per block (``__gcemu_shared_place``);
    - ``extern __shared__ T name[];`` becomes a pointer to the runtime's dynamic shared buffer;
    - ``__shared__ T name[N];`` becomes ``GCEMU_SHARED_ARRAY(T, name, [N]);`` (the race
      detector's build puts guard bytes after it); every static ``__shared__`` variable is
      marked ``used``, so that the compiler keeps it even where it is never read;
    - a ``__constant__`` variable becomes writable storage and a ``const`` reference to it
      (``guards``: with that many guard bytes around the storage);
    - a kernel's ``return;`` becomes ``return __gcemu_return();``, which tells the runtime;
    - includes of CUDA's own headers are dropped (the prelude defines what they declare),
      and so is <assert.h>, which would replace the kernel-safe ``assert`` of the prelude.
    """
    seen = view(code, defines)
    code = _constant_storage(code, seen.text, guards)
    code = _place_shared(code, view(code, defines).text)
    code = _mark_returns(code)
    code = _DROPPED_INCLUDES.sub("", code)
    code = _GROUP_PARTS.sub(r"\1cooperative_groups.h\2", code)
    code = re.sub(r"\bstatic(\s+)__shared__\b", r"\1__shared__", code)  # the macro adds static
    code = _STATIC_SHARED_ARRAY.sub(
        lambda m: f"GCEMU_SHARED_ARRAY({m.group(1)}, {m.group(2)}, {m.group(3).strip()});", code)
    code = _EXTERN_SHARED.sub(_dynamic_shared, code)
    return _keep_static_shared(code)


def accessible_globals(code: str, defines: dict | None = None) -> list[str]:
    """Names of the ``__constant__`` and ``__device__`` variables ``get_global`` can reach:
    those declared at file scope outside every namespace."""
    names = []
    for g in file_globals(view(code, defines).text):
        if not g.in_namespace and g.name not in names:
            names.append(g.name)
    return names


__all__ = ["rewrite_for_emulator", "accessible_globals", "enclosing_headers"]
