import json

import pytest

from tilesearch.deploy import ArchitectureError, ArtifactError, CorruptArtifactError, load
from tilesearch.deploy.artifact import (
    LIBRARY,
    METADATA,
    capability,
    check_arch,
    content_hash,
    file_digest,
    read,
)
from tilesearch.testing.artifacts import gemm_metadata, write_placeholder


def test_metadata_round_trips_through_the_file(tmp_path):
    sealed = write_placeholder(tmp_path)
    assert read(tmp_path) == sealed
    data = json.loads((tmp_path / METADATA).read_text())
    for key in ("op", "params", "dtype", "layout", "config", "arch", "versions", "latency_ms", "speedup",
                "study", "trial", "content_hash", "files", "inputs", "outputs"):
        assert key in data, key
    assert data["inputs"][0] == {"name": "A", "shape": [256, 128], "dtype": "float16"}


def test_a_zeroed_workspace_stays_zeroed_through_the_metadata_and_others_read_as_before():
    """The stream-K counters must be zero at a loaded kernel's first call: ``zeroed`` survives the
    round trip, and a workspace without it is written exactly as before (its artifacts' hashes)."""
    from dataclasses import replace

    from tilesearch.deploy.artifact import Metadata, TensorSpec

    counters, partials = TensorSpec("S", (132,), "int32", zeroed=True), TensorSpec("W", ("m:128", 64), "float32")
    metadata = replace(gemm_metadata(), workspaces=(partials, counters))
    data = json.loads(json.dumps(metadata.to_dict()))
    assert data["workspaces"] == [{"name": "W", "shape": ["m:128", 64], "dtype": "float32"},
                                  {"name": "S", "shape": [132], "dtype": "int32", "zeroed": True}]
    assert Metadata.from_dict(data).workspaces == (partials, counters)


def test_files_and_content_are_hashed(tmp_path):
    sealed = write_placeholder(tmp_path)
    assert set(sealed.files) == {LIBRARY, "kernel.cu"}
    assert sealed.files[LIBRARY] == file_digest(tmp_path / LIBRARY)
    assert sealed.content_hash == content_hash(sealed) and len(sealed.content_hash) == 64
    assert sealed.kernel_id == f"gemm-{sealed.content_hash[:16]}"


def test_content_hash_changes_with_any_field():
    base = gemm_metadata()
    assert content_hash(base) == content_hash(gemm_metadata())
    assert content_hash(base) != content_hash(gemm_metadata(arch="sm_80"))
    assert content_hash(base) != content_hash(gemm_metadata(k=256))


def test_flipped_library_byte_is_refused(tmp_path):
    write_placeholder(tmp_path)
    data = bytearray((tmp_path / LIBRARY).read_bytes())
    data[5] ^= 1
    (tmp_path / LIBRARY).write_bytes(bytes(data))
    with pytest.raises(CorruptArtifactError, match="does not match its SHA-256"):
        read(tmp_path)
    with pytest.raises(CorruptArtifactError):
        load(tmp_path)


def test_edited_metadata_is_refused(tmp_path):
    write_placeholder(tmp_path)
    path = tmp_path / METADATA
    data = json.loads(path.read_text())
    data["arch"] = "sm_80"  # e.g. to get an sm_90a binary past the architecture check
    path.write_text(json.dumps(data))
    with pytest.raises(CorruptArtifactError, match="modified after export"):
        read(tmp_path)


def test_missing_files_are_refused(tmp_path):
    write_placeholder(tmp_path)
    (tmp_path / "kernel.cu").unlink()
    with pytest.raises(CorruptArtifactError, match="missing kernel.cu"):
        read(tmp_path)
    (tmp_path / METADATA).unlink()
    with pytest.raises(CorruptArtifactError, match="not a tilesearch kernel artifact"):
        read(tmp_path)
    with pytest.raises(ArtifactError, match="not a directory"):
        read(tmp_path / "nowhere")


def test_unreadable_metadata_is_refused(tmp_path):
    write_placeholder(tmp_path)
    (tmp_path / METADATA).write_text("{not json")
    with pytest.raises(CorruptArtifactError, match="unreadable"):
        read(tmp_path)


def test_other_architecture_is_refused_before_the_library_is_opened(tmp_path):
    write_placeholder(tmp_path)  # its library is a placeholder: opening it would fail differently
    with pytest.raises(ArchitectureError, match="compiled for sm_90a.*requested architecture is sm_80"):
        load(tmp_path, arch="sm_80")


@pytest.mark.parametrize(("arch", "cc"), [("sm_90a", (9, 0)), ("sm_90", (9, 0)), ("sm_80", (8, 0)),
                                          ("sm_86", (8, 6)), ("sm_120", (12, 0)), ("sm_100a", (10, 0))])
def test_capability(arch, cc):
    assert capability(arch) == cc


def test_arch_check_compares_compute_capability():
    check_arch(gemm_metadata(arch="sm_90a"), "sm_90")
    with pytest.raises(ArchitectureError):
        check_arch(gemm_metadata(arch="sm_90a"), "sm_100a")
    with pytest.raises(ValueError, match="not a CUDA architecture"):
        capability("hopper")
