"""A signal never cuts a storage call in two (:func:`tilesearch.shutdown.held`).

In CI a tuning run interrupted at a random moment left an SQLite study that no later run could
open ("Multiple rows were found when one or none was required"); SIGTERMs injected at each line
of one trial's creation left SQLAlchemy's session half-way through a commit. These tests send
the signal from inside a storage call, in this process, with the handlers that ``main`` installs.
"""

import signal
import sys

import pytest
from sqlalchemy import event

from tilesearch import shutdown
from tilesearch.database import TuningDatabase, open_storage
from tilesearch.storage import uninterrupted


@pytest.fixture
def handlers():
    """``shutdown.install()`` for one test; the process's handlers and the module's state after."""
    saved = {s: signal.getsignal(s) for s in shutdown.SIGNALS}
    hook = sys.unraisablehook
    shutdown.install()
    yield
    for s, h in saved.items():
        signal.signal(s, h)
    sys.unraisablehook = hook
    forget_signals()


def forget_signals():
    """The module as in a process that has received no signal (as the next run starts)."""
    shutdown._received.clear()
    shutdown._raised = False
    shutdown._holding = 0
    shutdown._first_at = 0.0
    shutdown._deferred_at = None


class Store:
    """A storage whose one write is interrupted half-way: ``signals`` arrive between its two steps."""

    def __init__(self, signals):
        self.signals, self.steps = signals, []

    def write(self):
        self.steps.append("first")
        for s in self.signals:
            signal.raise_signal(s)
        self.steps.append("second")
        return "written"


def test_a_signal_inside_a_storage_call_is_raised_when_the_call_returns(handlers):
    store = uninterrupted(Store([signal.SIGTERM]))
    with pytest.raises(shutdown.Interrupted) as caught:
        store.write()
    assert store.steps == ["first", "second"]
    assert caught.value.signum == signal.SIGTERM and shutdown.exit_code() == 143


def test_without_the_guard_the_signal_cuts_the_call(handlers):
    store = Store([signal.SIGINT])
    with pytest.raises(shutdown.Interrupted):
        store.write()
    assert store.steps == ["first"]


def test_a_second_signal_inside_a_storage_call_raises_at_once(handlers, monkeypatch):
    monkeypatch.setattr(shutdown, "DUPLICATE_S", 0.0)  # the second comes later than a repeat would
    store = uninterrupted(Store([signal.SIGINT, signal.SIGTERM]))
    with pytest.raises(shutdown.Interrupted) as caught:
        store.write()
    assert store.steps == ["first"]
    assert caught.value.signum == signal.SIGINT  # the first signal's exit code: 130


def test_after_the_first_signal_was_raised_later_ones_do_not_cut_the_cleanup(handlers):
    with pytest.raises(shutdown.Interrupted):
        signal.raise_signal(signal.SIGINT)
    store = uninterrupted(Store([signal.SIGTERM]))
    assert store.write() == "written"
    assert store.steps == ["first", "second"]
    with pytest.raises(shutdown.Interrupted):  # the loop's next check still stops the run
        shutdown.check()


def test_a_signal_during_a_trials_commit_leaves_the_trial_whole_and_a_rerun_completes(handlers, tmp_path):
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    db = TuningDatabase(url, "study")
    engine = db.storage.engine
    event.listen(engine, "commit", lambda conn: signal.raise_signal(signal.SIGTERM), once=True)
    with pytest.raises(shutdown.Interrupted):
        db.ask({})
    db.close()
    forget_signals()
    again = TuningDatabase(url, "study")
    trials = again.trials()
    assert [(t.number, t.state.name) for t in trials] == [(0, "RUNNING")]
    assert again.fail_stale() == 0  # this process (its PID) lives: the trial is its own
    assert [t.number for t in (again.ask({}), again.ask({}))] == [1, 2]
    again.close()


def test_every_storage_that_open_storage_returns_is_guarded(tmp_path):
    for url in (f"sqlite:///{tmp_path / 'a.db'}", f"journal:{tmp_path / 'a.journal'}", ":memory:"):
        storage = open_storage(url)
        assert hasattr(storage.create_new_trial, "__wrapped__"), url
        assert hasattr(storage.set_trial_state_values, "__wrapped__"), url


@pytest.fixture
def python_handler():
    """Python's own SIGINT handler, as in a process that calls ``tune`` without ``main``."""
    saved = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, saved)
    forget_signals()


def test_without_main_s_handlers_a_sigint_inside_a_storage_call_is_raised_when_it_returns(python_handler):
    store = uninterrupted(Store([signal.SIGINT]))
    with pytest.raises(KeyboardInterrupt) as caught:
        store.write()
    assert store.steps == ["first", "second"] and type(caught.value) is KeyboardInterrupt
    # nothing kept: Python's handler is back, and the next call (the process's next tune) runs whole
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler and shutdown.received() is None
    assert uninterrupted(Store([])).write() == "written"
    shutdown.check()


def test_without_main_s_handlers_a_second_sigint_inside_a_storage_call_raises_at_once(python_handler, monkeypatch):
    monkeypatch.setattr(shutdown, "DUPLICATE_S", 0.0)
    store = uninterrupted(Store([signal.SIGINT, signal.SIGINT]))
    with pytest.raises(KeyboardInterrupt):
        store.write()
    assert store.steps == ["first"] and signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_handler_of_the_user_s_own_is_left_to_run(python_handler):
    seen = []
    signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    store = uninterrupted(Store([signal.SIGINT]))
    assert store.write() == "written" and seen == [signal.SIGINT]


def test_without_main_s_handlers_a_sigint_during_a_trials_commit_leaves_the_trial_whole(python_handler, tmp_path):
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    db = TuningDatabase(url, "study")
    event.listen(db.storage.engine, "commit", lambda conn: signal.raise_signal(signal.SIGINT), once=True)
    with pytest.raises(KeyboardInterrupt):
        db.ask({})
    db.close()
    again = TuningDatabase(url, "study")
    assert [(t.number, t.state.name) for t in again.trials()] == [(0, "RUNNING")]
    assert [t.number for t in (again.ask({}), again.ask({}))] == [1, 2]
    again.close()


@pytest.mark.parametrize("mode", ["handlers", "python_handler"])
def test_a_signal_delivered_twice_at_once_is_one_request_and_the_call_still_runs_whole(mode, request):
    """GNU ``timeout`` signals the command and then its process group: a busy process can take the
    signal twice within microseconds, which is not a user pressing Ctrl-C again."""
    request.getfixturevalue(mode)
    store = uninterrupted(Store([signal.SIGINT, signal.SIGINT]))
    with pytest.raises(KeyboardInterrupt):
        store.write()
    assert store.steps == ["first", "second"]
