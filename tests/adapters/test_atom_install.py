"""install(): the ATOM contracts around a live ModelRunner, on an object with ATOM's methods."""

from __future__ import annotations

import inspect
import re
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from specguard import contracts
from specguard.adapters import UnsupportedEngine, install_atom, uninstall_atom
from specguard.adapters.corpus import read_corpus
from specguard.adapters.engines.atom import install as atom_install

CORPUS = Path(__file__).parents[1] / "conformance" / "corpus" / "atom"


class RejectionSampler:
    """Returns the recorded rows of the step, as ATOM's sampler returns them."""

    def __init__(self, runner: ModelRunner) -> None:
        self.runner = runner

    def forward(self, metadata: Any, target_logits: Any, bonus_token_ids: Any) -> Any:
        step = self.runner.step
        return step["verified"]["sampled_tokens"], step["verified"]["num_bonus_tokens"]


class ModelRunner:
    """ATOM's ModelRunner methods with their signatures (80b5b02be to 042e8f1c0); the
    bodies replay a corpus instead of running a model."""

    def __init__(self, steps: list[dict[str, Any]], mtp_k: int) -> None:
        self.steps = iter(steps)
        self.step: dict[str, Any] = {}
        self.forwarded: list[list[int]] = []
        self.block_size = 8
        self.config = types.SimpleNamespace(hf_config=types.SimpleNamespace(vocab_size=1000))
        self.drafter = types.SimpleNamespace(mtp_k=mtp_k)
        self.tokenID_processor = types.SimpleNamespace(draft_token_ids=None)
        self.rejection_sampler = RejectionSampler(self)

    def forward(self, batch):
        self.step = next(self.steps) if not batch.is_dummy_run else {}
        self.forwarded.append(list(batch.req_ids))
        return self.postprocess(batch, None, None, None, None, True, None)

    def postprocess(self, batch, logits, temperatures, top_ks, top_ps, all_greedy,
                    hidden_states, needs_independent_noise=False):
        if "verified" in self.step:
            self.rejection_sampler.forward(None, None, None)
        if "drafted" in self.step:
            self.propose_draft_token_ids(batch, None, None,
                                         self.step["drafted"].get("next_token_ids"), None)
        return "output"

    def propose_draft_token_ids(self, batch, input_ids, hidden_states, next_token_ids,
                                num_reject_tokens):
        self.tokenID_processor.draft_token_ids = self.step["drafted"]["draft_token_ids"]
        return np.zeros(0, dtype=np.int32)


def _steps(version: str, scenario: str) -> tuple[list[Any], ModelRunner]:
    """The corpus as batches plus a runner that replays what followed each one."""
    corpus = read_corpus(CORPUS / version / f"{scenario}.json")
    batches: list[Any] = []
    steps: list[dict[str, Any]] = []
    for event in corpus.events:
        if event.event == "schedule" and event.values()["forwarded"]:
            batches.append(types.SimpleNamespace(**event.values()))
            steps.append({})
        elif event.event in ("verified", "drafted"):
            steps[-1][event.event] = event.values()
    mtp_k = corpus.config["mtp_k"]
    assert isinstance(mtp_k, int)
    return batches, ModelRunner(steps, mtp_k)


def test_install_checks_every_batch_verify_and_draft_of_a_clean_run():
    """A recorded clean run goes through forward, the sampler and the drafter unchanged."""
    batches, runner = _steps("042e8f1c0", "prefix-cache-hit")
    with contracts.checking(mode="strict", depth="full"):  # any violation raises
        view = install_atom(runner)
        assert view.tracker is not None and view.layout == "pr1771"
        assert [runner.forward(batch) for batch in batches] == ["output"] * len(batches)
    assert runner.forwarded == [list(b.req_ids) for b in batches]
    assert view.tracker.close() is not None
    last = view.tracker.close()
    assert last is not None
    assert last.drafted.all()  # the drafter's rows reached the tracker
    assert (last.advance >= 1).all()  # and the sampler's accepted counts


def test_install_without_a_tracker_checks_each_object_alone():
    """tracker=False leaves the step tracker out: the same run passes, and nothing is
    related from step to step."""
    batches, runner = _steps("042e8f1c0", "prefix-cache-hit")
    with contracts.checking(mode="strict"):
        view = install_atom(runner, tracker=False)
        assert view.tracker is None
        assert [runner.forward(batch) for batch in batches] == ["output"] * len(batches)


