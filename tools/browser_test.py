#!/usr/bin/env python3
"""Run every chapter notebook in JupyterLab in a real (headless) Chromium.

Starts JupyterLab on 127.0.0.1 at a free port with a random token, opens each notebook,
restarts the kernel and runs all cells, fails on any error output, moves the widgets named
in INTERACTIONS and checks that the figure they drive changes, and saves one screenshot per
notebook. With every notebook (no list given, or with --lab-messages) it then walks every lab
as a learner would (LABS: an exercise of each left unanswered, answered wrongly and rightly,
after the prediction and measurement its check needs) and checks that each check cell shows
its one short block, no traceback, with a screenshot per step (lab_<lab>_<k>.png). The server
is shut down at the end, also when the test fails; a server left by an earlier, killed run is
stopped first.

    python tools/browser_test.py [--out DIR] [--[no-]lab-messages] [notebooks/01_….ipynb ...]

Needs Debian's `chromium` (installed with apt when missing and running as root) and the
Python package `playwright` (its own browser download is not used).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from nbtools import BEGIN, END  # noqa: E402
# In this checkout (git-ignored), not the shared temp folder: a run must only ever stop a
# server that a killed run of the same checkout left behind, never another checkout's.
PIDFILE = ROOT / "results" / ".browser-test-server.pid"
# notebook stem → widgets to move: (description text of the control, how to move it).
INTERACTIONS = {
    "00_start_here": [("elements", "slider")],
    "04_threads_and_scheduling": [("block size", "slider")],
    "06_mixed_precision_and_quantization": [("precision", "dropdown")],
    "07_transformer_end_to_end": [("sequence length", "slider")],
}
CHROMIUM_FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage"]


class BrowserTestError(AssertionError):
    pass


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        exe = shutil.which(name)
        if exe:
            return exe
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print("installing Debian's chromium with apt-get ...", flush=True)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        exe = shutil.which("chromium")
        if exe:
            return exe
    raise BrowserTestError("no Chromium found: install it (Debian/Ubuntu: "
                           "`sudo apt-get install chromium`) and run again.")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_stale_server() -> None:
    """Stop a server that an earlier, killed run left behind (its pid is in PIDFILE)."""
    try:
        pid = int(PIDFILE.read_text())
    except (OSError, ValueError):
        return
    try:
        os.killpg(pid, signal.SIGTERM)
        print(f"stopped a stale JupyterLab server from an earlier run (pid {pid})")
    except ProcessLookupError:
        pass
    PIDFILE.unlink(missing_ok=True)


# A fresh settings folder for the test's server only. Every cell rendered (no windowing), so
# that every prompt and output is in the page; no question about news; and no autosave: the
# notebooks and labs the test runs and types answers into are the repository's own files.
LAB_SETTINGS = {
    "notebook-extension/tracker": {"windowingMode": "none"},
    "apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    "docmanager-extension/plugin": {"autosave": False},
}


def write_lab_settings(folder: pathlib.Path) -> pathlib.Path:
    """Write LAB_SETTINGS as a JupyterLab settings folder (JUPYTERLAB_SETTINGS_DIR)."""
    for name, values in LAB_SETTINGS.items():
        path = folder / "@jupyterlab" / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    return folder


class LabServer:
    """JupyterLab on 127.0.0.1 with a token, in its own process group."""

    def __init__(self, log_path: pathlib.Path):
        self.port, self.token = free_port(), secrets.token_hex(24)
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        stop_stale_server()
        cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1",
               f"--port={self.port}", f"--IdentityProvider.token={self.token}",
               f"--ServerApp.root_dir={ROOT}", "--ServerApp.port_retries=0",
               "--LabApp.news_url=None", "--LabApp.check_for_updates_class="
               "jupyterlab.NeverCheckForUpdate"]
        if os.geteuid() == 0:
            cmd.append("--allow-root")
        settings = write_lab_settings(self.log_path.parent / "lab-settings")
        env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(settings))
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True, cwd=ROOT, env=env)
        PIDFILE.parent.mkdir(parents=True, exist_ok=True)
        PIDFILE.write_text(str(self.proc.pid))
        deadline = time.time() + 90
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise BrowserTestError(f"JupyterLab exited at start; see {self.log_path}")
            try:
                with urllib.request.urlopen(f"{self.base}/api/status?token={self.token}",
                                            timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.5)
        raise BrowserTestError(f"JupyterLab did not answer within 90 s; see {self.log_path}")

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        PIDFILE.unlink(missing_ok=True)
        self._log.close()
        return False


def _wait_idle(page, timeout_s: float) -> None:
    """Wait until every code cell has run: numbered prompts, none queued, kernel idle."""
    deadline = time.time() + timeout_s
    cells = page.locator(".jp-Notebook .jp-CodeCell")
    prompts = page.locator(".jp-Notebook .jp-CodeCell .jp-InputPrompt")
    while time.time() < deadline:
        texts = prompts.all_inner_texts()
        done = len(texts) == cells.count() and all(re.search(r"\[\d+\]", t) for t in texts)
        idle = page.get_by_text("Python 3 (ipykernel) | Idle").count() > 0
        # Run-all stops at an error; the cells after it never get a number.
        if idle and (done or _error_outputs(page)):
            return
        time.sleep(0.5)
    raise BrowserTestError(f"cells still running after {timeout_s:.0f} s")


def _error_outputs(page) -> list[str]:
    """Errors shown in the notebook (JupyterLab renders them as stderr text): tracebacks, and
    the one-block messages of lab checks."""
    loc = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
                       has_text=re.compile(r"Traceback \(most recent call last\)|"
                                           r"not yet right:|is not done yet"))
    return [loc.nth(i).inner_text()[-400:] for i in range(loc.count())]


def _figure_signature(page, description: str) -> str:
    """The src of the images in the widget output that follows the control."""
    box = _widget_box(page, description)
    imgs = box.locator(".jp-OutputArea-output img")
    return "|".join(imgs.nth(i).get_attribute("src")[-200:] for i in range(imgs.count()))


def _widget_box(page, description: str):
    """The top-level widget (an Explorer VBox) that contains the control with this label."""
    label = page.locator(".widget-label", has_text=description).first
    return label.locator("xpath=ancestor::div[contains(@class,'jp-OutputArea-output')][1]")


def _wait_settled(page, description: str, timeout_s: float) -> None:
    """Wait until the widget has drawn its last value (a slider move can queue several runs)."""
    box = _widget_box(page, description)
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        idle = page.get_by_text("Python 3 (ipykernel) | Idle").count() > 0
        if idle and box.get_by_text("running…").count() == 0:
            return
        time.sleep(0.5)
    raise BrowserTestError(f"the {description!r} widget was still running after {timeout_s:.0f} s")


def _move(page, description: str, how: str) -> None:
    box = _widget_box(page, description)
    if how == "slider":
        handle = box.locator(".noUi-handle").first
        handle.focus()
        handle.press("ArrowRight")
        handle.press("ArrowRight")
    elif how == "dropdown":
        select = box.locator("select").first
        options = select.locator("option")
        current = select.input_value()
        for i in range(options.count()):
            value = options.nth(i).get_attribute("value")
            label = options.nth(i).inner_text().replace("\xa0", " ")  # ipywidgets: nbsp
            if value != current and "not available" not in label:
                select.select_option(value=value)
                return
        raise BrowserTestError(f"dropdown {description!r} has no other available option")
    else:
        raise ValueError(how)


def check_notebook(page, server: LabServer, nb: pathlib.Path, shots: pathlib.Path,
                   timeout_s: float) -> list[str]:
    """Run one notebook in the page; return a list of failures (empty when it passed)."""
    rel = nb.relative_to(ROOT).as_posix()
    page.goto(f"{server.base}/lab/workspaces/t{secrets.token_hex(4)}/tree/{rel}"
              f"?reset&token={server.token}")
    page.locator(".jp-Notebook").first.wait_for(timeout=60_000)
    page.get_by_text("Python 3 (ipykernel) | Idle").first.wait_for(timeout=90_000)
    page.locator("[data-command='notebook:restart-run-all']").first.click()
    page.locator(".jp-Dialog-button.jp-mod-accept").first.click()
    _wait_idle(page, timeout_s)
    failures = [f"{rel}: error output: {e}" for e in _error_outputs(page)]
    for description, how in INTERACTIONS.get(nb.stem, []):
        before = _figure_signature(page, description)
        if not before:
            failures.append(f"{rel}: no figure under the {description!r} widget")
            continue
        _move(page, description, how)
        deadline = time.time() + timeout_s
        after = before
        while time.time() < deadline and after == before:
            time.sleep(0.5)
            after = _figure_signature(page, description)
        if after == before:
            failures.append(f"{rel}: moving {description!r} did not change the figure")
        else:
            print(f"  {nb.stem}: moving {description!r} redrew the figure")
            _wait_settled(page, description, timeout_s)
    # Show a rendered figure (and its widget, if any) in the screenshot.
    target = (_widget_box(page, INTERACTIONS[nb.stem][0][0]) if nb.stem in INTERACTIONS
              else page.locator(".jp-OutputArea-output img").first)
    if target.count():
        target.scroll_into_view_if_needed()
    page.screenshot(path=str(shots / f"{nb.stem}.png"), full_page=False)
    return failures


class Solution:
    """An answer from the lab's solution notebook: its version of the exercise cell (labs are
    generated from solutions, cell for cell), without the solution markers, with ``edits``
    ((old, new) pairs) made. Without edits it is the right answer; with one, a plausible
    mistake."""

    def __init__(self, *edits: tuple[str, str]):
        self.edits = edits

    def __repr__(self) -> str:
        return f"Solution{self.edits!r}"

    def text(self, solution_cell: str) -> str:
        text = "\n".join(line for line in solution_cell.split("\n")
                         if line.strip() not in (BEGIN, END)) + "\n"
        for old, new in self.edits:
            if old not in text:
                raise ValueError(f"the solution cell has no {old!r} to replace")
            text = text.replace(old, new)
        return text


# Every lab walked as a learner would: {lab: [(exercise cell, cell run after it, answer typed,
# what that cell must show), ...]}. The exercise cell is the first code cell that starts with
# its text, the cell run after it the first that contains its text. None as the answer runs the
# lab's cell as it is (unanswered); a string is typed as it is; Solution(...) types the solution
# notebook's cell. A step whose check needs a prediction or a measurement runs those cells
# first, as lab 1's Exercise 1.2 does. Each lab's exercise is a cheap one, a kernel where it has
# one: the whole walk of the nine labs takes under three minutes on two cores.
_ROOF = ("    r = models.roofline(point[\"flops\"], point[\"bytes\"], "
         "peak_flops=ceilings[\"peak_flops\"],\n"
         "                        bandwidth=ceilings[\"bandwidth_Bps\"])\n")
LABS = {
    "labs/00_start_here_lab.ipynb": [
        ("def rms_loop", 'Exercise("0.1"', None, ["Exercise 0.1 is not done yet"]),
        ("def rms_loop", 'Exercise("0.1"',
         Solution(("np.sqrt(np.dot(x, x) / x.size)", "np.dot(x, x) / x.size")),  # no square root
         ["Exercise 0.1 (vectorized root mean square) not yet right:", "rms at n="]),
        ("def rms_loop", 'Exercise("0.1"', Solution(),
         ["Exercise 0.1 passed: vectorized root mean square."]),
    ],
    "labs/00b_kernel_puzzles_lab.ipynb": [
        ("# Exercise 0.5", "puzzles.check_puzzle(3, PUZZLE_3)", None,
         ["Exercise 0.5 is not done yet"]),
        ("# Exercise 0.5", "puzzles.check_puzzle(3, PUZZLE_3)",
         Solution(("if (i < n) ", "")),  # no guard: the last block runs past the end
         ["Exercise 0.5 (guard) not yet right:", "out of bounds"]),
        ("# Exercise 0.5", "puzzles.check_puzzle(3, PUZZLE_3)", Solution(),
         ["Exercise 0.5 passed: guard."]),
    ],
    "labs/01_architecture_and_bottlenecks_lab.ipynb": [
        ("# Exercise 1.1", "check1.check_coalesced_scale(element_source)", None,
         ["Exercise 1.1 is not done yet: `element_source` is not defined"]),
        ("# Exercise 1.2: your prediction", "cpu_roofline(ceilings", 'guess_1_2 = "memory"\n',
         ["vector add", "sum (reduction)", "of its roof"]),
        ("def limited_by", "check1.check_limited_by(limited_by, roof, guess_1_2)", None,
         ["Exercise 1.2 is not done yet"]),
        # The ceiling that sets the roof, never "overhead": an operation far below its roof.
        ("def limited_by", "check1.check_limited_by(limited_by, roof, guess_1_2)",
         "def limited_by(point, ceilings):\n" + _ROOF + "    return r.bound\n",
         ["Exercise 1.2 (what limits a measured operation) not yet right:",
          "neither ceiling limits it", "return 'overhead'"]),
        ("def limited_by", "check1.check_limited_by(limited_by, roof, guess_1_2)",
         "def limited_by(point, ceilings):\n" + _ROOF +
         "    rate = point[\"flops\"] / point[\"seconds\"]\n"
         "    return r.bound if rate >= 0.5 * r.attainable_flops else \"overhead\"\n",
         ["Exercise 1.2 passed: what limits a measured operation."]),
    ],
    "labs/02_memory_management_lab.ipynb": [
        ("def transpose_source", "lab.check_padded_transpose(transpose_source)", None,
         ["Exercise 2.2 is not done yet"]),
        ("def transpose_source", "lab.check_padded_transpose(transpose_source)",
         Solution(("tile[TILE][TILE + 1]", "tile[TILE][TILE]")),  # no padding
         ["Exercise 2.2 (a padded shared-memory transpose) not yet right:",
          "32-way bank conflict"]),
        ("def transpose_source", "lab.check_padded_transpose(transpose_source)", Solution(),
         ["Exercise 2.2 passed: a padded shared-memory transpose."]),
    ],
    "labs/03_parallelism_lab.ipynb": [
        ("def choose_strategy", "check3.check_strategy(choose_strategy)", None,
         ["Exercise 3.4 is not done yet"]),
        ("def choose_strategy", "check3.check_strategy(choose_strategy)",
         Solution(("math.ceil(need / device_bytes)", "math.floor(need / device_bytes)")),
         ["Exercise 3.4 (a parallel strategy from the memory model) not yet right:",
          "round the number of stages up"]),
        ("def choose_strategy", "check3.check_strategy(choose_strategy)", Solution(),
         ["Exercise 3.4 passed: a parallel strategy from the memory model.",
          "7 B parameters on 8 x 80 GiB:"]),
    ],
    "labs/04_threads_and_scheduling_lab.ipynb": [
        ("# Exercise 4.2", "check4.check_no_divergence(NO_DIVERGENCE)", None,
         ["Exercise 4.2 is not done yet"]),
        ("# Exercise 4.2", "check4.check_no_divergence(NO_DIVERGENCE)",
         Solution(("2 * (g % 32) + parity;", "2 * (g % 32);")),  # the parity left out
         ["Exercise 4.2 (every warp takes one branch) not yet right:",
          "two threads write the same element"]),
        ("# Exercise 4.2", "check4.check_no_divergence(NO_DIVERGENCE)", Solution(),
         ["Exercise 4.2 passed: every warp takes one branch."]),
    ],
    "labs/05_accelerated_libraries_lab.ipynb": [
        ("# Exercise 5.2", "check5.check_fused_chain(FUSED_CHAIN, traffic)", None,
         ["Exercise 5.2 is not done yet"]),
        ("# Exercise 5.2", "check5.check_fused_chain(FUSED_CHAIN, traffic)",
         Solution(("if (i < n) {", "{")),  # no bounds test
         ["Exercise 5.2 (a fused elementwise kernel) not yet right:", "i >= n"]),
        ("# Exercise 5.2", "check5.check_fused_chain(FUSED_CHAIN, traffic)", Solution(),
         ["Exercise 5.2 passed: a fused elementwise kernel."]),
    ],
    "labs/06_mixed_precision_and_quantization_lab.ipynb": [
        ("def quantize", "check6.check_quantize(quantize)", None,
         ["Exercise 6.1 is not done yet"]),
        ("def quantize", "check6.check_quantize(quantize)",
         Solution(("torch.round(w / scale)", "torch.trunc(w / scale)")),  # truncation
         ["Exercise 6.1 (symmetric per-channel INT8 quantization) not yet right:",
          "Round to the nearest"]),
        ("def quantize", "check6.check_quantize(quantize)", Solution(),
         ["Exercise 6.1 passed: symmetric per-channel INT8 quantization."]),
    ],
    "labs/07_transformer_end_to_end_lab.ipynb": [
        ("def attention", "check7.check_attention(attention)", None,
         ["Exercise 7.1 is not done yet"]),
        ("def attention", "check7.check_attention(attention)",
         Solution((" / math.sqrt(q.shape[-1])", "")),  # no scaling
         ["Exercise 7.1 (causal attention, written out) not yet right:", "no scaling"]),
        ("def attention", "check7.check_attention(attention)", Solution(),
         ["Exercise 7.1 passed: causal attention, written out."]),
    ],
}


def _code_cells(path: pathlib.Path) -> list[str]:
    cells = json.loads(path.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


def lab_walk(lab: str) -> list[tuple[int, int, str | None, list[str]]]:
    """The steps of ``lab`` resolved: (index of the exercise cell among the lab's code cells,
    index of the cell run after it, text to type or None, what that cell must show)."""
    code = _code_cells(ROOT / lab)
    solution = None
    steps = []
    for exercise, check, answer, wanted in LABS[lab]:
        i = next((n for n, t in enumerate(code) if t.lstrip().startswith(exercise)), None)
        j = next((n for n, t in enumerate(code) if check in t), None)
        if i is None or j is None:
            raise ValueError(f"{lab} has no code cell "
                             f"{'starting with ' + repr(exercise) if i is None else 'with ' + repr(check)}")
        if isinstance(answer, Solution):
            solution = solution or _code_cells(ROOT / "solutions" / pathlib.Path(lab).name)
            if not solution[i].lstrip().startswith(exercise):
                raise ValueError(f"code cell {i} of {lab}'s solution does not start with {exercise!r}")
            answer = answer.text(solution[i])
        steps.append((i, j, answer, wanted))
    return steps


def _run_cell(page, cell, text: str | None, timeout_s: float) -> str:
    """Type ``text`` into ``cell`` (unless None), run it, and return its output's text."""
    editor = cell.locator(".cm-content").first
    editor.click()
    if text is not None:
        page.keyboard.press("Control+a")
        page.keyboard.insert_text(text)
    before = cell.locator(".jp-InputPrompt").inner_text()
    page.keyboard.press("Control+Enter")
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        prompt = cell.locator(".jp-InputPrompt").inner_text()
        if prompt != before and "*" not in prompt:
            return cell.locator(".jp-OutputArea").inner_text()
        time.sleep(0.3)
    raise BrowserTestError(f"a cell did not finish within {timeout_s:.0f} s")


