#!/usr/bin/env python3
"""Run every chapter notebook in JupyterLab in a real (headless) Chromium.

Starts JupyterLab on 127.0.0.1 at a free port with a random token, opens each notebook,
restarts the kernel and runs all cells, fails on any error output, moves the widgets named
in INTERACTIONS and checks that the figure they drive changes, and saves one screenshot per
notebook. With every notebook (no list given) it then walks a lab as a learner would
(LAB_STEPS: an unanswered exercise, a prediction and its measurement, a wrong and a right answer
typed into the cell) and checks that each check cell shows its one short block, no traceback. The server is shut down at the
end, also when the test fails; a server left by an earlier, killed run is stopped first.

    python tools/browser_test.py [--out DIR] [notebooks/01_….ipynb ...]

Needs Debian's `chromium` (installed with apt when missing and running as root) and the
Python package `playwright` (its own browser download is not used).
"""
from __future__ import annotations

import argparse
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
        # Render every cell (no windowing), so that every prompt and output is in the page,
        # and do not ask about news: a fresh settings folder for this server only.
        settings = self.log_path.parent / "lab-settings"
        tracker = settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
        tracker.parent.mkdir(parents=True, exist_ok=True)
        tracker.write_text('{"windowingMode": "none"}')
        news = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
        news.parent.mkdir(parents=True, exist_ok=True)
        news.write_text('{"fetchNews": "false", "checkForUpdates": false}')
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


# A lab walked as a learner would: (exercise cell, cell run after it, answer typed, what that
# cell must show). None as the answer runs the lab's cell as it is (unanswered). Exercise 1.2's
# check needs the prediction and the measured roofline, so the walk types the prediction and
# runs the measurement first.
LAB = "labs/01_architecture_and_bottlenecks_lab.ipynb"
_ROOF = ("    r = models.roofline(point[\"flops\"], point[\"bytes\"], "
         "peak_flops=ceilings[\"peak_flops\"],\n"
         "                        bandwidth=ceilings[\"bandwidth_Bps\"])\n")
LAB_STEPS = [
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
]


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


def check_lab_messages(page, server: LabServer, shots: pathlib.Path, timeout_s: float) -> list[str]:
    """Answer exercises of a lab wrongly, rightly and not at all, as a learner would, and check
    that what renders under each check cell is the one short block (no traceback)."""
    page.goto(f"{server.base}/lab/workspaces/t{secrets.token_hex(4)}/tree/{LAB}"
              f"?reset&token={server.token}")
    page.locator(".jp-Notebook").first.wait_for(timeout=60_000)
    page.get_by_text("Python 3 (ipykernel) | Idle").first.wait_for(timeout=90_000)
    cells = page.locator(".jp-Notebook .jp-CodeCell")
    texts = [cells.nth(i).locator(".cm-content").inner_text() for i in range(cells.count())]
    failures = []
    _run_cell(page, cells.nth(0), None, timeout_s)  # the imports
    for k, (exercise, check, answer, wanted) in enumerate(LAB_STEPS):
        i = next(n for n, t in enumerate(texts) if t.lstrip().startswith(exercise))
        j = next(n for n, t in enumerate(texts) if check in t)
        _run_cell(page, cells.nth(i), answer, timeout_s)
        shown = _run_cell(page, cells.nth(j), None, timeout_s)
        cells.nth(j).scroll_into_view_if_needed()
        page.screenshot(path=str(shots / f"lab_message_{k}.png"), full_page=False)
        missing = [w for w in wanted if w not in shown]
        if missing or "Traceback" in shown or "gpucourse/" in shown or len(shown.splitlines()) > 6:
            failures.append(f"{LAB}: step {k} shows {shown[:300]!r}, expected {wanted}")
        else:
            print(f"  {LAB}: step {k} shows {shown.splitlines()[0]!r}")
    return failures


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("notebooks", nargs="*", help="default: every notebooks/*.ipynb")
    p.add_argument("--out", default=str(ROOT / "results" / "browser"),
                   help="folder for screenshots and the server log")
    # Generous: a notebook that takes 60 s on two idle cores can take minutes pinned to one busy
    # core (make test-matrix); only a hang should fail here, as nbval's cell timeout does.
    p.add_argument("--timeout", type=float, default=600, help="seconds per notebook run")
    p.add_argument("--lab-messages", action=argparse.BooleanOptionalAction, default=None,
                   help="also answer exercises of a lab wrongly and rightly and check the "
                        "messages shown (default: with every notebook, not with a list)")
    args = p.parse_args(argv)
    from playwright.sync_api import sync_playwright

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    notebooks = [pathlib.Path(n).resolve() for n in args.notebooks] or \
        sorted((ROOT / "notebooks").glob("*.ipynb"))
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
            if args.lab_messages if args.lab_messages is not None else not args.notebooks:
                page = context.new_page()
                try:
                    failures += check_lab_messages(page, server, out, args.timeout)
                except Exception as exc:  # recorded like a notebook's failure
                    failures.append(f"{LAB}: {type(exc).__name__}: {str(exc).splitlines()[0]}")
                    try:
                        page.screenshot(path=str(out / "lab_messages.png"))
                    except Exception:  # noqa: S110 (the failure above says what went wrong)
                        pass
                finally:
                    page.close()
        finally:
            browser.close()
    print(f"screenshots: {out}")
    for f in failures:
        print("  " + f)
    print(f"{len(notebooks) - len({f.split(':')[0] for f in failures})} passed, "
          f"{len({f.split(':')[0] for f in failures})} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
