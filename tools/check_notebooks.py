#!/usr/bin/env python3
"""Check the notebooks' format: valid nbformat 4.5 with cell ids, the python3 kernelspec,
no outputs in notebooks/ and labs/, outputs present in solutions/, and no error outputs."""
from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from nbtools import ROOT, notebooks, read  # noqa: E402

RULES = {"notebooks": False, "labs": False, "solutions": True}


def problems(path: pathlib.Path, want_outputs: bool) -> list[str]:
    """Every format problem of one notebook, one sentence each."""
    try:
        nb = read(path)
    except ValueError as exc:
        return [f"{path}: not valid JSON ({exc})"]
    out = []
    try:
        import nbformat

        nbformat.validate(nbformat.from_dict(nb))
    except ImportError:
        pass
    except Exception as exc:  # nbformat's ValidationError text is long: first line only
        out.append(f"{path}: not valid nbformat ({str(exc).splitlines()[0]})")
    if (nb.get("nbformat"), nb.get("nbformat_minor", 0)) < (4, 5):
        out.append(f"{path}: nbformat {nb.get('nbformat')}.{nb.get('nbformat_minor')} "
                   "has no cell ids; save it with nbformat 4.5 or newer")
    ks = nb.get("metadata", {}).get("kernelspec", {})
    if ks.get("name") != "python3":
        out.append(f"{path}: kernelspec is {ks.get('name')!r}, expected 'python3'")
    ids = [c.get("id") for c in nb.get("cells", [])]
    if None in ids or len(set(ids)) != len(ids):
        out.append(f"{path}: every cell needs a unique id")
    code = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    has_outputs = any(c.get("outputs") for c in code)
    if want_outputs and not has_outputs:
        out.append(f"{path}: solutions are committed with outputs (run it and save)")
    if not want_outputs and (has_outputs or any(c.get("execution_count") for c in code)):
        out.append(f"{path}: committed with outputs; clear them "
                   "(`jupyter nbconvert --clear-output --inplace`)")
    for i, c in enumerate(code):
        for o in c.get("outputs", []):
            if o.get("output_type") == "error":
                out.append(f"{path}: code cell {i} has an error output ({o.get('ename')})")
    return out


def all_problems(root: pathlib.Path = ROOT) -> list[str]:
    found = []
    for folder, want in RULES.items():
        for path in notebooks(root / folder):
            found += problems(path, want)
    return found


def main() -> int:
    found = all_problems()
    for line in found:
        print(line)
    if not found:
        print("notebook format: all good")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