def check_lab_messages(page, server: LabServer, lab: str, shots: pathlib.Path,
                       timeout_s: float) -> list[str]:
    """Answer an exercise of ``lab`` not at all, wrongly and rightly, as a learner would, and
    check that what renders under each check cell is the one short block (no traceback)."""
    steps = lab_walk(lab)
    stem = pathlib.Path(lab).stem
    page.goto(f"{server.base}/lab/workspaces/t{secrets.token_hex(4)}/tree/{lab}"
              f"?reset&token={server.token}")
    page.locator(".jp-Notebook").first.wait_for(timeout=60_000)
    page.get_by_text("Python 3 (ipykernel) | Idle").first.wait_for(timeout=90_000)
    cells = page.locator(".jp-Notebook .jp-CodeCell")
    failures = []
    _run_cell(page, cells.nth(0), None, timeout_s)  # the imports
    for k, (i, j, answer, wanted) in enumerate(steps):
        _run_cell(page, cells.nth(i), answer, timeout_s)
        shown = _run_cell(page, cells.nth(j), None, timeout_s)
        cells.nth(j).scroll_into_view_if_needed()
        page.screenshot(path=str(shots / f"lab_{stem}_{k}.png"), full_page=False)
        missing = [w for w in wanted if w not in shown]
        if missing or "Traceback" in shown or "gpucourse/" in shown or len(shown.splitlines()) > 6:
            failures.append(f"{lab}: step {k} shows {shown[:300]!r}, expected {wanted}")
        else:
            print(f"  {lab}: step {k} shows {shown.splitlines()[0]!r}")
    return failures


