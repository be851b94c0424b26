"""The fault and bad-input matrix (issue 20): every malformed input a user can hand tilesearch.

Each case asserts three things:

1. the command exits 2 with exactly one line (``tilesearch: error: ...``), or the API raises
   our own error type;
2. the files on disk are byte-identical afterwards, and nothing new was created;
3. a rerun with the input put right completes the study exactly: the trials kept before are all
   there, and the study holds ``TRIALS`` measured configurations, each once, nothing in flight.

The CLI runs as a subprocess on the replay runner over a tiny synthetic dataset (no GPU); the
reruns are in-process.
"""

import gzip
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import storages

from tilesearch import dataset
from tilesearch.database import StorageError, TuningDatabase, open_storage
from tilesearch.deploy import artifact
from tilesearch.errors import TilesearchError
from tilesearch.testing.synthetic import synthetic_dataset
from tilesearch.tuner import SettingsError, tune

PROBLEM = {"m": 256, "n": 256, "k": 256, "dtype": "float16"}
KNOBS = {"block_m": [64, 128], "block_n": [64, 128], "block_k": [32, 64], "num_stages": [2, 3],
         "threads": [128, 256], "panel_size": [0], "warp_policy": ["square"]}
GEMM = ["op=gemm", *(f"{k}={v}" for k, v in PROBLEM.items())]
TRIALS, FIRST = 12, 5
ROOT = os.geteuid() == 0  # permissions do not stop root


