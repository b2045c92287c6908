"""Fuzzing the reference loader: whatever a file in the reference folder holds, nothing crashes,
every bad file is named in problems() (one line each) and available() returns only good ones.

Seeded and bounded: a few seconds on one core.
"""
import json
import os
import random

import pytest

from gpucourse import reference as ref
from gpucourse.paths import REFERENCE_DIR

SHIPPED = REFERENCE_DIR / "nvidia_h200.json"
SEED = 20261201


def _real() -> dict:
    return json.loads(SHIPPED.read_text(encoding="utf-8"))


def _nodes(node, path=()):
    """(path, value) of every value below ``node``, containers and leaves."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield path + (k,), v
            yield from _nodes(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield path + (i,), v
            yield from _nodes(v, path + (i,))


def _general(path) -> tuple:
    """The path with list indices generalised: the same field of every row."""
    return tuple("[]" if isinstance(p, int) else p for p in path)


def _kind(value) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return "null"


WRONG = {"number": "12", "text": 12, "bool": 1, "list": {"a": 1}, "object": [1], "null": 1}
OTHERS = ("12", 12.5, True, [1.0], {"a": 1.0})


def _kinds_in_real() -> dict:
    """Which kinds of value the real file holds at each (generalised) field."""
    kinds: dict = {}
    for path, value in _nodes(_real()):
        kinds.setdefault(_general(path), set()).add(_kind(value))
    return kinds


def _replaced(data: dict, path: tuple, value):
    """Context: ``data`` with the value at ``path`` replaced, restored afterwards."""
    class _Swap:
        def __enter__(self):
            node = data
            for p in path[:-1]:
                node = node[p]
            self.node, self.key = node, path[-1]
            self.old = node[self.key]
            node[self.key] = value
            return data

        def __exit__(self, *exc):
            self.node[self.key] = self.old
    return _Swap()


def _rejected(data) -> str:
    """The one-line reason ``data`` is rejected; fails the test when it is accepted (or
    when anything but ReferenceError comes out)."""
    with pytest.raises(ref.ReferenceError) as info:
        ref.validate(data, "fuzz.json")
    text = str(info.value)
    assert "\n" not in text and text.startswith("fuzz.json"), text
    return text


# --------------------------------------------------------------------------- the real file

def test_the_real_file_is_accepted_as_it_is():
    assert ref.validate(_real(), "x.json").gpu == "NVIDIA H200"


def test_a_wrong_type_at_any_field_rejects_the_file():
    """Every field of the real file, containers and leaves, replaced by values of kinds the
    real file never has there: each variant is rejected, with the field named."""
    data, kinds = _real(), _kinds_in_real()
    rng = random.Random(SEED)
    tried = 0
    for path, value in list(_nodes(data)):
        allowed = kinds[_general(path)]
        # One wrong kind per field, drawn (seeded) from those the real file never has there.
        bad = rng.choice([v for v in OTHERS + (WRONG[_kind(value)],) if _kind(v) not in allowed])
        with _replaced(data, path, bad):
            why = _rejected(data)
        tried += 1
        # The message names the field (a list's row by its index).
        assert "/".join(map(str, path)) in why or path[0] in ("format", "version") \
            or "date" in why, (path, why)
    assert tried > 400  # every field of the real file


def test_bad_numbers_at_any_numeric_field_reject_the_file():
    """Negative (where the field cannot be), huge, and NaN or infinite numbers."""
    data = _real()
    numeric = [(p, v) for p, v in _nodes(data) if _kind(v) == "number" and p[0] == "results"]
    assert len(numeric) > 150
    rng = random.Random(SEED)
    bad_numbers = (1e300, 10 ** 30, float("nan"), float("inf"), -float("inf"))
    for i, (path, value) in enumerate(numeric):
        if path[-1] not in ref.SIGNED:
            with _replaced(data, path, -abs(value) - 1.0):
                _rejected(data)
        # One drawn bad number per field, and every one of them at every tenth field.
        for bad in bad_numbers if i % 10 == 0 else [rng.choice(bad_numbers)]:
            with _replaced(data, path, bad):
                _rejected(data)
    # A signed field takes a negative value (int8 can be more accurate than fp32 by chance).
    signed = [p for p, _ in numeric if p[-1] in ref.SIGNED]
    assert signed
    with _replaced(data, signed[0], -0.002):
        ref.validate(data, "x.json")


def test_zero_where_a_figure_divides_or_draws_on_a_log_axis_rejects_the_file():
    data = _real()
    for path in [("results", "ch1", "stride_sweep", "ceiling_gbps"),
                 ("results", "ch1", "roofline", "points", 0, "intensity"),
                 ("results", "ch1", "timing", "rows", 0, "seconds"),
                 ("results", "ch2", "transpose", "gbps", "copy (copy.cu)"),
                 ("results", "ch4", "divergence", "median_s", 1),
                 ("results", "ch4", "histogram", "v2_s", 0)]:
        with _replaced(data, path, 0.0):
            _rejected(data)


def test_lists_drawn_against_one_another_must_match_in_length():
    data = _real()
    gbps = data["results"]["ch1"]["stride_sweep"]["gbps"]
    with _replaced(data, ("results", "ch1", "stride_sweep", "gbps"), gbps[:-1]):
        assert "differ in length" in _rejected(data)
    with _replaced(data, ("results", "ch4", "divergence", "versions"), ["only_one"]):
        assert "differ in length" in _rejected(data)


def test_header_fields():
    data = _real()
    for key, bad in (("gpu", ""), ("gpu", "x" * 101), ("gpu", "H200\nrm -rf"), ("version", True),
                     ("version", 0), ("date", "2026-13-40"), ("command", "a\x1b[31m"),
                     ("driver", 580), ("results", [])):
        with _replaced(data, (key,), bad):
            _rejected(data)


# --------------------------------------------------------------------------- files

def _write_bad_files(folder, rng) -> dict:
    """Bad files of every kind in ``folder``: {file name: what it is}."""
    real = SHIPPED.read_bytes()
    text = real.decode("utf-8")
    bad = {}

    def put(name, data: bytes, what: str):
        (folder / name).write_bytes(data)
        bad[name] = what

    for i in range(25):  # random bytes, of random lengths (0 included)
        put(f"random{i}.json", bytes(rng.getrandbits(8) for _ in range(rng.choice([0, 1, 7, 300, 4000]))),
            "random bytes")
    end = len(text.rstrip())
    for i, cut in enumerate([0, 1, end - 1] + rng.sample(range(2, end - 1), 20)):
        put(f"truncated{i}.json", real[:cut], f"truncated at {cut}")
    put("latin1.json", text.replace("NVIDIA H200", "NVIDIA H200 \u00e9").encode("latin-1"),
        "not UTF-8")
    put("utf16.json", text.encode("utf-16"), "UTF-16")
    put("deep.json", b"[" * 200_000 + b"]" * 200_000, "nested 200 000 deep")
    nested = _real()
    nested["results"]["ch9"] = {"x": json.loads("[" * 40 + "1" + "]" * 40)}
    put("deep_inside.json", json.dumps(nested).encode(), "a section nested 40 deep")
    put("nan.json", text.replace('"value": 59.37', '"value": NaN, "x": 59.37').encode(), "NaN")
    put("inf.json", text.replace('"value": 59.37', '"value": Infinity, "x": 59.37').encode(), "inf")
    put("e999.json", text.replace('"value": 59.37', '"value": 1e999, "x": 59.37').encode(), "1e999")
    put("longint.json", text.replace('"block": 256', '"block": ' + "9" * 5000).encode(),
        "an integer of 5000 digits")
    put("huge.json", b'{"format": "gpucourse-reference", "pad": "' + b"x" * (ref.MAX_BYTES + 10)
        + b'"}', "larger than MAX_BYTES")
    put("negative.json", text.replace('"side": 13312', '"side": -13312').encode(), "negative")
    put("string_value.json", text.replace('"padded tile": 3152.518008072536',
                                          '"padded tile": "fast"').encode(), "a string value")
    put("null_gbps.json",
        text.replace('"copy (copy.cu)": 2453.403625641533', '"copy (copy.cu)": null').encode(),
        "null where a figure reads a number")
    for i in range(15):  # the real file with one random field changed to a wrong kind
        data, kinds = _real(), _kinds_in_real()
        path, value = rng.choice(list(_nodes(data)))
        choices = [v for v in OTHERS + (WRONG[_kind(value)],) if _kind(v) not in kinds[_general(path)]]
        with _replaced(data, path, rng.choice(choices)):
            put(f"mutated{i}.json", json.dumps(data).encode(), f"{path} changed")
    (folder / "folder.json").mkdir()
    bad["folder.json"] = "a folder"
    (folder / "folder.json" / "inside.json").write_bytes(real)
    return bad


def test_a_folder_of_bad_files_crashes_nothing_and_names_each_one(tmp_path):
    rng = random.Random(SEED)
    bad = _write_bad_files(tmp_path, rng)
    (tmp_path / "good.json").write_bytes(SHIPPED.read_bytes())
    (tmp_path / "notes.txt").write_text("not a .json file: never read")
    found = ref.available(tmp_path)
    assert [r.path for r in found] == ["good.json"]
    lines = ref.problems(tmp_path)
    assert len(lines) == len(bad)
    for line in lines:
        assert "\n" not in line and len(line) < 400, line
    named = {line.split(" ", 1)[0] for line in lines}
    assert named == set(bad), set(bad) ^ named


def test_unreadable_file_is_skipped(tmp_path):
    if os.name != "posix" or os.geteuid() == 0:
        pytest.skip("a file the reader cannot open needs a non-root POSIX user")
    p = tmp_path / "secret.json"
    p.write_bytes(SHIPPED.read_bytes())
    p.chmod(0)
    try:
        assert ref.available(tmp_path) == []
        [line] = ref.problems(tmp_path)
        assert line.startswith("secret.json cannot be read")
    finally:
        p.chmod(0o600)


def test_a_fifo_named_json_is_not_read(tmp_path):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no named pipes here")
    os.mkfifo(tmp_path / "pipe.json")  # reading it would wait for ever
    [line] = ref.problems(tmp_path)
    assert line.startswith("pipe.json is not a regular file")


def test_a_missing_folder_has_no_references(tmp_path):
    assert ref.available(tmp_path / "nowhere") == [] and ref.problems(tmp_path / "nowhere") == []


def test_an_update_keeps_the_valid_sections_of_a_file_with_a_bad_one(tmp_path):
    """make gpu-check on a file where one section is now rejected: the others survive."""
    data = _real()
    data["results"]["ch4"]["divergence"]["median_s"][0] = "slow"
    path = tmp_path / "nvidia_h200.json"
    path.write_text(json.dumps(data))
    assert ref.available(tmp_path) == []
    ref.write({"ch3": {"gpus": 1}}, gpu="NVIDIA H200", command="make gpu-check", folder=tmp_path,
              date="2026-12-01")
    [r] = ref.available(tmp_path)
    assert {"ch1", "ch2", "ch3", "ch6", "kernels"} <= set(r.results) and "ch4" not in r.results


def test_a_register_count_up_to_the_hardware_limit_is_accepted():
    """Block sizes that cannot launch at a high count are skipped by chapter 4's sweep, so the
    file takes what a thread may have (255), and no more."""
    from gpucourse import specs

    path = ("results", "ch4", "block_sweep", "regs_per_thread")
    data = _real()
    for regs in (0, 64, 65, 128, 255):
        with _replaced(data, path, regs):
            ref.validate(data, "x.json")
    assert max(specs.occupancy_limits(cc).max_registers_per_thread
               for cc in ("7.0", "8.0", "9.0")) == 255
    for regs in (256, 1000, 12.5):
        with _replaced(data, path, regs):
            assert "regs_per_thread" in _rejected(data)
