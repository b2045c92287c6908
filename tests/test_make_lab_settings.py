"""`make lab` answers JupyterLab's news question once for its environment, so that the popup
never covers the end of a check's message (the browser test does the same for its server)."""
import json
import pathlib
import re
import shlex
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_make_lab_turns_the_news_popup_off(tmp_path):
    venv = tmp_path / "venv"
    plan = subprocess.run(["make", "-n", "lab", f"VENV={venv}", "ALLOW_ROOT="], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout
    command = re.search(r"^(\S*python -c .*?)$(?=\n)", plan.replace("\\\n", ""),
                        re.M | re.S).group(1)
    code = shlex.split(command)[2]
    for _ in range(2):  # twice: an existing file keeps its other settings
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
    overrides = venv / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    settings = json.loads(overrides.read_text())
    assert settings["@jupyterlab/apputils-extension:notification"] == {
        "fetchNews": "false", "checkForUpdates": False}
    assert "--LabApp.news_url=None" in plan
