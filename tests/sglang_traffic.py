"""SGLang's objects rebuilt from recorded corpus events, with SGLang's field names.

A corpus event holds what crossed one hand-over of SGLang's v1 ``EAGLEWorker`` (see
``tools/record_corpus/sglang.py``); these functions turn its fields back into objects with
the attributes the SGLang view reads (float tensors, recorded by shape, come back as
zeros of that shape) and hand them to a view.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from specguard.adapters import SglangView, StepTracker
from specguard.adapters.corpus import Corpus


def mode(name: str) -> SimpleNamespace:
    """A ``ForwardMode`` stand-in: the view reads its ``name``."""
    return SimpleNamespace(name=name)


def reqs(req_ids: list[str], finished: list[bool] | None = None,
         chunked: list[int] | None = None) -> list[SimpleNamespace]:
    """``Req`` stand-ins: ``rid``, ``finished()`` and ``is_chunked``."""
    done = finished or [False] * len(req_ids)
    chunks = chunked or [0] * len(req_ids)
    return [SimpleNamespace(rid=rid, finished=lambda f=f: f, is_chunked=c)
            for rid, f, c in zip(req_ids, done, chunks, strict=True)]


def schedule_batch(fields: dict[str, Any]) -> SimpleNamespace:
    """The ``ScheduleBatch`` on entry to ``forward_batch_generation``."""
    batch = SimpleNamespace(reqs=reqs(fields["req_ids"]), forward_mode=mode(fields["forward_mode"]))
    if fields["forward_mode"] == "EXTEND":
        batch.__dict__.update(input_ids=fields["input_ids"], extend_lens=fields["extend_lens"],
                              prefix_lens=fields["prefix_lens"],
                              out_cache_loc=fields["out_cache_loc"])
    else:
        batch.__dict__.update(
            seq_lens=fields["seq_lens"], req_pool_indices=fields["req_pool_indices"],
            spec_info=SimpleNamespace(
                verified_id=fields["verified_id"], topk_index=fields["topk_index"],
                topk_p=np.zeros(fields["topk_p_shape"], dtype=np.float32),
                hidden_states=np.zeros((fields["hidden_states_rows"], 1), dtype=np.float32)))
    return batch


#: What SGLang 0.5.11 renamed in the v1 worker's objects (the corpus keeps 0.5.10's
#: names, so that every release's recordings compare field by field).
RENAMED_IN_0_5_11 = {
    "retrive_index": "retrieve_index", "retrive_next_token": "retrieve_next_token",
    "retrive_next_sibling": "retrieve_next_sibling",
    "accept_length_per_req_cpu": "num_accepted_drafts_per_req_cpu",
    "accept_length_cpu": "num_accepted_drafts_cpu",
}


#: The releases whose live objects carry those names. 0.5.12 renames more, and its
#: ``verify(batch)`` is refused by the installer: its recordings are replayed under
#: 0.5.10's names, as data.
RENAMING_RELEASES = ("0.5.11",)


def _spelled(release: str, fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` under the names ``release``'s own objects give them."""
    if release not in RENAMING_RELEASES:
        return fields
    return {RENAMED_IN_0_5_11.get(name, name): value for name, value in fields.items()}


def feed(view: SglangView, event: str, fields: dict[str, Any],
         release: str = "0.5.10.post1") -> Any:
    """Hand one recorded event to the view, as the installed worker of ``release`` would
    (its objects' attributes under that release's names)."""
    if event == "schedule":
        return view.schedule(schedule_batch(fields))
    if event == "draft_prefill":
        batch = SimpleNamespace(
            reqs=reqs(fields["req_ids"], chunked=fields["is_chunked"]),
            input_ids=fields["input_ids"], extend_lens=fields["extend_lens"],
            prefix_lens=fields["prefix_lens"])
        return view.draft_prefill(batch, fields["next_token_ids"])
    if event == "drafted":
        batch = SimpleNamespace(
            reqs=reqs(fields["req_ids"]), seq_lens=fields["seq_lens"],
            seq_lens_cpu=fields["seq_lens_cpu"],
            spec_info=SimpleNamespace(verified_id=fields["verified_id"],
                                      topk_index=fields["topk_index"]))
        return view.drafted(batch, verify_input(fields, release))
    if event == "verified":
        batch = SimpleNamespace(reqs=reqs(fields["req_ids"], fields["finished"]))
        output = SimpleNamespace(**_spelled(release, {
            "accept_length_per_req_cpu": fields["accept_length_per_req_cpu"],
            "verified_id": fields["verified_id"],
            "draft_input": SimpleNamespace(**_spelled(release, {
                "accept_length_cpu": fields["next_accept_length_cpu"],
                "verified_id": fields["next_verified_id"],
                "hidden_states": np.zeros((fields["next_hidden_rows"], 1),
                                          dtype=np.float32)}))}))
        spec = SimpleNamespace(draft_token=fields["draft_token"], positions=fields["positions"],
                               draft_token_num=fields["draft_token_num"])
        return view.verified(batch, spec, output,
                             SimpleNamespace(out_cache_loc=fields["out_cache_loc"]))
    if event == "draft_extend":
        batch = SimpleNamespace(
            reqs=reqs(fields["req_ids"]), input_ids=fields["input_ids"],
            spec_info=SimpleNamespace(
                positions=fields["positions"], verified_id=fields["verified_id"],
                seq_lens_for_draft_extend_cpu=fields["seq_lens_for_draft_extend_cpu"],
                topk_index=fields["topk_index"]))
        return view.draft_extend(batch)
    raise ValueError(f"unknown SGLang event {event!r}")


def verify_input(fields: dict[str, Any], release: str = "0.5.10.post1") -> SimpleNamespace:
    """The ``EagleVerifyInput`` of a ``drafted`` event, as ``release`` names its fields."""
    return SimpleNamespace(**_spelled(release, {name: fields[name] for name in (
        "draft_token", "positions", "retrive_index", "retrive_next_token",
        "retrive_next_sibling", "spec_steps", "topk", "draft_token_num")}))


def view_of(corpus: Corpus, **options: Any) -> SglangView:
    """A view of the corpus's configuration, with a step tracker."""
    config = corpus.config
    settings: dict[str, Any] = dict(
        spec_steps=config["spec_steps"], vocab_size=config["vocab_size"],
        topk=config["topk"], num_slots=config["num_slots"],
        max_model_len=config["max_model_len"], tracker=StepTracker())
    return SglangView(**{**settings, **options})