def cli(*args, cwd):
    env = {k: v for k, v in os.environ.items() if k != "TILESEARCH_STORAGE"}
    return subprocess.run([sys.executable, "-m", "tilesearch.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env=env)


def snapshot(directory):
    """Path -> SHA-256 of every file under ``directory``."""
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(Path(directory).rglob("*")) if p.is_file()}


def assert_one_line(out, *fragments):
    assert out.returncode == 2, (out.returncode, out.stderr[-2000:])
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tilesearch: error: "), out.stderr[-2000:]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert "Traceback" not in out.stderr


def complete(url, study, data, before=None):
    """Reruns the study to ``TRIALS`` in-process and checks it exactly (nothing lost, nothing twice)."""
    tune("gemm", PROBLEM, runner=f"replay:{data}", storage=url, study=study, trials=TRIALS, progress=False,
         strategy="tpe")
    after = storages.measured_once(url, study)
    assert len(after) == TRIALS
    for key, latency in (before or {}).items():
        assert after[key] == latency  # nothing lost or changed
    return after


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "ds.jsonl.gz"
    synthetic_dataset(path, PROBLEM, KNOBS)
    return path


@pytest.fixture
def world(tmp_path, data):
    """A working directory with a half-done study on SQLite and on a journal."""
    urls = {"sqlite": f"sqlite:///{tmp_path / 'tune.db'}", "journal": f"journal:{tmp_path / 'tune.journal'}"}
    for url in urls.values():
        tune("gemm", PROBLEM, runner=f"replay:{data}", storage=url, study="s", trials=FIRST, progress=False)
    return tmp_path, urls, {kind: storages.measured_once(url, "s") for kind, url in urls.items()}


# --- 1. settings and arguments ----------------------------------------------------------------

BAD_SETTINGS = [
    (["storage="], "storage= is empty"),
    (["study="], "study= is empty"),
    (["run_timeout=0"], "run_timeout must be > 0"),
    (["run_timeout=nan"], "must be a finite number"),
    (["run_timeout=inf"], "must be a finite number"),
    (["run_timeout=-1"], "must not be negative"),
    (["build_timeout=0"], "build_timeout must be > 0"),
    (["arch=garbage"], "arch='garbage'"),
    (["workers=0"], "workers must be at least 1"),
    (["storage=sqlite://"], "names no file"),
    (["storage=sqlite:///"], "names no file"),
    (["storage=journal:"], "needs a file name"),
    (["storage=results.db"], "not a storage URL"),
    (["study=foo#claims"], "reserved"),
    (["study=" + "x" * 600], "at most 505"),
    (["trials=0"], "trials must be at least 1"),
    (["trials=-3"], "must not be negative"),
    (["trials=1.5"], "must be a int"),
    (["seed=abc"], "must be a int"),
    (["baseline=maybe"], "must be true or false"),
    (["progress=2"], "must be true or false"),
    (["gpus=a,b"], "must list device indices"),
    (["gpus=0,0"], "distinct device indices"),
    (["workers=2", "gpus=0"], "one tuning process per GPU"),
    (["strategy=annealing"], "unknown strategy"),
    (["strategy="], "strategy= is empty"),
    (["runner="], "runner= is empty"),
    (["runner=replay:missing.jsonl"], "no dataset at"),
    (["runner=bogus"], "bogus"),
    (["hints=nonsense"], "nonsense"),
    (["colour=red"], "unknown key 'colour'"),
    (["trials=3", "trials=4"], "given twice"),
    (["storage=journal:."], "is a directory"),
    (["storage=sqlite:///."], "is a directory"),
]


@pytest.mark.parametrize("args, message", BAD_SETTINGS, ids=[" ".join(a)[:40] for a, _ in BAD_SETTINGS])
def test_bad_settings_exit_2_with_one_line_and_touch_nothing(args, message, world, data):
    cwd, urls, before = world
    files = snapshot(cwd)
    given = {a.split("=")[0] for a in args}
    base = [a for a in (f"runner=replay:{data}", f"storage={urls['sqlite']}", "study=s", "progress=false")
            if a.split("=")[0] not in given]
    out = cli("tune", *GEMM, *base, *args, cwd=cwd)
    assert_one_line(out, message)
    assert snapshot(cwd) == files
    complete(urls["sqlite"], "s", data, before["sqlite"])


BAD_SHOW = [
    (["top=0"], "top must be at least 1"),
    (["top=x"], "must be a int"),
    (["storage=sqlite:///nope.db"], "no database at nope.db"),
    (["storage=journal:nope.journal"], "no journal at nope.journal"),
    (["storage="], "storage= is empty"),
    ([], "no database at tilesearch.db"),
    (["m=-1"], "must be >= 1"),
    (["op="], "op= is empty"),
]


@pytest.mark.parametrize("command", ["show", "export"])
@pytest.mark.parametrize("args, message", BAD_SHOW, ids=[" ".join(a)[:40] or "default" for a, _ in BAD_SHOW])
def test_read_only_commands_with_bad_input_create_nothing(command, args, message, tmp_path):
    if command == "export" and args and args[0].startswith("top="):
        message = "unknown key 'top'"
    extra = ["out=kernel"] if command == "export" else []
    gemm = [a for a in GEMM if not (args and a.split("=")[0] == args[0].split("=")[0])]
    out = cli(command, *gemm, *args, *extra, cwd=tmp_path)
    assert_one_line(out, message)
    assert snapshot(tmp_path) == {}  # no tilesearch.db, no nope.db, no kernel directory


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_show_and_export_leave_the_storage_byte_identical(kind, world):
    cwd, urls, before = world
    files = snapshot(cwd)
    out = cli("show", *GEMM, f"storage={urls[kind]}", cwd=cwd)
    assert out.returncode == 0 and f"trials: {FIRST} (ok: {FIRST})" in out.stdout, out.stderr
    assert snapshot(cwd) == files  # no -wal/-shm, no "create study" record
    out = cli("export", *GEMM, f"storage={urls[kind]}", "study=s#claims", "out=k", cwd=cwd)
    assert_one_line(out, "reserved")
    assert snapshot(cwd) == files


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_a_read_only_storage_is_read_by_show_and_refused_by_tune(kind, world, data):
    cwd, urls, before = world
    path = cwd / ("tune.db" if kind == "sqlite" else "tune.journal")
    path.chmod(0o444)
    cwd.chmod(0o555)  # nor may anything be created beside it
    try:
        files = snapshot(cwd)
        out = cli("show", *GEMM, f"storage={urls[kind]}", cwd=cwd)
        assert out.returncode == 0 and f"trials: {FIRST}" in out.stdout, out.stderr
        if not ROOT:
            out = cli("tune", *GEMM, f"runner=replay:{data}", f"storage={urls[kind]}", "study=s", cwd=cwd)
            assert_one_line(out, "not writable")
        assert snapshot(cwd) == files
    finally:
        cwd.chmod(0o755)
        path.chmod(0o644)
    complete(urls[kind], "s", data, before[kind])


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_a_tune_that_fails_before_measuring_leaves_no_storage_behind(kind, tmp_path, data):
    url = "sqlite:///new.db" if kind == "sqlite" else "journal:new.journal"
    out = cli("tune", *GEMM[:-1], "dtype=bfloat16", f"runner=replay:{data}", f"storage={url}", cwd=tmp_path)
    assert_one_line(out, "holds gemm")
    assert snapshot(tmp_path) == {}


def test_output_into_a_closed_pipe_is_not_an_error(world):
    cwd, urls, _ = world
    env = {k: v for k, v in os.environ.items() if k != "TILESEARCH_STORAGE"}
    command = f"{sys.executable} -m tilesearch.cli show {' '.join(GEMM)} storage={urls['sqlite']} | head -c 10"
    out = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True, cwd=cwd,
                         env=env, timeout=120)
    assert out.returncode == 0 and "Error" not in out.stderr, out.stderr


