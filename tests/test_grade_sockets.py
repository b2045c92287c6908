"""The graded kernel's Unix sockets fit the 107-byte limit of a socket path wherever the
temporary folder is (a long TMPDIR made every kernel fail to start with "File name too long")."""
from __future__ import annotations

import os
import shutil
import stat

from gpucourse.grade import execute


def test_a_short_root_keeps_its_sockets(tmp_path):
    root = "/tmp/gpucourse-grade-1-abc"
    assert execute._socket_folder(root) == root


def test_a_long_root_gets_a_private_short_folder(tmp_path):
    root = tmp_path / ("deep-" * 20)
    root.mkdir()
    assert len(os.path.join(str(root), "kernel-99999")) > execute.SOCKET_PATH_MAX
    folder = execute._socket_folder(str(root))
    try:
        assert folder != str(root)
        assert len(os.path.join(folder, "kernel-99999").encode()) <= execute.SOCKET_PATH_MAX
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700  # mkdtemp: the grader's own
    finally:
        shutil.rmtree(folder, ignore_errors=True)
