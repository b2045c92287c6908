"""A lab as the grader sees it, and a learner's answers taken out of a submitted notebook.

The course's solution notebook is the reference: its ``### BEGIN SOLUTION`` blocks are the
answer slots (numbered by the ``# Exercise N.M`` comment before them, else by the exercise
heading above), and the cell that printed ``Exercise N.M passed`` in its committed outputs is
the exercise's check. From a submission only the code that replaced each slot's
``raise NotImplementedError("Exercise N.M")`` line is kept; everything else the learner
changed (the check cells, the course's code around an answer, cells of their own) is reported
and replaced by the course's version.
"""
from __future__ import annotations

import dataclasses
import difflib
import json
import pathlib
import re

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
EXERCISE_COMMENT = re.compile(r"#\s*Exercise\s+(\d+\.\d+)")
EXERCISE_STUB = re.compile(r"NotImplementedError\(\s*[\"']Exercise\s+(\d+\.\d+)[\"']\s*\)")
EXERCISE_HEADING = re.compile(r"Exercise\s+(\d+\.\d+)")
PASSED = re.compile(r"^Exercise (\d+\.\d+) passed\b", re.MULTILINE)
LAB_TITLE = re.compile(r"^#\s*(Lab\s+\d+.*)$", re.MULTILINE)
MAX_BYTES = 20 << 20  # a lab notebook is well under 1 MB; anything this big is not one


class LabError(ValueError):
    """A solution notebook the grader cannot use as a reference (the course's problem)."""


class NotGradable(ValueError):
    """A submission that cannot be graded; the message is the one-sentence reason."""


@dataclasses.dataclass
class Slot:
    """One answer cell of the lab: the course's lines around the learner's answer."""

    exercise: str
    ordinal: int  # 0 for an exercise's first answer cell, 1 for its second, ...
    cell: int  # index in the lab's cells
    cell_id: str | None
    prefix: list[str]
    suffix: list[str]
    stub: str  # the lab's `raise NotImplementedError("Exercise N.M")` line, indented

    def template(self) -> str:
        """The cell as the lab hands it out."""
        return "\n".join(self.prefix + [self.stub] + self.suffix)


@dataclasses.dataclass
class Lab:
    """A lab: its notebook (the solution's cells), answer slots and check cells."""

    name: str  # the notebook's file name, e.g. 00_start_here_lab.ipynb
    title: str
    cells: list[dict]
    metadata: dict
    slots: list[Slot]
    checks: dict[str, int]  # exercise → index of its check cell
    exercises: list[str]

    @property
    def label(self) -> str:
        return f"lab {self.name.split('_', 1)[0].lstrip('0') or '0'}"


@dataclasses.dataclass
class Answer:
    """What a submission holds for one slot."""

    slot: Slot
    lines: list[str]  # the learner's answer (the slot's stub when there is none)
    state: str  # "answered", "not answered", "missing" or "duplicate"
    cell: int | None = None  # index of the learner's cell
    note: str = ""  # edits around the answer that were ignored, or why there is no answer


@dataclasses.dataclass
class Submission:
    """A learner's notebook, read and matched to a lab (``problem`` says why not, if not)."""

    learner: str
    path: str
    lab: Lab | None = None
    problem: str = ""
    answers: list[Answer] = dataclasses.field(default_factory=list)
    exercise_notes: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)


