"""What the analysed steps cannot show the rank rules, said in the report's warnings.

Each check reads one kind of blind spot off the trace and returns a sentence, or None where
there is none: GPU time traced as whole CUDA graph replays (`hidden_kernels`), communication
only the job rules can judge (`exposed_comm`), steps that are not a training step's
(`no_training`). A rule that finds nothing there would otherwise read as "nothing to fix".
"""

from __future__ import annotations

from collections.abc import Sequence

from advisor.graph.exposed_comm import exposed_comm_note
from advisor.graph.hidden_kernels import hidden_kernel_note
from advisor.graph.model import OpGraph, Step
from advisor.graph.no_training import no_training_note

CHECKS = (hidden_kernel_note, exposed_comm_note, no_training_note)


def blind_spots(graph: OpGraph, steps: Sequence[Step]) -> tuple[str, ...]:
    """The warnings of every check that finds its blind spot in these steps, in `CHECKS` order."""
    return tuple(note for check in CHECKS if (note := check(graph, steps)) is not None)