def shut_down_kernel(server: LabServer, path: str) -> None:
    """End the sessions (and so the kernels) of ``path``: a walked lab's kernel holds its
    imports' memory, and nine of them at once would crowd a small machine."""
    headers = {"Authorization": f"token {server.token}"}
    with urllib.request.urlopen(urllib.request.Request(f"{server.base}/api/sessions",
                                                       headers=headers), timeout=10) as r:
        sessions = json.load(r)
    for session in sessions:
        if session.get("path") == path:
            urllib.request.urlopen(urllib.request.Request(
                f"{server.base}/api/sessions/{session['id']}", method="DELETE",
                headers=headers), timeout=30).close()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("notebooks", nargs="*", help="default: every notebooks/*.ipynb")
    p.add_argument("--out", default=str(ROOT / "results" / "browser"),
                   help="folder for screenshots and the server log")
    # Generous: a notebook that takes 60 s on two idle cores can take minutes pinned to one busy
    # core (make test-matrix); only a hang should fail here, as nbval's cell timeout does.
    p.add_argument("--timeout", type=float, default=600, help="seconds per notebook run")
    p.add_argument("--lab-messages", action=argparse.BooleanOptionalAction, default=None,
                   help="also walk every lab: answer an exercise of each not at all, wrongly "
                        "and rightly, and check the messages shown (default: with every "
                        "notebook, not with a list)")
    args = p.parse_args(argv)
    from playwright.sync_api import sync_playwright

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    notebooks = [pathlib.Path(n).resolve() for n in args.notebooks] or \
        sorted((ROOT / "notebooks").glob("*.ipynb"))
    walked = args.lab_messages if args.lab_messages is not None else not args.notebooks
    chromium = find_chromium()
    failures: list[str] = []
    with LabServer(out / "jupyterlab.log") as server, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            for nb in notebooks:
                t0 = time.time()
                page = context.new_page()
                try:
                    found = check_notebook(page, server, nb, out, args.timeout)
                except Exception as exc:  # record and go on to the next notebook
                    found = [f"{nb.name}: {type(exc).__name__}: {str(exc).splitlines()[0]}"]
                    try:  # the page as it was, if the browser can still draw it
                        page.screenshot(path=str(out / f"{nb.stem}.png"))
                    except Exception as shot:
                        found.append(f"{nb.name}: no screenshot ({str(shot).splitlines()[0]})")
                finally:
                    page.close()
                status = "ok" if not found else "FAILED"
                print(f"{nb.name}: {status} in {time.time() - t0:.0f} s", flush=True)
                failures += found
            if walked:
                for lab in LABS:
                    t0 = time.time()
                    page = context.new_page()
                    try:
                        found = check_lab_messages(page, server, lab, out, args.timeout)
                    except Exception as exc:  # recorded like a notebook's failure
                        found = [f"{lab}: {type(exc).__name__}: {str(exc).splitlines()[0]}"]
                        try:
                            page.screenshot(path=str(out / f"lab_{pathlib.Path(lab).stem}.png"))
                        except Exception:  # noqa: S110 (the failure above says what went wrong)
                            pass
                    finally:
                        page.close()
                    try:
                        shut_down_kernel(server, lab)
                    except OSError as exc:  # the walk goes on; only memory is at stake
                        print(f"  {lab}: its kernel was not shut down ({exc})")
                    print(f"{lab}: {'ok' if not found else 'FAILED'} in {time.time() - t0:.0f} s",
                          flush=True)
                    failures += found
        finally:
            browser.close()
    print(f"screenshots: {out}")
    for f in failures:
        print("  " + f)
    failed = {f.split(":")[0] for f in failures}
    failed_labs = len(failed & set(LABS))
    print(f"{len(notebooks) - len(failed) + failed_labs} passed, {len(failed) - failed_labs} failed"
          + (f"; labs walked: {len(LABS) - failed_labs} passed, {failed_labs} failed"
             if walked else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
