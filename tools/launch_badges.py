#!/usr/bin/env python3
"""Colab set-up cells and "Open in Colab" / Binder badges for the course's public repository.

    python tools/launch_badges.py --repo https://github.com/OWNER/REPO   # write them
    python tools/launch_badges.py --check                                # fail if stale

The repository URL lives in one place, `[project.urls] Repository` in pyproject.toml; the
version is `[project] version`. Writing puts a set-up cell first among the code cells of every
chapter and solution notebook (labs follow through tools/make_labs.py) and a table of badges in
the README between the two `launch-badges` markers. The cell installs the package from the
tag `v<version>` when it runs on Colab and does nothing anywhere else; the badges open the same
tag, so a notebook and the package it installs always belong together. Run it again after a
version bump; `--check` (also a unit test) fails while the cells or badges disagree with
pyproject.toml. Until a repository is set there are no cells and the README says so.
"""
from __future__ import annotations

import argparse
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from nbtools import ROOT, dumps, lines, notebooks, read  # noqa: E402

CELL_ID = "colab-setup"
NOTEBOOK_DIRS = ("notebooks", "solutions")
START, END = "<!-- launch-badges:start -->", "<!-- launch-badges:end -->"
URL_RE = re.compile(r"^https://github\.com/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?/?$")
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
BINDER_BADGE = "https://mybinder.org/badge_logo.svg"


class LaunchError(ValueError):
    """A bad repository URL or a pyproject.toml this tool cannot read."""


# --------------------------------------------------------------------------- pyproject

def owner_repo(url: str) -> str:
    """"OWNER/REPO" of a GitHub URL; Colab opens notebooks from GitHub only."""
    m = URL_RE.match(url.strip())
    if not m:
        raise LaunchError(f"The repository URL must look like https://github.com/OWNER/REPO "
                          f"(Colab opens notebooks from GitHub only); got {url!r}.")
    return f"{m.group(1)}/{m.group(2)}"


def project(root: pathlib.Path) -> tuple[str, str | None]:
    """(version, "OWNER/REPO" or None) from pyproject.toml."""
    text = (root / "pyproject.toml").read_text(encoding="utf-8")
    version = re.search(r'^version\s*=\s*"([^"]+)"', text, re.M)
    if not version:
        raise LaunchError("pyproject.toml has no [project] version line.")
    urls = re.search(r"^\[project\.urls\]\n((?:[^\[\n].*\n|\n)*)", text, re.M)
    repo = urls and re.search(r'^Repository\s*=\s*"([^"]+)"', urls.group(1), re.M)
    return version.group(1), owner_repo(repo.group(1)) if repo else None


def set_repository(root: pathlib.Path, url: str) -> None:
    """Record ``url`` as `[project.urls] Repository` in pyproject.toml."""
    url = f"https://github.com/{owner_repo(url)}"
    path = root / "pyproject.toml"
    text = path.read_text(encoding="utf-8")
    line = f'Repository = "{url}"'
    if re.search(r"^\[project\.urls\]$", text, re.M):
        block = re.search(r"^\[project\.urls\]\n((?:[^\[\n].*\n|\n)*)", text, re.M)
        body = block.group(1)
        new_body = (re.sub(r'^Repository\s*=.*$', line, body, flags=re.M)
                    if re.search(r"^Repository\s*=", body, re.M) else line + "\n" + body)
        text = text[:block.start(1)] + new_body + text[block.end(1):]
    else:
        anchor = re.search(r"^\[project\.optional-dependencies\]$", text, re.M)
        if not anchor:
            raise LaunchError("pyproject.toml has no [project.optional-dependencies] table to "
                              "put [project.urls] before; add [project.urls] by hand.")
        text = text[:anchor.start()] + f"[project.urls]\n{line}\n\n" + text[anchor.start():]
    path.write_text(text, encoding="utf-8")


# --------------------------------------------------------------------------- notebooks

def setup_cell_source(repo: str, version: str) -> str:
    spec = f"gpucourse @ git+https://github.com/{repo}@v{version}"
    return (
        "# Google Colab only: install the course package, the version these notebooks belong to.\n"
        "# Anywhere else (make lab, Binder, your own Jupyter) this cell does nothing.\n"
        "import sys\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        "    import subprocess\n"
        "\n"
        f'    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "{spec}"],\n'
        "                   check=True)")


