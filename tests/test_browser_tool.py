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


def _fake_playwright(screenshot_fails: bool = False):
    """What ``sync_playwright()`` gives, with a browser whose pages draw nothing (or cannot
    take a screenshot, as a page whose renderer has crashed)."""
    import types

    class Page:
        def screenshot(self, path, **kw):
            if screenshot_fails:
                raise RuntimeError("Protocol error (Page.captureScreenshot): Unable to capture "
                                   "screenshot")

        def close(self):
            pass

    class Browser:
        def new_context(self, **kw):
            return types.SimpleNamespace(new_page=Page)

        def close(self):
            pass

    return types.SimpleNamespace(chromium=types.SimpleNamespace(launch=lambda **kw: Browser()))


def test_a_notebook_whose_page_cannot_be_drawn_fails_alone(tmp_path, monkeypatch, capsys):
    """A notebook that fails, on a page the browser can no longer screenshot, is reported as
    failed and the run goes on to the next notebook (it used to end the whole run)."""
    import contextlib
    import types

    shots = []

    playwright = _fake_playwright(screenshot_fails=True)

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


def test_the_walk_goes_through_every_lab_and_ends_each_kernel(tmp_path, monkeypatch, capsys):
    """With no notebook list every lab is walked; a lab that fails is reported and the walk goes
    on; each lab's kernel is shut down after its walk; labs are counted apart from notebooks."""
    import contextlib
    import types

    walked, ended = [], []

    playwright = _fake_playwright()
    first = sorted(browser_test.LABS)[0]

    def walk(page, server, lab, out, timeout_s):
        walked.append(lab)
        if lab == first:
            raise browser_test.BrowserTestError("a cell did not finish within 600 s")
        return []

    monkeypatch.setattr(browser_test, "find_chromium", lambda: "chromium")
    monkeypatch.setattr(browser_test, "LabServer", lambda log: contextlib.nullcontext())
    monkeypatch.setattr(browser_test, "check_notebook", lambda *a: [])
    monkeypatch.setattr(browser_test, "check_lab_messages", walk)
    monkeypatch.setattr(browser_test, "shut_down_kernel", lambda server, lab: ended.append(lab))
    fake = types.ModuleType("playwright.sync_api")
    fake.sync_playwright = lambda: contextlib.nullcontext(playwright)
    monkeypatch.setitem(sys.modules, "playwright.sync_api", fake)
    assert browser_test.main(["--out", str(tmp_path / "out")]) == 1
    out = capsys.readouterr().out
    assert walked == ended == list(browser_test.LABS)
    assert f"{first}: FAILED" in out and "a cell did not finish within 600 s" in out
    notebooks = len(list((browser_test.ROOT / "notebooks").glob("*.ipynb")))
    assert f"{notebooks} passed, 0 failed; labs walked: {len(walked) - 1} passed, 1 failed" in out


def test_shutting_down_a_lab_kernel_ends_only_its_sessions():
    """The server's REST API is asked, with the token, to end the sessions of that path only."""
    import http.server
    import json
    import threading
    import types

    deleted, tokens = [], []
    sessions = [{"id": "s1", "path": "labs/a_lab.ipynb"}, {"id": "s2", "path": "notebooks/b.ipynb"},
                {"id": "s3", "path": "labs/a_lab.ipynb"}]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            tokens.append(self.headers.get("Authorization"))
            body = json.dumps(sessions).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_DELETE(self):
            tokens.append(self.headers.get("Authorization"))
            deleted.append(self.path)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        server = types.SimpleNamespace(base=f"http://127.0.0.1:{httpd.server_port}", token="abc")
        browser_test.shut_down_kernel(server, "labs/a_lab.ipynb")
    finally:
        httpd.shutdown()
    assert deleted == ["/api/sessions/s1", "/api/sessions/s3"]
    assert tokens == ["token abc"] * 3


def test_the_server_never_saves_what_the_test_types(tmp_path):
    """Autosave is off: the walk types answers into the repository's labs, and a lab open for
    longer than autosave's interval (a slow machine) would be saved with them."""
    import json

    folder = browser_test.write_lab_settings(tmp_path / "settings")
    plugin = folder / "@jupyterlab" / "docmanager-extension" / "plugin.jupyterlab-settings"
    assert json.loads(plugin.read_text())["autosave"] is False
    tracker = folder / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    assert json.loads(tracker.read_text()) == {"windowingMode": "none"}
