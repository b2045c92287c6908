"""The browser test's server handling (the browser run itself is `make test-browser`)."""
import subprocess
import sys

import browser_test


def test_a_stale_server_from_a_killed_run_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(browser_test, "PIDFILE", tmp_path / "pid")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            start_new_session=True)
    browser_test.PIDFILE.write_text(str(proc.pid))
    browser_test.stop_stale_server()
    assert proc.wait(timeout=10) != 0
    assert not browser_test.PIDFILE.exists()


def test_no_pidfile_is_fine(tmp_path, monkeypatch):
    monkeypatch.setattr(browser_test, "PIDFILE", tmp_path / "pid")
    browser_test.stop_stale_server()


def test_free_port_is_bindable():
    import socket
    port = browser_test.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_a_notebook_whose_page_cannot_be_drawn_fails_alone(tmp_path, monkeypatch, capsys):
    """A notebook that fails, on a page the browser can no longer screenshot, is reported as
    failed and the run goes on to the next notebook (it used to end the whole run)."""
    import contextlib
    import types

    shots = []

    class Page:
        def screenshot(self, path, **kw):
            raise RuntimeError("Protocol error (Page.captureScreenshot): Unable to capture screenshot")

        def close(self):
            pass

    class Browser:
        def new_context(self, **kw):
            return types.SimpleNamespace(new_page=Page)

        def close(self):
            pass

    playwright = types.SimpleNamespace(
        chromium=types.SimpleNamespace(launch=lambda **kw: Browser()))

    def check(page, server, nb, out, timeout_s):
        shots.append(nb.name)
        if nb.name == "a.ipynb":
            raise browser_test.BrowserTestError("cells still running after 600 s")
        return []

    monkeypatch.setattr(browser_test, "find_chromium", lambda: "chromium")
    monkeypatch.setattr(browser_test, "LabServer", lambda log: contextlib.nullcontext())
    monkeypatch.setattr(browser_test, "check_notebook", check)
    fake = types.ModuleType("playwright.sync_api")
    fake.sync_playwright = lambda: contextlib.nullcontext(playwright)
    monkeypatch.setitem(sys.modules, "playwright.sync_api", fake)
    notebooks = [tmp_path / "a.ipynb", tmp_path / "b.ipynb"]
    assert browser_test.main([str(n) for n in notebooks] + ["--out", str(tmp_path / "out")]) == 1
    out = capsys.readouterr().out
    assert shots == ["a.ipynb", "b.ipynb"]
    assert "a.ipynb: FAILED" in out and "b.ipynb: ok" in out
    assert "cells still running after 600 s" in out and "no screenshot" in out


def test_the_server_pid_file_belongs_to_this_checkout():
    """Two checkouts on one machine must not stop each other's JupyterLab server."""
    assert browser_test.PIDFILE.is_relative_to(browser_test.ROOT)