def test_install_relates_the_steps_at_the_default_depth():
    """The default install has a tracker, and at the default depth it sees every step."""
    batches, runner = _steps("042e8f1c0", "prefix-cache-hit")
    with contracts.checking(mode="strict"):
        view = install_atom(runner)
        for batch in batches:
            runner.forward(batch)
    assert view.tracker is not None
    last = view.tracker.close()
    assert last is not None and last.drafted.all() and (last.advance >= 1).all()


def test_install_refuses_the_seed_batch_before_the_runner_sees_it():
    """80b5b02be's [2 | 0 1] with two host rows: SG101 at forward(), nothing forwarded."""
    batches, runner = _steps("80b5b02be", "partial-prefill-requeue")
    with contracts.checking(depth="full"):
        install_atom(runner, layout="pre-1771")
        for batch in batches[:-1]:
            runner.forward(batch)
        with pytest.raises(contracts.ContractViolation, match=re.escape(
                "SG101 one draft row per decode seq, in batch order [ScheduledBatch."
                "draft_token_ids, scheduler → runner]: seq 2 at batch position 0: decode seq "
                "has no drafts and no draft row")):
            runner.forward(batches[-1])
    assert runner.forwarded[-1] != [2, 0, 1]


def test_install_gives_the_token_sampled_at_prefill_to_the_history():
    """propose_draft_token_ids' next_token_ids reaches the view: a seq preempted right after
    its prefill and recomputed with an EOS where that token belongs is SG608 at forward()."""
    batches, runner = _steps("ffdf3bb5d", "preempt-after-prefill")
    recompute = next(i for i, b in enumerate(batches) if i and b.total_seqs_num_prefill)
    with contracts.checking(depth="full"):
        install_atom(runner)
        for batch in batches[:recompute]:
            runner.forward(batch)
        with pytest.raises(contracts.ContractViolation, match=re.escape(
                "SG608 a recomputed seq re-feeds only the tokens it was emitted "
                "[RecomputedTokens.token_positions, scheduler → runner]: seq 1 at batch "
                "position 0: re-feeds token 2 at position 6, where the engine sampled ")):
            runner.forward(batches[recompute])


def test_uninstall_restores_the_runner_and_the_context_manager_scopes_it():
    """After uninstall the instance has no wrapper left; installed() undoes itself."""
    _, runner = _steps("042e8f1c0", "steady-decode-k1")
    forward, sampler = runner.forward, runner.rejection_sampler.forward
    install_atom(runner)
    assert runner.forward != forward and atom_install.is_installed(runner)
    uninstall_atom(runner)
    assert runner.forward == forward and runner.rejection_sampler.forward == sampler
    assert "forward" not in vars(runner) and not atom_install.is_installed(runner)
    with atom_install.installed(runner, layout="pre-1771") as view:
        assert view.layout == "pre-1771" and "forward" in vars(runner)
    assert "forward" not in vars(runner)


def test_install_refuses_a_runner_whose_signatures_it_does_not_know():
    """A postprocess with other parameters, or a missing method, is refused by name."""
    _, runner = _steps("042e8f1c0", "steady-decode-k1")
    # An ATOM this adapter does not know: a postprocess of other parameters.
    runner.postprocess = lambda batch, logits: None  # pyright: ignore[reportAttributeAccessIssue]
    del runner.tokenID_processor
    with pytest.raises(UnsupportedEngine, match=re.escape(
            "specguard.adapters.engines.atom.install cannot install on ModelRunner: "
            "postprocess(batch, logits) is not postprocess(batch, logits, temperatures, "
            "top_ks, top_ps, all_greedy, hidden_states, needs_independent_noise); "
            "it has no tokenID_processor (known: ATOM ModelRunner from 80b5b02be to "
            "ffdf3bb5d)")):
        install_atom(runner)
    with pytest.raises(UnsupportedEngine, match="has no method forward"):
        install_atom(types.SimpleNamespace(postprocess=None))
    # A setup mistake, not a broken batch: `except ContractViolation` must not swallow it.
    assert issubclass(UnsupportedEngine, contracts.SpecguardError)
    assert not issubclass(UnsupportedEngine, contracts.ContractViolation | contracts.ConfigError)


