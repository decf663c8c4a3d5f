"""Rank traces for the job tests: real multi-rank captures and synthetic ranks made from a real trace."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import rank_synth
from tests.conftest import shared

STRAGGLER = 2
DELAY_US = 3000.0
WORLD = 4


@pytest.fixture(scope="session")
def synth_ranks(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Four ranks of the HTA NCCL trace: rank 2 late by 3 ms at every collective."""
    base = rank_synth.load_base(shared("hta/nccl_parser_config/nccl_data.json.gz"))
    out = tmp_path_factory.mktemp("ranks")
    return rank_synth.write_ranks(out, WORLD, straggler=STRAGGLER, delay_us=DELAY_US, base=base)


@pytest.fixture(scope="session")
def synth_summaries(synth_ranks):
    from advisor.ingest.base import LoadOptions
    from advisor.job.cluster import summarize_file
    from advisor.job.inputs import assign_ranks

    return assign_ranks([s for i, p in enumerate(synth_ranks)
                         for s in summarize_file(str(p), i, LoadOptions())])


@pytest.fixture(scope="session")
def imbalanced_ranks(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Four ranks of the HTA NCCL trace where the late rank changes with the step (rank j in
    step j, 3 ms at every collective): load imbalance, no single straggler."""
    base = rank_synth.load_base(shared("hta/nccl_parser_config/nccl_data.json.gz"))
    out = tmp_path_factory.mktemp("imbalanced")
    return rank_synth.write_ranks(out, WORLD, delay_us=DELAY_US, base=base, rotate=True)


@pytest.fixture(scope="session")
def imbalanced_summaries(imbalanced_ranks):
    from advisor.ingest.base import LoadOptions
    from advisor.job.cluster import summarize_file
    from advisor.job.inputs import assign_ranks

    return assign_ranks([s for i, p in enumerate(imbalanced_ranks)
                         for s in summarize_file(str(p), i, LoadOptions())])