# --- 2. damaged replay datasets --------------------------------------------------------------


def _rows(data):
    with gzip.open(data, "rt") as f:
        return [json.loads(line) for line in f]


def _write(path, lines, gz=True):
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)


def _edit(which, change):
    def make(path, data):
        lines = _rows(data)
        index = 0 if which == "header" else 3
        lines[index] = change(lines[index])
        _write(path, lines)
    return make


def _raw(content):
    def make(path, data):
        path.write_bytes(content(data.read_bytes()))
    return make


DAMAGED = {
    "truncated gzip": (_raw(lambda b: b[: len(b) // 2]), "cut-short gzip"),
    "corrupt gzip": (_raw(lambda b: b[:40] + bytes(x ^ 0x5A for x in b[40:80]) + b[80:]), "gzip"),
    "not gzip": (_raw(lambda b: b"plain text, not gzip\n"), "gzip"),
    "empty file": (_raw(lambda b: b""), "not a tilesearch-sweep file"),
    "header is a list": (_edit("header", lambda h: [h]), "not a tilesearch-sweep file"),
    "header without target": (_edit("header", lambda h: {k: v for k, v in h.items() if k != "target"}), "target"),
    "header without op": (_edit("header", lambda h: {k: v for k, v in h.items() if k != "op"}), "op"),
    "header with knobs null": (_edit("header", lambda h: {**h, "knobs": None}), "knobs"),
    "header of an unknown version": (_edit("header", lambda h: {**h, "version": 99}), "format version 99"),
    "header of another format": (_edit("header", lambda h: {**h, "format": "csv"}), "not a tilesearch-sweep"),
    "row without config": (_edit("row", lambda r: {k: v for k, v in r.items() if k != "config"}), "no config"),
    "row config a list": (_edit("row", lambda r: {**r, "config": [1, 2]}), "no config"),
    "row a list": (_edit("row", lambda r: [r]), "must be a JSON object"),
    "unknown status": (_edit("row", lambda r: {**r, "status": "great"}), "status 'great'"),
    "latency fast": (_edit("row", lambda r: {**r, "latency_ms": "fast"}), "latency_ms='fast'"),
    "latency true": (_edit("row", lambda r: {**r, "latency_ms": True}), "latency_ms=True"),
    "tflops text": (_edit("row", lambda r: {**r, "tflops": "9"}), "tflops='9'"),
    "error a number": (_edit("row", lambda r: {**r, "error": 3}), "error must be text"),
    "ok without latency": (_edit("row", lambda r: {**r, "status": "ok", "latency_ms": None}), "needs latency_ms"),
    "unknown record type": (_edit("row", lambda r: {**r, "type": "footer"}), "unknown record type"),
    "a line not JSON": (_edit("row", lambda r: "{not json"), "not JSON"),
}


def _plain(name, content, message):
    def make(path, data):
        path.write_bytes(content(data))
    return make, message


PLAIN = {  # files named .jsonl, not gzip'd
    "invalid UTF-8": _plain("x", lambda d: gzip.decompress(d.read_bytes())[:200] + b"\xff\xfe\n", "not UTF-8"),
    "binary garbage": _plain("x", lambda d: bytes(range(256)) * 4, "not UTF-8"),
}


def _make_damaged(tmp_path, data, name):
    if name in PLAIN:
        make, message = PLAIN[name]
        path = tmp_path / "bad.jsonl"
    else:
        make, message = DAMAGED[name]
        path = tmp_path / "bad.jsonl.gz"
    make(path, data)
    return path, message


ALL_DAMAGED = sorted(DAMAGED) + sorted(PLAIN)


@pytest.mark.parametrize("name", ALL_DAMAGED)
def test_a_damaged_dataset_raises_dataset_error(name, tmp_path, data):
    path, message = _make_damaged(tmp_path, data, name)
    content = path.read_bytes()
    with pytest.raises(dataset.DatasetError, match=None) as error:
        dataset.load(path)
    assert message in str(error.value) and isinstance(error.value, TilesearchError)
    assert path.read_bytes() == content


@pytest.mark.parametrize("name", ["truncated gzip", "header is a list", "row without config", "unknown status",
                                  "latency fast", "invalid UTF-8"])
def test_a_damaged_dataset_exits_2_with_one_line_and_the_study_completes(name, world, data):
    cwd, urls, before = world
    path, message = _make_damaged(cwd, data, name)
    files = snapshot(cwd)
    out = cli("tune", *GEMM, f"runner=replay:{path}", f"storage={urls['journal']}", "study=s", cwd=cwd)
    assert_one_line(out, message)
    assert snapshot(cwd) == files
    complete(urls["journal"], "s", data, before["journal"])


def test_a_directory_or_unreadable_dataset_raises_dataset_error(tmp_path, data):
    with pytest.raises(dataset.DatasetError, match="is a directory"):
        dataset.load(tmp_path)
    if not ROOT:
        locked = tmp_path / "locked.jsonl.gz"
        locked.write_bytes(data.read_bytes())
        locked.chmod(0)
        with pytest.raises(dataset.DatasetError, match="cannot read"):
            dataset.load(locked)


# --- 3. damaged storages ---------------------------------------------------------------------


def _journal_damage(change):
    def make(path):
        path.write_bytes(change(path.read_bytes()))
    return make


JOURNAL_DAMAGE = {
    "binary garbage": (_journal_damage(lambda b: bytes(range(256)) * 8), "damaged"),
    "not JSON in the middle": (_journal_damage(lambda b: b.replace(b"\n", b"\n{oops\n", 1)), "damaged"),
    "invalid UTF-8 in the middle": (_journal_damage(lambda b: b.replace(b"\n", b"\n\xff\xfe\n", 1)), "damaged"),
    "records that are not objects": (_journal_damage(lambda b: b"[1, 2]\n" + b), "not an Optuna journal record"),
    "a record without op_code": (_journal_damage(lambda b: b'{"x": 1}\n' + b), "not an Optuna journal record"),
    "a torn line in the middle": (_journal_damage(lambda b: b[:-8] + b + b""), "damaged"),
}


@pytest.mark.parametrize("command", ["show", "tune"])
@pytest.mark.parametrize("name", sorted(JOURNAL_DAMAGE))
def test_a_damaged_journal_exits_2_with_one_line_and_stays_byte_identical(name, command, world, data):
    cwd, urls, _ = world
    damage, message = JOURNAL_DAMAGE[name]
    damage(cwd / "tune.journal")
    files = snapshot(cwd)
    extra = [f"runner=replay:{data}", "study=s"] if command == "tune" else []
    out = cli(command, *GEMM, f"storage={urls['journal']}", *extra, cwd=cwd)
    assert_one_line(out, message)
    assert snapshot(cwd) == files


def test_a_torn_journal_tail_is_read_by_show_and_set_aside_by_tune(world, data):
    cwd, urls, before = world
    path = cwd / "tune.journal"
    sound = path.read_bytes()
    torn = b'{"op_code":5,"worker_id":"x","trial_id":3,"us'
    path.write_bytes(sound + torn)
    files = snapshot(cwd)
    out = cli("show", *GEMM, f"storage={urls['journal']}", cwd=cwd)
    assert out.returncode == 0 and f"trials: {FIRST}" in out.stdout, out.stderr
    assert snapshot(cwd) == files
    after = complete(urls["journal"], "s", data, before["journal"])
    assert (cwd / f"tune.journal.torn-{len(sound)}").read_bytes() == torn  # kept, not lost
    assert path.read_bytes().startswith(sound)
    assert storages.measured_once(urls["journal"], "s") == after  # and the journal reads back whole


SQLITE_DAMAGE = {
    "a bad page": lambda b: b[:4096] + bytes(x ^ 0xA5 for x in b[4096:8192]) + b[8192:],
    "not SQLite": lambda b: b"just some text\n" * 100,
    "a cut-off file": lambda b: b[:5000],
}


@pytest.mark.parametrize("command", ["show", "tune"])
@pytest.mark.parametrize("name", sorted(SQLITE_DAMAGE))
def test_a_damaged_sqlite_file_exits_2_with_one_line_and_stays_byte_identical(name, command, world, data):
    cwd, urls, _ = world
    path = cwd / "tune.db"
    path.write_bytes(SQLITE_DAMAGE[name](path.read_bytes()))
    files = snapshot(cwd)
    extra = [f"runner=replay:{data}", "study=s"] if command == "tune" else []
    out = cli(command, *GEMM, f"storage={urls['sqlite']}", *extra, cwd=cwd)
    assert_one_line(out)
    assert snapshot(cwd) == files


# --- 4. the API raises our own error types ---------------------------------------------------

API_STORAGE = {
    "empty url": lambda tmp: open_storage(""),
    "sqlite without a file": lambda tmp: open_storage("sqlite://"),
    "journal without a file": lambda tmp: open_storage("journal:"),
    "journal directory": lambda tmp: open_storage(f"journal:{tmp}"),
    "missing journal read-only": lambda tmp: open_storage(f"journal:{tmp / 'x'}", read_only=True),
    "missing sqlite read-only": lambda tmp: open_storage(f"sqlite:///{tmp / 'x.db'}", read_only=True),
    "reserved study name": lambda tmp: TuningDatabase(":memory:", "foo#claims"),
    "empty study name": lambda tmp: TuningDatabase(":memory:", ""),
    "long study name": lambda tmp: TuningDatabase(":memory:", "s" * 506),
    "missing study read-only": lambda tmp: TuningDatabase(":memory:", "nope", read_only=True),
}


@pytest.mark.parametrize("name", sorted(API_STORAGE))
def test_bad_storage_input_raises_storage_error(name, tmp_path):
    with pytest.raises(TilesearchError):
        API_STORAGE[name](tmp_path)
    assert snapshot(tmp_path) == {}


def _artifact(tmp_path, change):
    directory = tmp_path / "kernel"
    directory.mkdir()
    (directory / artifact.LIBRARY).write_bytes(b"\x7fELF not really")
    meta = artifact.Metadata(op="gemm", params={"m": 1}, config={"block_m": 64}, arch="sm_90a", entry="main",
                             inputs=(artifact.TensorSpec("a", (1,), "float16"),), outputs=())
    artifact.seal(directory, meta)
    path = directory / artifact.METADATA
    path.write_bytes(change(path.read_bytes()))
    return directory


def _json_edit(change):
    return lambda raw: json.dumps(change(json.loads(raw))).encode()


ARTIFACT_DAMAGE = {
    "metadata a list": (_json_edit(lambda d: [d]), "not an object"),
    "files null": (_json_edit(lambda d: {**d, "files": None}), '"files"'),
    "files outside": (_json_edit(lambda d: {**d, "files": {"../x": "0" * 64}}), "inside the artifact"),
    "inputs null": (_json_edit(lambda d: {**d, "inputs": None}), '"inputs"'),
    "arch a number": (_json_edit(lambda d: {**d, "arch": 90}), '"arch"'),
    "not JSON": (lambda raw: raw[:-20], "not JSON"),
    "not UTF-8": (lambda raw: b"\xff\xfe" + raw, "not JSON"),
    "re-sealed is caught only as edited": (_json_edit(lambda d: {**d, "latency_ms": 0.001}), "modified"),
}


@pytest.mark.parametrize("name", sorted(ARTIFACT_DAMAGE))
def test_a_damaged_artifact_raises_artifact_error(name, tmp_path):
    change, message = ARTIFACT_DAMAGE[name]
    directory = _artifact(tmp_path, change)
    files = snapshot(tmp_path)
    with pytest.raises(artifact.ArtifactError, match=None) as error:
        artifact.read(directory)
    assert message in str(error.value) and isinstance(error.value, TilesearchError)
    assert snapshot(tmp_path) == files


API_SETTINGS = {
    "trials=0": {"trials": 0},
    "run_timeout=0": {"run_timeout": 0},
    "run_timeout=nan": {"run_timeout": float("nan")},
    "build_timeout=inf": {"build_timeout": float("inf")},
    "device=-1": {"device": -1},
    "storage empty": {"storage": " "},
    "study reserved": {"study": "a#claims"},
}


@pytest.mark.parametrize("name", sorted(API_SETTINGS))
def test_bad_settings_raise_settings_error_from_the_api(name, tmp_path, data):
    settings = {"storage": f"sqlite:///{tmp_path / 'x.db'}", **API_SETTINGS[name]}
    with pytest.raises(SettingsError):
        tune("gemm", PROBLEM, runner=f"replay:{data}", progress=False, **settings)
    assert snapshot(tmp_path) == {}


def test_storage_error_is_a_tilesearch_error():
    assert issubclass(StorageError, TilesearchError) and issubclass(dataset.DatasetError, TilesearchError)