def test_install_twice_is_refused_and_uninstall_of_nothing_too():
    """Installing on an installed runner, or uninstalling a bare one, says so."""
    _, runner = _steps("042e8f1c0", "steady-decode-k1")
    install_atom(runner)
    with pytest.raises(UnsupportedEngine, match="already installed"):
        install_atom(runner)
    uninstall_atom(runner)
    with pytest.raises(UnsupportedEngine, match="not installed"):
        uninstall_atom(runner)


def test_newest_atom_propose_with_align_only_is_known_and_passed_through():
    """ffdf3bb5d adds align_only=False to propose_draft_token_ids; align-only drafts nothing."""
    _, runner = _steps("ffdf3bb5d", "steady-decode-k1")

    def propose(batch, input_ids, hidden_states, next_token_ids, num_reject_tokens,
                align_only=False):
        return "proposed"

    # The stand-in runner becomes ffdf3bb5d's: its propose takes align_only.
    runner.propose_draft_token_ids = propose  # pyright: ignore[reportAttributeAccessIssue]
    view = install_atom(runner)
    calls: list[Any] = []
    view.drafted = lambda batch, drafts, sampled: calls.append(  # type: ignore[method-assign]
        (drafts, sampled))
    runner.tokenID_processor.draft_token_ids = np.zeros((1, 1), dtype=np.int32)
    wrapped: Any = runner.propose_draft_token_ids  # ffdf3bb5d's signature, as installed over
    assert wrapped(None, None, None, None, None, align_only=True) == "proposed"
    assert calls == []
    runner.propose_draft_token_ids(None, None, None, "sampled", None)
    assert len(calls) == 1 and calls[0][1] == "sampled"


def test_a_dp_dummy_forward_is_not_checked_and_makes_the_next_seqs_new():
    """ATOM's dummy batch (id -1) is not a scheduled batch: no SG010; links start over."""
    batches, runner = _steps("042e8f1c0", "steady-decode-k2")
    dummy = types.SimpleNamespace(req_ids=[-1], is_dummy_run=True)
    with contracts.checking(depth="full"):
        view = install_atom(runner)
        runner.forward(batches[0])
        runner.forward(dummy)
        assert view.tracker is not None
        state = view.tracker.close()
        assert state is not None and state.seq_ids.tolist() == []


@pytest.mark.parametrize("mtp_k", [True, False, 0, -1, 2.0, None])
def test_install_refuses_a_draft_count_that_is_no_count(mtp_k):
    """Booleans are not counts: mtp_k=True is not read as 1."""
    _, runner = _steps("042e8f1c0", "steady-decode-k2")
    runner.drafter.mtp_k = mtp_k
    setattr(runner, "num_spec_tokens", None)  # noqa: B010  (not an attribute of the stand-in)
    expected = ("ModelRunner.drafter.mtp_k is {!r}: specguard needs an integer >= 1 there"
                if mtp_k is not None else
                "cannot read mtp_k from ModelRunner (no drafter.mtp_k or num_spec_tokens)")
    with pytest.raises(UnsupportedEngine, match=re.escape(expected.format(mtp_k))):
        install_atom(runner)
    assert not atom_install.is_installed(runner) and "forward" not in vars(runner)


def test_install_leaves_the_runner_untouched_when_its_sampler_cannot_hold_a_wrapper():
    _, runner = _steps("042e8f1c0", "steady-decode-k2")

    class SlottedSampler:
        __slots__ = ()

        def forward(self, metadata, target_logits, bonus_token_ids):
            return None

    setattr(runner, "rejection_sampler", SlottedSampler())  # noqa: B010  (another type)
    with pytest.raises(UnsupportedEngine, match=re.escape(
            "SlottedSampler keeps no attributes of its own (it has __slots__ and no "
            "__dict__)")):
        install_atom(runner)
    assert {"forward", "postprocess", "propose_draft_token_ids"}.isdisjoint(vars(runner))
    assert not atom_install.is_installed(runner)


def test_wrapped_atom_methods_keep_their_signatures():
    _, runner = _steps("042e8f1c0", "steady-decode-k2")
    names = ("forward", "postprocess", "propose_draft_token_ids")
    before = {name: inspect.signature(getattr(runner, name)) for name in names}
    sampler = inspect.signature(runner.rejection_sampler.forward)
    with atom_install.installed(runner):
        assert "forward" in vars(runner)
        assert {name: inspect.signature(getattr(runner, name)) for name in names} == before
        assert inspect.signature(runner.rejection_sampler.forward) == sampler