def with_setup_cell(nb: dict, text: str | None) -> dict:
    """``nb`` with its set-up cell set to ``text`` (first among the code cells), or removed."""
    cells = [c for c in nb["cells"] if c.get("id") != CELL_ID]
    if text is not None:
        cell = {"cell_type": "code", "execution_count": None, "id": CELL_ID,
                "metadata": {"tags": ["colab"]}, "outputs": [], "source": lines(text)}
        first_code = next((i for i, c in enumerate(cells) if c["cell_type"] == "code"), len(cells))
        cells.insert(first_code, cell)
    return {**nb, "cells": cells}


def notebook_paths(root: pathlib.Path) -> list[pathlib.Path]:
    return [p for d in NOTEBOOK_DIRS for p in notebooks(root / d)]


# --------------------------------------------------------------------------- README

def badges_block(root: pathlib.Path, repo: str | None, version: str) -> str:
    if repo is None:
        body = ("Colab and Binder links appear here once the course's public GitHub repository is "
                "recorded: `python tools/launch_badges.py --repo https://github.com/OWNER/REPO` "
                "(see `docs/instructors.md`).")
        return f"{START}\n{body}\n{END}"
    tag = f"v{version}"
    binder = f"https://mybinder.org/v2/gh/{repo}/{tag}?urlpath=lab/tree/notebooks"
    rows = [f"Version {version} of the course, on Colab (a GPU when you pick a GPU runtime; each "
            "notebook's first code cell installs the course package there and does nothing "
            "anywhere else) or on "
            f"[![Binder]({BINDER_BADGE})]({binder}) (CPU only; everything runs there, on the "
            "emulator and the models).", "",
            "| | chapter | lab |", "|---|---|---|"]
    for nb in sorted((root / "notebooks").glob("*.ipynb")):
        lab = root / "solutions" / nb.name.replace(".ipynb", "_lab.ipynb")
        links = []
        for folder, path in (("notebooks", nb), ("labs", lab)):
            url = f"https://colab.research.google.com/github/{repo}/blob/{tag}/{folder}/{path.name}"
            links.append(f"[![Open In Colab]({COLAB_BADGE})]({url})" if path.exists() else "")
        rows.append(f"| {nb.stem.split('_')[0]} | {links[0]} | {links[1]} |")
    return f"{START}\n" + "\n".join(rows) + f"\n{END}"


def readme_with_badges(text: str, block: str) -> str:
    if START not in text or END not in text:
        raise LaunchError(f"README.md has no {START} … {END} markers to put the badges between.")
    return text[:text.index(START)] + block + text[text.index(END) + len(END):]


# --------------------------------------------------------------------------- main

def expected_files(root: pathlib.Path) -> dict[pathlib.Path, str]:
    """Every file this tool manages, with the text it should have now."""
    version, repo = project(root)
    cell = setup_cell_source(repo, version) if repo else None
    out = {p: dumps(with_setup_cell(read(p), cell)) for p in notebook_paths(root)}
    readme = root / "README.md"
    out[readme] = readme_with_badges(readme.read_text(encoding="utf-8"),
                                     badges_block(root, repo, version))
    return out


def stale(root: pathlib.Path) -> list[pathlib.Path]:
    return [p for p, text in expected_files(root).items()
            if p.read_text(encoding="utf-8") != text]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repo", help="the course's public GitHub URL, https://github.com/OWNER/REPO")
    p.add_argument("--check", action="store_true", help="fail if cells or badges are stale")
    p.add_argument("--root", default=str(ROOT), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    root = pathlib.Path(args.root)
    try:
        if args.check:
            bad = stale(root)
            if bad:
                print("Colab cells or badges disagree with pyproject.toml in: "
                      + ", ".join(str(b.relative_to(root)) for b in bad)
                      + "; run `python tools/launch_badges.py` and commit.", file=sys.stderr)
                return 1
            return 0
        if args.repo:
            set_repository(root, args.repo)
        for path, text in expected_files(root).items():
            if path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")
                print(f"wrote {path.relative_to(root)}")
    except LaunchError as exc:
        print(exc, file=sys.stderr)
        return 2
    import make_labs  # the labs carry the solutions' set-up cell

    return make_labs.main(["--solutions", str(root / "solutions"), "--labs", str(root / "labs")])


if __name__ == "__main__":
    sys.exit(main())
