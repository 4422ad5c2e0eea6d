"""install_sglang / uninstall_sglang on workers with the real releases' method signatures
(recorded from SGLang's sources with ast, tests/adapters/data/sglang_signatures.json),
driven by SGLang's own recorded traffic."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from sglang_traffic import reqs, schedule_batch, verify_input

from specguard import contracts
from specguard.adapters import (
    SglangView,
    UnsupportedEngine,
    install_sglang,
    sglang_installed,
    uninstall_sglang,
)
from specguard.adapters.corpus import corpus_files, read_corpus
from specguard.adapters.engines.sglang.install import METHODS, installation_of

SIGNATURES = json.loads((Path(__file__).parent / "data" / "sglang_signatures.json")
                        .read_text())["releases"]
CORPUS = Path(__file__).parents[1] / "conformance" / "corpus" / "sglang" / "0.5.10.post1"


def _worker_class(methods: dict[str, list[str] | None], name: str = "EAGLEWorker") -> type:
    """A class whose methods have exactly ``methods``' parameters; each returns what the
    test queued for it (``self.answers[name]``) and logs its call."""
    body: dict[str, Any] = {}
    for method, parameters in methods.items():
        if parameters is None:
            continue
        listed = ", ".join(["self", *parameters])
        source = (f"def {method}({listed}):\n"
                  f"    self.calls.append({method!r})\n"
                  f"    return self.answers.pop({method!r}, None)\n")
        namespace: dict[str, Any] = {}
        exec(source, namespace)  # the signature is the recorded one, defaults aside
        body[method] = namespace[method]
    return type(name, (), body)


def _worker(release: str = "0.5.10.post1", cls_name: str = "EAGLEWorker",
            **config: Any) -> Any:
    worker = _worker_class(SIGNATURES[release][cls_name], cls_name)()
    settings = dict(topk=1, speculative_num_steps=3, speculative_num_draft_tokens=4,
                    page_size=1, token_to_kv_pool_allocator=SimpleNamespace(size=4096),
                    target_worker=SimpleNamespace(model_runner=SimpleNamespace(
                        model_config=SimpleNamespace(vocab_size=1000, context_len=512))))
    settings.update(config)
    worker.__dict__.update(settings, calls=[], answers={})
    return worker


def test_the_recorded_signatures_are_what_install_reads():
    """The installer's own table is SGLang 0.5.10.post1's v1 worker, as recorded."""
    assert {name: list(params) for name, params in METHODS.items()} == \
        SIGNATURES["0.5.10.post1"]["EAGLEWorker"]


def test_the_v1_worker_of_0_5_11_installs_and_0_5_12s_verify_is_refused():
    """0.5.11's v1 worker has 0.5.10's signatures (its objects rename fields, which the
    view reads under both names); 0.5.12's ``verify(batch)`` no longer hands over the
    verify input specguard reads, and is refused naming it, the worker untouched."""
    installation = install_sglang(_worker("0.5.11"))
    assert installation.view.mtp_k == 3
    worker = _worker("0.5.12")
    with pytest.raises(UnsupportedEngine) as refused:
        install_sglang(worker)
    assert str(refused.value).startswith(
        "EAGLEWorker.verify() takes (batch); specguard reads SGLang 0.5.10's "
        "(batch, spec_info)")
    assert not set(METHODS) & set(vars(worker))


def test_install_wraps_the_five_hand_overs_and_uninstall_restores_them():
    worker = _worker()
    before = {name: getattr(worker, name) for name in METHODS}
    installation = install_sglang(worker)
    assert installation_of(worker) is installation
    assert set(vars(worker)) >= set(METHODS)
    for name in METHODS:  # each wrapper keeps the original's signature
        assert inspect.signature(getattr(worker, name)) == inspect.signature(before[name])
    view = installation.view
    assert (view.mtp_k, view.vocab_size, view.num_slots, view.max_model_len) == \
        (3, 1000, 4097, 512)
    uninstall_sglang(worker)
    assert installation_of(worker) is None
    assert {name: getattr(worker, name) for name in METHODS} == before
    assert not set(vars(worker)) & set(METHODS)


def _drive(worker: Any, event: str, fields: dict[str, Any]) -> None:
    """Call the installed worker's method of one recorded hand-over; the method returns
    what SGLang returned there."""
    if event == "schedule":
        worker.forward_batch_generation(schedule_batch(fields))
    elif event == "draft_prefill":
        batch = SimpleNamespace(reqs=reqs(fields["req_ids"], chunked=fields["is_chunked"]),
                                input_ids=fields["input_ids"],
                                extend_lens=fields["extend_lens"],
                                prefix_lens=fields["prefix_lens"])
        worker.forward_draft_extend(batch, None, fields["next_token_ids"], None, None)
    elif event == "drafted":
        batch = SimpleNamespace(
            reqs=reqs(fields["req_ids"]), seq_lens=fields["seq_lens"],
            seq_lens_cpu=fields["seq_lens_cpu"], forward_mode=SimpleNamespace(name="DECODE"),
            spec_info=SimpleNamespace(verified_id=fields["verified_id"],
                                      topk_index=fields["topk_index"]))
        worker.answers["draft"] = verify_input(fields)
        worker.draft(batch)
    elif event == "verified":
        batch = SimpleNamespace(reqs=reqs(fields["req_ids"], fields["finished"]),
                                forward_mode=SimpleNamespace(name="TARGET_VERIFY"))
        output = SimpleNamespace(
            accept_length_per_req_cpu=fields["accept_length_per_req_cpu"],
            verified_id=fields["verified_id"], draft_input=SimpleNamespace(
                accept_length_cpu=fields["next_accept_length_cpu"],
                verified_id=fields["next_verified_id"],
                hidden_states=np.zeros((fields["next_hidden_rows"], 1), np.float32)))
        spec = SimpleNamespace(draft_token=fields["draft_token"], positions=fields["positions"],
                               draft_token_num=fields["draft_token_num"])
        worker.answers["verify"] = (None, output,
                                    SimpleNamespace(out_cache_loc=fields["out_cache_loc"]),
                                    False)
        worker.verify(batch, spec)
    elif event == "draft_extend":
        batch = SimpleNamespace(
            reqs=reqs(fields["req_ids"]), input_ids=fields["input_ids"],
            forward_mode=SimpleNamespace(name="DECODE"), spec_info=SimpleNamespace(
                positions=fields["positions"], verified_id=fields["verified_id"],
                seq_lens_for_draft_extend_cpu=fields["seq_lens_for_draft_extend_cpu"],
                topk_index=fields["topk_index"]))
        worker.forward_draft_extend_after_decode(batch)


@pytest.mark.parametrize("path", sorted(corpus_files(CORPUS)), ids=lambda p: p.stem)
def test_an_installed_worker_checks_sglangs_recorded_traffic(path):
    """Through the wrapped methods, SGLang's own traffic gives what the view gives:
    nothing for valid runs, exactly the recorded rules for buggy ones (default depth)."""
    corpus = read_corpus(path)
    worker = _worker(speculative_num_steps=corpus.config["spec_steps"],
                     speculative_num_draft_tokens=int(corpus.config["spec_steps"] or 0) + 1)
    found: list[contracts.Violation] = []
    with sglang_installed(worker), contracts.checking(mode="strict"):
        for event in corpus.events:
            try:
                _drive(worker, event.event, event.values())
            except contracts.ContractViolation as error:
                found += error.violations
    assert {v.code for v in found} == {e.code for e in corpus.expect}
    assert installation_of(worker) is None


@pytest.mark.parametrize("release, cls_name", [
    ("0.5.10.post1", "EAGLEWorkerV2"), ("0.5.23", "EAGLEWorkerV2")])
def test_the_overlap_workers_are_refused_untouched(release, cls_name):
    worker = _worker(release, cls_name)
    before = dict(vars(worker))
    with pytest.raises(UnsupportedEngine,
                       match=r"EAGLEWorkerV2 has no method (draft|forward_draft_extend)\(\)"):
        install_sglang(worker)
    assert vars(worker) == before


def test_a_method_of_another_shape_is_refused_before_anything_is_wrapped():
    methods = dict(SIGNATURES["0.5.10.post1"]["EAGLEWorker"])
    methods["verify"] = ["batch", "spec_info", "pp_proxy_tensors"]
    worker = _worker_class(methods)()
    worker.__dict__.update(topk=1, speculative_num_steps=3, speculative_num_draft_tokens=4)
    with pytest.raises(UnsupportedEngine, match=r"verify\(\) takes \(batch, spec_info, "
                       r"pp_proxy_tensors\); specguard reads SGLang 0.5.10's \(batch, "
                       r"spec_info\)"):
        install_sglang(worker)
    assert not set(vars(worker)) & set(METHODS)


@pytest.mark.parametrize("config, message", [
    ({"topk": 4}, "topk is 4: specguard checks SGLang's MTP path"),
    ({"speculative_num_draft_tokens": 8}, "speculative_num_draft_tokens is 8 with topk=1"),
    ({"speculative_num_steps": None}, "speculative_num_steps is None"),
    ({"target_worker": None, "model_config": None}, "model_config.vocab_size is None"),
])
def test_a_configuration_outside_mtp_is_refused(config, message):
    worker = _worker(**config)
    with pytest.raises(UnsupportedEngine, match=message.replace("(", r"\(")):
        install_sglang(worker)
    assert installation_of(worker) is None and not set(vars(worker)) & set(METHODS)


def test_installing_twice_is_refused_and_a_given_view_is_used():
    worker = _worker()
    view = SglangView(spec_steps=3, vocab_size=1000)
    with sglang_installed(worker, view=view) as installation:
        assert installation.view is view
        with pytest.raises(UnsupportedEngine, match="already installed"):
            install_sglang(worker)
    uninstall_sglang(worker)  # a second uninstall leaves the worker as it is
    assert not set(vars(worker)) & set(METHODS)


def test_idle_batches_are_passed_through_unchecked():
    """A data-parallel IDLE batch has no rows: draft, verify and draft extend of it are
    not read (their outputs are SGLang's empty idle inputs)."""
    worker = _worker()
    with sglang_installed(worker), contracts.checking(mode="strict", depth="full"):
        idle = SimpleNamespace(reqs=[], forward_mode=SimpleNamespace(name="IDLE"))
        worker.draft(idle)
        worker.answers["verify"] = (None, SimpleNamespace(), None, False)
        worker.verify(idle, SimpleNamespace())
        worker.forward_draft_extend_after_decode(idle)
    assert worker.calls == ["draft", "verify", "forward_draft_extend_after_decode"]
