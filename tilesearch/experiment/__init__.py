"""Experiments as config scripts: an :class:`Experiment` declares problems, strategies, trials
and peers; :func:`run` tunes, re-times the top beside the baseline and the peers in one process,
and writes the table, JSON and PNG; :func:`main` is the command line of every script."""

from tilesearch.experiment.cli import main
from tilesearch.experiment.config import EVERY, Experiment, ExperimentError
from tilesearch.experiment.peers import PEERS
from tilesearch.experiment.run import run
from tilesearch.runner.peer import Peer

__all__ = ["EVERY", "PEERS", "Experiment", "ExperimentError", "Peer", "main", "run"]