def _text(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _source_lines(text: str) -> list[str]:
    parts = text.split("\n")
    return [line + "\n" for line in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


# --------------------------------------------------------------------------- the lab

def read_lab(path) -> Lab:
    """The lab of a solution notebook; LabError (one sentence) when it cannot serve as one."""
    path = pathlib.Path(path)
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
        cells = nb["cells"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LabError(f"{path.name}: not a readable solution notebook ({exc}); restore it "
                       "from git.") from None
    slots, checks, seen = [], {}, {}
    heading = None
    title = path.stem
    for i, cell in enumerate(cells):
        text = _text(cell)
        if cell.get("cell_type") == "markdown":
            m = LAB_TITLE.search(text)
            if m and title == path.stem:
                title = m.group(1).strip()
            m = EXERCISE_HEADING.search(text)
            if m:
                heading = m.group(1)
            continue
        if cell.get("cell_type") != "code":
            continue
        if BEGIN in text:
            slot = _slot(text, heading, i, cell.get("id"), f"{path.name} cell {i}")
            slot.ordinal = seen.get(slot.exercise, 0)
            seen[slot.exercise] = slot.ordinal + 1
            slots.append(slot)
        printed = "".join(_text({"source": o.get("text", "")}) for o in cell.get("outputs", [])
                          if o.get("output_type") == "stream")
        for number in PASSED.findall(printed):
            checks.setdefault(number, i)
    exercises = list(dict.fromkeys(s.exercise for s in slots))
    if not exercises:
        raise LabError(f"{path.name}: no `{BEGIN}` block, so there is nothing to grade.")
    missing = [e for e in exercises if e not in checks]
    if missing:
        raise LabError(f"{path.name}: no cell printed 'Exercise {missing[0]} passed' in its saved "
                       f"outputs; run `python tools/run_notebook.py solutions/{path.name}` and "
                       "commit it.")
    clean = []
    for cell in cells:
        cell = {k: v for k, v in cell.items() if k not in ("outputs", "execution_count")}
        if cell.get("cell_type") == "code":
            cell.update(outputs=[], execution_count=None)
            cell["metadata"] = {k: v for k, v in cell.get("metadata", {}).items()
                                if k != "execution"}
        clean.append(cell)
    return Lab(path.name, title, clean, nb.get("metadata", {}), slots, checks, exercises)


def _slot(text: str, heading: str | None, index: int, cell_id, where: str) -> Slot:
    lines = text.split("\n")
    begins = [k for k, line in enumerate(lines) if line.strip().startswith(BEGIN)]
    ends = [k for k, line in enumerate(lines) if line.strip().startswith(END)]
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise LabError(f"{where}: the grader needs exactly one {BEGIN} … {END} block per cell; "
                       "split the cell.")
    b, e = begins[0], ends[0]
    comments = [m.group(1) for line in lines[:b] for m in [EXERCISE_COMMENT.search(line)] if m]
    exercise = comments[-1] if comments else heading
    if exercise is None:
        raise LabError(f"{where}: solution block with no '# Exercise N.M' before it.")
    indent = lines[b][: len(lines[b]) - len(lines[b].lstrip())]
    return Slot(exercise, 0, index, cell_id, lines[:b], lines[e + 1:],
                f'{indent}raise NotImplementedError("Exercise {exercise}")')


def find_labs(solutions, problems: list | None = None) -> dict[str, Lab]:
    """Every lab of a solutions folder, by file name. A solution that cannot serve raises
    LabError, or, when a ``problems`` list is given, is left out with one line appended."""
    folder = pathlib.Path(solutions)
    paths = sorted(p for p in folder.glob("*.ipynb") if not p.name.endswith(".new.ipynb"))
    labs = {}
    for p in paths:
        try:
            labs[p.name] = read_lab(p)
        except LabError as exc:
            if problems is None:
                raise
            problems.append(str(exc))
    if not labs:
        raise LabError(f"no usable solution notebooks in {folder}: pass --solutions with the "
                       "course's solutions/ folder.")
    return labs


# --------------------------------------------------------------------------- a submission

def learner_name(path, labs) -> str:
    """The learner of a submission: its file's name, or its folder's when the file is named
    after the lab (``alice/00_start_here_lab.ipynb``; nbgrader's
    ``submitted/alice/lab0/00_start_here_lab.ipynb``)."""
    path = pathlib.Path(path).absolute()
    name = path.name[: -len(".ipynb")] if path.name.endswith(".ipynb") else path.stem
    if f"{name}.ipynb" not in labs and not name.endswith("_lab"):
        return name
    if path.parent.parent.parent.name == "submitted":
        return path.parent.parent.name
    return path.parent.name or name


def _load(path: pathlib.Path) -> list[dict]:
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise NotGradable(f"the file is {size >> 20} MB, far more than a lab notebook; "
                              "clear its outputs and submit it again.")
        raw = path.read_bytes()
    except OSError as exc:
        raise NotGradable(f"the file cannot be read ({exc.strerror or exc}).") from None
    try:
        nb = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise NotGradable(f"not a notebook: the file is not UTF-8 text (byte "
                          f"0x{raw[exc.start]:02x} at {exc.start}); save it again from "
                          "Jupyter.") from None
    except json.JSONDecodeError as exc:
        raise NotGradable(f"not a notebook: its JSON is broken ({exc.msg} at line "
                          f"{exc.lineno}); save it again from Jupyter.") from None
    except RecursionError:
        raise NotGradable("not a notebook: its JSON nests too deeply.") from None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list) or not all(
            isinstance(c, dict) and isinstance(c.get("cell_type"), str) and (
                isinstance(c.get("source", ""), str) or isinstance(c.get("source"), list)
                and all(isinstance(s, str) for s in c["source"])) for c in cells):
        raise NotGradable("not a notebook: it needs a list of cells, each with a cell_type "
                          "and a source; save it again from Jupyter.")
    return cells


def _markers(text: str) -> set[str]:
    return set(EXERCISE_COMMENT.findall(text)) | set(EXERCISE_STUB.findall(text))


def _numbers(found) -> str:
    return ", ".join(sorted(found, key=lambda e: tuple(int(p) for p in e.split("."))))


def _choose_lab(cells, labs, lab_name, path) -> Lab:
    found = set()
    for cell in cells:
        text = _text(cell)
        found |= _markers(text) if cell["cell_type"] == "code" else set(
            EXERCISE_HEADING.findall(text))
    overlap = {name: len(found & set(lab.exercises)) for name, lab in labs.items()}
    best = max(overlap, key=overlap.get) if overlap else None
    if lab_name:
        lab = labs[lab_name]
        if overlap[lab_name]:
            return lab
        if best and overlap[best]:
            other = labs[best]
            raise NotGradable(f"wrong lab: it holds the exercises of {other.label} "
                              f"({_numbers(set(other.exercises) & found)}), not those of "
                              f"{lab.label}.")
        raise NotGradable(f"none of {lab.label}'s exercises ({_numbers(lab.exercises)}) is in "
                          "it: hand in the lab notebook itself.")
    if best and overlap[best]:
        return labs[best]
    if path.name in labs:
        return labs[path.name]
    raise NotGradable("none of the labs' exercises is in it: hand in the lab notebook itself.")


def _given(slot: Slot) -> list[str]:
    """The course's own non-blank lines of a slot, stripped, as a set to look for."""
    return [line.strip() for line in slot.prefix + slot.suffix if line.strip()]


def _coverage(slot: Slot, lines: list[str]) -> float:
    given = _given(slot)
    if not given:
        return 1.0
    have = {line.strip() for line in lines}
    return sum(line in have for line in given) / len(given)


def _cut(slot: Slot, lines: list[str]) -> tuple[list[str], str]:
    """The learner's answer inside their version of a slot's cell, and a note on what they
    changed around it (ignored)."""
    p, s = slot.prefix, slot.suffix
    strip = [line.rstrip() for line in lines]
    if strip[: len(p)] == [x.rstrip() for x in p] and (
            not s or strip[len(strip) - len(s):] == [x.rstrip() for x in s]) \
            and len(lines) >= len(p) + len(s):
        return lines[len(p): len(lines) - len(s)], ""
    # The course's lines were edited: take the answer between the last line that still
    # matches the prefix and the first (after it) that still matches the suffix.
    start = 0
    for block in difflib.SequenceMatcher(None, [x.rstrip() for x in p], strip,
                                         autojunk=False).get_matching_blocks():
        if block.size:
            start = block.b + block.size
    end = len(lines)
    if s:
        rest = strip[start:]
        firsts = [start + b.b for b in difflib.SequenceMatcher(
            None, [x.rstrip() for x in s], rest, autojunk=False).get_matching_blocks() if b.size]
        if firsts:
            end = min(firsts)
    changed = sum(1 for tag, *_ in difflib.SequenceMatcher(
        None, [x.rstrip() for x in p + s], strip[:start] + strip[end:],
        autojunk=False).get_opcodes() if tag != "equal")
    note = (f"{changed} change{'s' * (changed != 1)} to the course's lines around the answer "
            "were undone") if changed else ""
    return lines[start:end], note


def read_submission(path, labs: dict[str, Lab], lab_name: str | None = None,
                    learner: str | None = None) -> Submission:
    """Read ``path`` and match its answers to a lab (``lab_name``, else the one whose exercises
    it holds). A submission that cannot be graded comes back with ``problem`` set."""
    path = pathlib.Path(path)
    sub = Submission(learner or learner_name(path, labs), str(path))
    try:
        cells = _load(path)
        sub.lab = lab = _choose_lab(cells, labs, lab_name, path)
    except NotGradable as exc:
        sub.problem = str(exc)
        if lab_name:  # its rows go with the lab the class was asked to hand in
            sub.lab = labs[lab_name]
        return sub
    code = [(i, _text(c), c.get("id")) for i, c in enumerate(cells) if c["cell_type"] == "code"]
    used: set[int] = set()
    for exercise in lab.exercises:
        slots = [s for s in lab.slots if s.exercise == exercise]
        ids = {s.cell_id for s in slots if s.cell_id}
        cands = [(i, t, cid) for i, t, cid in code if exercise in _markers(t) or cid in ids]
        pairs = sorted(((_coverage(s, t.split("\n")), s.cell_id is not None and cid == s.cell_id,
                         -i, s.ordinal, i) for s in slots for i, t, cid in cands), reverse=True)
        chosen: dict[int, int] = {}
        for cover, same_id, _, ordinal, i in pairs:
            if ordinal in chosen or i in chosen.values() or not (cover > 0 or same_id):
                continue
            chosen[ordinal] = i
        left = [(i, t) for i, t, _ in cands if i not in chosen.values()]
        used |= set(chosen.values()) | {i for i, _, _ in cands}
        for slot in slots:
            i = chosen.get(slot.ordinal)
            # Another cell with all of this slot's given lines: a second answer to it.
            extra = [k for k, t in left if _coverage(slot, t.split("\n")) == 1.0]
            if i is None:
                sub.answers.append(Answer(slot, [slot.stub], "missing", note=(
                    f"no answer cell for Exercise {exercise}: the cell with "
                    f"`raise NotImplementedError(\"Exercise {exercise}\")` was deleted")))
                continue
            if extra:
                where = ", ".join(str(k + 1) for k in sorted([i] + extra))
                sub.answers.append(Answer(slot, [slot.stub], "duplicate", i, note=(
                    f"{len(extra) + 1} cells answer Exercise {exercise} (cells {where}): keep "
                    "one and hand it in again")))
                continue
            answer, note = _cut(slot, _text(cells[i]).split("\n"))
            if any(BEGIN in line or END in line for line in answer):
                note = "; ".join(filter(None, [note, (
                    f"the answer carries the solutions' `{BEGIN}` marker, which the lab does "
                    "not have: was it copied from solutions/?")]))
            blank = [line for line in answer if line.strip()]
            state = "not answered" if not blank or [x.strip() for x in blank] == \
                [slot.stub.strip()] else "answered"
            sub.answers.append(Answer(slot, answer, state, i, note))
    _note_other_edits(sub, lab, cells, code, used)
    return sub


def _note_other_edits(sub: Submission, lab: Lab, cells, code, used) -> None:
    """Report the check cells and other course cells the learner changed, and their own cells."""
    by_id = {cid: (i, t) for i, t, cid in code if cid}
    texts = {t.strip() for _, t, _ in code}
    slot_cells = {s.cell for s in lab.slots}
    check_cells = {i: e for e, i in lab.checks.items()}
    matched, edited_other = set(), 0
    for k, cell in enumerate(lab.cells):
        if cell.get("cell_type") != "code" or k in slot_cells:
            continue
        text = _text(cell).strip()
        same = by_id.get(cell.get("id"))
        if text in texts:
            matched |= {i for i, t, _ in code if t.strip() == text}
            continue
        if same:
            matched.add(same[0])
        if k in check_cells:
            e = check_cells[k]
            sub.exercise_notes.setdefault(e, []).append(
                f"the check cell of Exercise {e} was {'edited' if same else 'deleted or edited'}"
                f"; the course's check ran instead")
        else:
            edited_other += 1
    if edited_other:
        sub.notes.append(f"{edited_other} of the course's other code cells "
                         f"{'was' if edited_other == 1 else 'were'} edited or deleted; the "
                         "course's version ran")
    own = [i for i, t, _ in code if i not in used and i not in matched and t.strip()]
    if own:
        sub.notes.append(f"{len(own)} code cell{'s' * (len(own) != 1)} not in the lab "
                         f"(cell{'s' * (len(own) != 1)} {', '.join(str(i + 1) for i in own)}) "
                         "did not run: only answer cells are graded")


# --------------------------------------------------------------------------- the graded notebook

def graded_notebook(sub: Submission) -> tuple[dict, list[tuple[str, str | None]]]:
    """The lab with the learner's answers in their slots, and each cell's (role, exercise):
    role is "answer", "check" or "course"."""
    lab = sub.lab
    answers = {a.slot.cell: a for a in sub.answers}
    checks = {i: e for e, i in lab.checks.items()}
    cells, roles = [], []
    current = None
    for k, cell in enumerate(lab.cells):
        cell = json.loads(json.dumps(cell))
        if k in answers:
            a = answers[k]
            current = a.slot.exercise
            cell["source"] = _source_lines("\n".join(a.slot.prefix + [line.rstrip("\n")
                                                                      for line in a.lines]
                                                     + a.slot.suffix))
            roles.append(("answer", current))
        elif k in checks:
            roles.append(("check", checks[k]))
        else:
            roles.append(("course", None))
        cells.append(cell)
    nb = {"cells": cells, "metadata": dict(lab.metadata), "nbformat": 4, "nbformat_minor": 5}
    nb["metadata"].pop("gpucourse_generated_sha256", None)
    return nb, roles
