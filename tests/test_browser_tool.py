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
