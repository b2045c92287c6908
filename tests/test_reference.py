import json

import pytest

from gpucourse import reference as ref


def test_write_then_load_round_trip(tmp_path):
    p = ref.write({"ch1": {"copy_gbps": {"1": 4000.0}}}, gpu="NVIDIA H200",
                  command="make gpu-check", driver="580", folder=tmp_path, date="2026-11-29")
    assert p.name == "nvidia_h200.json"
    r = ref.load(p)
    assert r.get("ch1", "copy_gbps", "1") == 4000.0
    assert r.get("ch1", "missing") is None
    assert r.label == "reference: NVIDIA H200, 2026-11-29"
    assert r.provenance == "NVIDIA H200, measured 2026-11-29 with `make gpu-check`"
    assert [v for _, v in ref.find("ch1", "copy_gbps", folder=tmp_path)] == [{"1": 4000.0}]


@pytest.mark.parametrize("content, match", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "not a JSON object"),
    (json.dumps({"format": "other"}), "not written by"),
    (json.dumps({"format": ref.FORMAT, "version": 1, "gpu": "X", "date": "2026-01-01",
                 "command": "c"}), "results"),
    (json.dumps({"format": ref.FORMAT, "version": 99, "gpu": "X", "date": "2026-01-01",
                 "command": "c", "results": {}}), "newer"),
    (json.dumps({"format": ref.FORMAT, "version": 1, "gpu": "X", "date": "yesterday",
                 "command": "c", "results": {}}), "YYYY-MM-DD"),
])
def test_bad_files_are_rejected_never_plotted(tmp_path, content, match):
    (tmp_path / "bad.json").write_text(content)
    with pytest.raises(ref.ReferenceError, match=match):
        ref.load(tmp_path / "bad.json")
    assert ref.available(tmp_path) == []
    assert len(ref.problems(tmp_path)) == 1


def test_shipped_reference_files_are_valid():
    assert ref.problems() == []


def test_sections_keep_their_own_provenance(tmp_path):
    ref.write({"kernels": {"copy": 1.0}}, gpu="G", command="first", folder=tmp_path,
              date="2026-01-01")
    ref.write({"ch1": {"x": 2.0}}, gpu="G", command="second", folder=tmp_path, date="2026-02-02")
    (r1, v1), = ref.find("kernels", "copy", folder=tmp_path)
    (r2, v2), = ref.find("ch1", "x", folder=tmp_path)
    assert (v1, r1.date, r1.command) == (1.0, "2026-01-01", "first")
    assert (v2, r2.date, r2.command) == (2.0, "2026-02-02", "second")


def test_jsonable_gives_strict_json():
    import dataclasses
    import json

    import numpy as np

    from gpucourse.reference import jsonable

    @dataclasses.dataclass
    class Point:
        x: float

    data = {"nan": np.float64("nan"), "arr": np.array([1.0, np.inf]), "rec": Point(2.0),
            "tup": (1, np.int32(3)), 4: "key"}
    assert json.loads(json.dumps(jsonable(data), allow_nan=False)) == {
        "nan": None, "arr": [1.0, None], "rec": {"x": 2.0}, "tup": [1, 3], "4": "key"}


def test_data_says_when_it_was_measured_with_an_earlier_kernel(tmp_path, monkeypatch):
    ref.write({"ch1": {"x": 1.0}}, gpu="G", command="make gpu-check", folder=tmp_path,
              date="2026-01-01")
    (r, _), = ref.find("ch1", "x", folder=tmp_path)
    assert r.changed_kernels("copy.cu", "reduce.cu") == []  # measured with today's kernels
    now = ref.kernel_fingerprints()
    assert "copy.cu" in now and len(now["copy.cu"]) == 12
    monkeypatch.setattr(ref, "kernel_fingerprints", lambda: {**now, "copy.cu": "0" * 12})
    assert r.changed_kernels("copy.cu", "reduce.cu") == ["copy.cu"]
    old = ref.Reference(gpu="G", date="2025-01-01", command="c", results={})
    assert old.changed_kernels("copy.cu") == []  # data from before fingerprints: no claim
    assert r.kernel_caveat("copy.cu") == " (with earlier versions of copy.cu than this course has now)"
    assert "may have changed since" in old.kernel_caveat("copy.cu")  # ... but text says so


def test_chapter_1_summary_names_a_kernel_changed_since_its_reference_run(reference_folder, monkeypatch):
    from gpucourse import check
    from gpucourse.experiments import ch1

    ref.write({"ch1": {"checks": {"stride32_slowdown": check.threshold(12.0, 5, True, "s32")}}},
              gpu="NVIDIA H200", command="make gpu-check", folder=reference_folder, date="2026-11-29")
    assert "earlier versions" not in ch1.reference_summary()
    now = ref.kernel_fingerprints()
    monkeypatch.setattr(ref, "kernel_fingerprints", lambda: {**now, "copy.cu": "f" * 12})
    assert "(with earlier versions of copy.cu than this course has now)" in ch1.reference_summary()


def test_the_reference_folder_has_one_home():
    from gpucourse import paths

    assert not hasattr(ref, "FOLDER")  # paths.REFERENCE_DIR is the one
    assert ref.available() == ref.available(paths.REFERENCE_DIR)
