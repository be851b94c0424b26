"""A study's identity covers the operator's source, its knob semantics and the versions: editing
the plugin's module starts a new study, and a named study measured otherwise is refused."""

import importlib
import shutil
import sys

import pytest

from tilesearch import provenance, registry
from tilesearch.database import TuningDatabase
from tilesearch.provenance import StaleStudyError
from tilesearch.testing.synthetic import SyntheticRunner
from tilesearch.tuner import tune


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """A copy of the toy operator's module in tmp_path, registered by its import path."""
    import tilesearch.testing.toy as toy

    path = tmp_path / "my_plugin_op.py"
    shutil.copy(toy.__file__, path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield path, "my_plugin_op:ToyOp"
    sys.modules.pop("my_plugin_op", None)
    registry.load.cache_clear()


def reload(ref):
    registry.load.cache_clear()
    sys.modules.pop(ref.split(":")[0], None)
    importlib.invalidate_caches()
    return registry.load(ref)


def run(ref, storage, **kw):
    runner = SyntheticRunner()
    result = tune(ref, {"size": 8}, runner=runner, strategy="grid", trials=4, storage=storage, progress=False, **kw)
    return result, runner


def test_editing_the_plugin_changes_the_identity_and_nothing_is_reused_silently(plugin, tmp_path):
    path, ref = plugin
    storage = f"sqlite:///{tmp_path / 'p.db'}"
    before = provenance.identity(reload(ref), {})
    first, runner = run(ref, storage)
    assert len(runner.calls) == 4 and first.notes == []
    again, runner = run(ref, storage)
    assert again.study == first.study and runner.calls == []  # unchanged: resumed, nothing measured

    with open(path, "a") as f:
        f.write("\n# an edit of the template\n")
    after = provenance.identity(reload(ref), {})
    assert after["op_source"] != before["op_source"]
    assert provenance.differences(before, after) == [
        f"operator source (sha256 of its module files): {before['op_source'][:12]} -> {after['op_source'][:12]}"]

    edited, runner = run(ref, storage)
    assert edited.study != first.study and len(runner.calls) == 4  # a new study, measured afresh
    (note,) = edited.notes
    assert first.study in note and "operator source" in note and "tilesearch revalidate" in note
    assert TuningDatabase(storage, edited.study).study.user_attrs["identity"]["op_source"] == after["op_source"]

    with pytest.raises(StaleStudyError, match="operator source .* tilesearch revalidate"):
        run(ref, storage, study=first.study)  # named explicitly: refused, with the difference


def test_knob_version_and_versions_are_part_of_the_identity(plugin):
    _, ref = plugin
    op = reload(ref)
    base = provenance.identity(op, {"torch": "2.11", "torch_cuda": "13.0", "driver": "580.1"})
    type(op).knob_version = 2
    try:
        bumped = provenance.identity(op, {"torch": "2.11", "torch_cuda": "13.0", "driver": "580.1"})
    finally:
        del type(op).knob_version
    assert provenance.differences(base, bumped) == ["knob semantics version: 1 -> 2"]
    moved = provenance.identity(op, {"torch": "2.12", "torch_cuda": "13.0", "driver": "590.2"})
    assert provenance.differences(base, moved) == ["NVIDIA driver version: 580.1 -> 590.2", "torch version: 2.11 -> 2.12"]
    assert provenance.tag(base) != provenance.tag(moved)
    assert provenance.differences(None, base)[0].startswith("the study records no identity")


def test_cli_refuses_a_named_study_measured_otherwise_with_exit_2(tmp_path, capsys):
    from tilesearch import cli
    from tilesearch.testing.synthetic import synthetic_dataset

    knobs = {"block_m": (64, 128), "block_n": (64,), "block_k": (32,), "num_stages": (2,), "threads": (128,),
             "panel_size": (0,), "warp_policy": ("square",)}
    data = synthetic_dataset(tmp_path / "d.jsonl.gz", {"m": 512, "n": 512, "k": 512}, knobs)
    storage = f"sqlite:///{tmp_path / 'c.db'}"
    args = ["tune", "op=gemm", "m=512", "n=512", "k=512", f"runner=replay:{data.path}", f"storage={storage}",
            "study=mine", "strategy=grid", "trials=2", "progress=false"]
    assert cli.main(args) == 0
    capsys.readouterr()
    db = TuningDatabase(storage, "mine")
    db.study.set_user_attr("identity", {**db.study.user_attrs["identity"], "torch": "2.0"})
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "torch version: 2.0 -> " in err and "tilesearch revalidate" in err


def test_the_modules_a_plugin_imports_from_its_own_package_are_part_of_its_source(tmp_path, monkeypatch):
    """GEMM's cluster program and the grouped GEMM's template live beside the operator's module,
    imported at the top or inside a method: an edit of them changes what is measured."""
    pkg = tmp_path / "pkg_plugin"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "template.py").write_text("def program():\n    return 1\n")
    (pkg / "unused.py").write_text("X = 1\n")
    (pkg / "op.py").write_text(
        "import numpy\n"
        "from tilesearch.testing.toy import ToyOp as _Toy\n\n\n"
        "class ToyOp(_Toy):\n"
        "    def build(self, *args, **kwargs):\n"
        "        from pkg_plugin.template import program  # noqa: F401\n"
        "        return super().build(*args, **kwargs)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        before = provenance.identity(reload("pkg_plugin.op:ToyOp"), {})
        (pkg / "unused.py").write_text("X = 2\n")
        assert provenance.identity(reload("pkg_plugin.op:ToyOp"), {}) == before  # not imported: not its source
        (pkg / "template.py").write_text("def program():\n    return 2\n")
        after = provenance.identity(reload("pkg_plugin.op:ToyOp"), {})
        assert after["op_source"] != before["op_source"]
        # the op's module edited to import it (its imports are parsed once a text, not once a process)
        (pkg / "op.py").write_text((pkg / "op.py").read_text() + "\n\nfrom pkg_plugin import unused  # noqa: E402, F401\n")
        importing = provenance.identity(reload("pkg_plugin.op:ToyOp"), {})
        (pkg / "unused.py").write_text("X = 3\n")
        assert provenance.identity(reload("pkg_plugin.op:ToyOp"), {})["op_source"] != importing["op_source"]
    finally:
        for name in [n for n in sys.modules if n.startswith("pkg_plugin")]:
            sys.modules.pop(name)
        registry.load.cache_clear()


def test_a_named_study_measured_on_another_gpu_is_refused(tmp_path):
    """The default name has the GPU in it; an explicit one (a recording resumed on whatever card a
    session is lent) must not take one GPU's rows into another's study."""
    from tilesearch.target import Target
    from tilesearch.testing.toy import TOY_OP

    storage = f"sqlite:///{tmp_path / 'g.db'}"

    def on(gpu, trials):
        runner = SyntheticRunner(target=Target.from_arch("sm_90a", gpu=gpu))
        tune(TOY_OP, {"size": 8}, runner=runner, strategy="grid", trials=trials, storage=storage, study="rec",
             progress=False, retime=0)
        return runner

    assert len(on("NVIDIA H200", 2).calls) == 2
    with pytest.raises(StaleStudyError, match="GPU: NVIDIA H200 -> NVIDIA H100 80GB HBM3"):
        on("NVIDIA H100 80GB HBM3", 4)
    assert len(on("NVIDIA H200", 4).calls) == 2  # the same card resumes it
