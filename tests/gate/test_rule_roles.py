"""The gate reads what the rules declare for it (`RuleSpec.gate_signals`, `.opportunity`)."""

from __future__ import annotations

from advisor.engine.registry import load_rules
from advisor.engine.rule import GATE_SIGNALS
from advisor.gate.signals import KERNEL_SIGNALS, rule_roles


def test_every_gate_signal_is_declared_by_one_installed_rule():
    declared = [s for r in load_rules() for s in r.gate_signals]
    assert sorted(declared) == sorted(GATE_SIGNALS)
    assert set(GATE_SIGNALS) >= KERNEL_SIGNALS


def test_roles_are_read_off_the_rules():
    roles = rule_roles()
    assert roles.rule_of["sync-calls"] == "host-sync"
    assert roles.rule_of["fused-attention"] == "unfused-attention"
    assert roles.opportunities == {r.name for r in load_rules() if r.opportunity}
    assert roles.opportunities == {"fp8-candidate", "compiler-fusion"}
