"""checking() blocks left from another context: no foreign error, no leaked mode."""

from __future__ import annotations

import asyncio
import contextvars
import threading

from hypothesis import given
from hypothesis import strategies as st

from specguard import contracts


def _suspended_in_a_block(mode: str):
    with contracts.checking(mode=mode):
        yield contracts.current_config().mode.value
        yield contracts.current_config().mode.value


def test_a_generator_resumed_by_another_task_leaves_its_block_cleanly():
    """Task A opens the block inside a generator; task B resumes and closes it. Neither
    raises ValueError (a Token of another Context), and A is back in the outer mode."""
    before = contracts.current_config().mode

    async def main() -> tuple[str, str, str]:
        generator = _suspended_in_a_block("warn")
        inside = next(generator)  # task A (this one) enters the block

        async def finish() -> str:
            seen = next(generator)
            for _ in generator:  # leaves the block in task B's context
                pass
            return seen

        seen_by_b = await asyncio.create_task(finish())
        return inside, seen_by_b, contracts.current_config().mode.value

    inside, seen_by_b, after = asyncio.run(main())
    assert inside == "warn"
    assert seen_by_b == "warn"  # B was created inside the block: it inherited it
    assert after == before.value


def test_a_block_closed_elsewhere_is_skipped_in_every_context_that_holds_it():
    context = contextvars.copy_context()
    generator = _suspended_in_a_block("off")
    assert context.run(next, generator) == "off"
    assert context.run(lambda: contracts.current_config().mode.value) == "off"
    for _ in generator:  # closed from the outer context
        pass
    assert context.run(lambda: contracts.current_config().mode) == contracts.current_config().mode


def test_nested_blocks_still_restore_in_order():
    outer = contracts.current_config()
    with contracts.checking(mode="warn"):
        with contracts.checking(depth="full") as inner:
            assert (inner.mode.value, inner.depth.value) == ("warn", "full")
        assert contracts.current_config().depth == outer.depth
        assert contracts.current_config().mode.value == "warn"
    assert contracts.current_config() == outer


@given(st.lists(st.sampled_from(["off", "warn", "strict"]), min_size=1, max_size=6),
       st.randoms(use_true_random=False))
def test_generators_left_in_any_order_from_any_thread_never_leak_a_mode(modes, random):
    """Blocks opened in generators and closed in a shuffled order, some from another
    thread, leave the opening context in its own mode."""
    before = contracts.current_config()
    generators = [_suspended_in_a_block(mode) for mode in modes]
    for generator in generators:
        next(generator)
    random.shuffle(generators)
    for index, generator in enumerate(generators):
        if index % 2:
            worker = threading.Thread(target=lambda g=generator: list(g))
            worker.start()
            worker.join()
        else:
            list(generator)
    assert contracts.current_config() == before
