"""svckit.runner.freeze_startup: what exists when a service has started leaves the collector's generations."""

from __future__ import annotations

import gc

from svckit.runner import freeze_startup


def test_freeze_startup_moves_what_exists_out_of_the_generations() -> None:
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    survivor = [object() for _ in range(100)]
    try:
        freeze_startup()
        frozen = gc.get_freeze_count()
        assert frozen >= len(survivor)
        assert sum(gc.get_count()) < 100  # the generations start again from nothing
    finally:
        gc.unfreeze()
    assert gc.get_freeze_count() == 0
