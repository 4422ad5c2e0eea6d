"""Record ATOM's scheduler → runner traffic into specguard conformance corpus files.

Usage, from the repository root, with a checkout of ROCm/ATOM that you fetched yourself::

    git clone https://github.com/ROCm/ATOM atom && git -C atom checkout 042e8f1c0
    python tools/record_corpus/atom.py atom   # writes tests/conformance/corpus/atom/042e8f1c0/
    python tools/record_corpus/atom.py atom --layout pre-1771 --out corpus-elsewhere

What runs is ATOM's own ``Scheduler``, ``ScheduledBatch``, ``Sequence`` and
``ScheduledBatchOutput``, imported from the checkout on the CPU. Modules that need a GPU,
a tokenizer or a network (``aiter``, ``transformers``, ``zmq``, ``msgspec``, ``xxhash``,
``atom.config``) are replaced in ``sys.modules`` by small stand-ins before the import,
which is what ATOM's own unit tests did before ROCm/ATOM#1771. Nothing of ATOM is copied
here, and nothing of it is written to the corpus: only the traffic.

The model runner is not imported (it needs a GPU). :class:`Runner` does, in numpy, what
``ModelRunner.forward`` does with a batch's host data, as read from the runner at each
version: deferred output (the host sees a step's sampled tokens, drafts and MTP status one
step late), seqs that were in the previous forward fed from device buffers by their
previous row, the others from ``scheduled_tokens`` and their host draft row at their
batch position, and ``prepare_input_ids``' layouts (``[deferred | new]`` blocks before
#1771, per-span addressing from #1771, where a batch of middle chunks also returns
before postprocess). The target model is an oracle: every position of every seq has a
true token, drafts match it or miss by a fixed hash, the verifier accepts the matching
prefix. The runner checks what it feeds against that truth, and those checks, not
specguard, decide what each corpus file expects:

* an ``IndexError`` reading a host draft row (the seed of ROCm/ATOM#1444) expects SG101
  naming the first decode seq that had no host drafts;
* a prefill feeding a token other than the true one (a recompute re-feeding
  placeholders) expects SG608 naming that seq;
* a decode span starting past the last position whose KV was written (a recompute that
  stopped short) expects SG601 naming that seq, and ends the recording;
* a block table shorter than the context attention reads expects SG110 naming that seq,
  and ends the recording;
* anything else the oracle sees stops the recording with an error.

The target samples the true token past the prompt; at the end of a middle prefill chunk
(a prompt position) it samples a guess that is not the prompt's token, as a real model
mostly does, and which ATOM's scheduler drops. A P/D consumer's request comes with its
first token and the drafts the remote prefill hands over (``kv_transfer_params``:
``first_token_id``, ``draft_token_ids``; ``Scenario.remote_drafts`` of them).

Events, in order, with ATOM's own field names: ``schedule`` (the batch's fields as the
runner receives them, plus ``forwarded``: whether the engine runs it), ``schedule_none``
(``schedule()`` returned None), ``verified`` (the rejection sampler's ``sampled_tokens``
``[bs, k+1]`` and ``num_bonus_tokens`` ``[bs]``), ``drafted`` (the MTP head's
``draft_token_ids`` ``[bs, k]`` and the ``next_token_ids`` ``[bs]`` that
``propose_draft_token_ids`` receives: the token each seq sampled in the forward),
``preempted`` (ids the scheduler preempted, for reading only) and ``crash`` (the runner
raised; the recording stops).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib
import importlib.machinery
import importlib.util
import logging
import subprocess
import sys
import types
from itertools import count
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import numpy as np

from specguard.adapters.corpus import Corpus, Event, Expected, encode_tree, write_corpus

VOCAB = 1000
EOS = 2
BLOCK_SIZE = 8
LAYOUTS = ("pr1771", "pre-1771")


# --- importing ATOM's scheduler on the CPU -----------------------------------------------


def _module(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, loader=None)
    for key, value in attrs.items():
        setattr(module, key, value)
    sys.modules[name] = module
    return module


class _Hash64:
    """Stands in for ``xxhash.xxh64``: a stable 64-bit digest (prefix-cache keys)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._digest = hashlib.sha256()

    def update(self, data: Any) -> None:
        self._digest.update(bytes(data))

    def intdigest(self) -> int:
        return int.from_bytes(self._digest.digest()[:8], "little")


class _Record:
    """A plain object with keyword attributes (config classes the scheduler names)."""

    interleave_size = 1

    def __init__(self, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)


class _Struct:
    """Stands in for ``msgspec.Struct`` (KV event records)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        pass

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)


def load_atom(root: Path) -> types.SimpleNamespace:
    """ATOM's scheduler, sequence and sampling-params modules, imported from ``root``."""
    for name in [n for n in sys.modules if n == "atom" or n.startswith("atom.")]:
        del sys.modules[name]
    sys.path.insert(0, str(root))
    package = types.ModuleType("atom")
    package.__path__ = [str(root / "atom")]
    sys.modules["atom"] = package  # the package __init__ starts an engine: skip it
    config = _module("atom.config", get_current_atom_config=lambda: None,
                     set_current_atom_config=lambda config: None)
    for name in ("Config", "KVCacheTensor", "ParallelConfig", "CompilationLevel",
                 "SpeculativeConfig", "DCPConfig"):
        setattr(config, name, type(name, (_Record,), {}))
    _module("atom.utils.forward_context", get_kvconnector=lambda *args, **kwargs: None)
    _module("atom.utils.custom_register", direct_register_custom_op=lambda **kwargs: None)
    missing = {name for name in ("zmq", "msgspec", "xxhash", "transformers", "psutil",
                                 "setproctitle")
               if name not in sys.modules and importlib.util.find_spec(name) is None}
    for name in ("zmq", "psutil", "setproctitle"):
        if name in missing:
            sys.modules[name] = MagicMock()
    if "zmq" in missing:
        sys.modules["zmq.asyncio"] = MagicMock()
    if "msgspec" in missing:
        msgspec = _module("msgspec", Struct=_Struct, field=lambda *args, **kwargs: None)
        msgspec.msgpack = MagicMock()
        sys.modules["msgspec.msgpack"] = msgspec.msgpack
    if "xxhash" in missing:
        _module("xxhash", xxh64=_Hash64, xxh3_64=_Hash64)
    if "transformers" in missing:
        _module("transformers", AutoConfig=MagicMock(), AutoTokenizer=MagicMock(),
                PretrainedConfig=type("PretrainedConfig", (), {}),
                PreTrainedTokenizerBase=type("PreTrainedTokenizerBase", (), {}))
    logging.getLogger("atom").setLevel(logging.WARNING)
    return types.SimpleNamespace(
        scheduler=importlib.import_module("atom.model_engine.scheduler"),
        sequence=importlib.import_module("atom.model_engine.sequence"),
        sampling=importlib.import_module("atom.sampling_params"))


def runner_layout(root: Path) -> str:
    """``pr1771`` when the checkout's runner addresses decode spans one by one."""
    source = (root / "atom" / "model_engine" / "model_runner.py").read_text(encoding="utf-8")
    return "pr1771" if "fill_deferred_decode_ids" in source else "pre-1771"


def _git(root: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                         text=True)
    return out.stdout.strip()


def engine_version(root: Path) -> str:
    """The checkout's commit, abbreviated to 9 hex digits."""
    return _git(root, "rev-parse", "--short=9", "HEAD")


# --- the oracle model and the runner -----------------------------------------------------


def true_token(prompts: dict[int, list[int]], seq: int, position: int) -> int:
    """The token at ``position`` of ``seq``: its prompt, then a fixed pseudo-random text."""
    prompt = prompts[seq]
    if position < len(prompt):
        return prompt[position]
    return 3 + (seq * 7919 + position * 104729) % (VOCAB - 3)


def sampled_token(prompts: dict[int, list[int]], seq: int, position: int) -> int:
    """What the target samples at ``position`` from the tokens before it: the true token
    past the prompt; inside the prompt (the end of a middle prefill chunk) a guess that
    misses the prompt's own token, which the scheduler discards."""
    token = true_token(prompts, seq, position)
    if position < len(prompts[seq]):
        return 3 + (token - 3 + 7) % (VOCAB - 3)
    return token


def draft_token(prompts: dict[int, list[int]], seq: int, position: int) -> int:
    """The drafter's guess at ``position``: the true token, except one position in four."""
    token = true_token(prompts, seq, position)
    if (seq * 31 + position * 17) % 4 == 0:
        return 3 + (token - 3 + 1) % (VOCAB - 3)
    return token


@dataclasses.dataclass
class Finding:
    """Something the oracle saw the runner do wrong, with the batch it happened in."""

    step: int
    kind: str
    seq: int
    position: int
    detail: str


class Runner:
    """What ATOM's ``ModelRunner.forward`` does with a batch's host data, in numpy."""

    def __init__(self, atom: types.SimpleNamespace, layout: str, mtp_k: int,
                 prompts: dict[int, list[int]], block_size: int) -> None:
        self.atom, self.layout, self.k = atom, layout, mtp_k
        self.prompts, self.block_size = prompts, block_size
        self.events: list[Event] = []
        self.findings: list[Finding] = []
        self.step = 0
        self.prev_ids: list[int] | None = None       # the previous forward's req_ids
        self.prev_was_prefill = False
        self.anchors = np.zeros(0, dtype=np.int32)  # device: next anchor per prev row
        self.drafts: np.ndarray | None = None         # device: drafts per prev row
        self.host_tokens: list[np.ndarray] = []       # host copies, one step late
        self.host_drafts: list[np.ndarray] = []
        self.host_status: list[tuple[np.ndarray, np.ndarray]] = []
        self.rejected: np.ndarray | None = None
        self.bonus: np.ndarray | None = None
        self.computed: dict[int, int] = {}            # next position without KV, per seq

    def record(self, name: str, **fields: Any) -> None:
        self.events.append(Event(event=name, fields={
            key: encode_tree(value) for key, value in fields.items()}))

    def _host_rows(self, batch: Any, index: Any, readers: list[int]) -> np.ndarray:
        rows = batch.scheduled_spec_decode_tokens
        try:
            return np.asarray(rows[index])
        except IndexError as error:
            self.findings.append(Finding(self.step, "IndexError", batch.req_ids[readers[-1]],
                                         readers[-1], str(error)))
            raise

    def _feed(self, batch: Any) -> tuple[np.ndarray, list[int]]:
        """The token stream fed to the model (in buffer order) and each seq's context."""
        q = self.k + 1
        tokens = batch.scheduled_tokens
        produces = batch.produces_output() if hasattr(batch, "produces_output") else True
        if self.layout == "pre-1771" or produces:  # the MTP status of the last output
            self.rejected, self.bonus = (self.host_status.pop(0) if self.host_status
                                         else (None, None))
        if batch.total_seqs_num_prefill > 0:
            return np.array(tokens[: batch.total_tokens_num_prefill]), list(batch.context_lens)
        ids = list(batch.req_ids)
        n = len(ids)
        rejected = batch.num_rejected  # the runner overwrites deferred rows in place
        if self.prev_ids is None:  # P/D first decode: everything from the host
            fed = np.array(tokens[: n * q])
        else:
            where = {seq: row for row, seq in enumerate(self.prev_ids)}
            deferred = [i for i, seq in enumerate(ids) if seq in where]
            rows = np.asarray([where[ids[i]] for i in deferred], dtype=np.intp)
            new = [i for i, seq in enumerate(ids) if seq not in where]
            if deferred and self.rejected is not None:
                rejected[deferred] = self.rejected[rows]
                batch.num_bonus[deferred] = self.bonus[rows]
            device = self.anchors[rows][:, None]
            if self.drafts is not None:
                device = np.concatenate([device, self.drafts[rows]], axis=1)
            if self.layout == "pr1771":
                spans = np.array(tokens[: n * q]).reshape(n, q)
                if new:
                    spans[new, 1:] = self._host_rows(batch, np.asarray(new), new)
                spans[deferred, : device.shape[1]] = device
                fed = spans.reshape(-1)
            elif not new and len(deferred) == len(self.prev_ids) \
                    and rows.tolist() == deferred:
                fed = device.reshape(-1)  # the same batch as before
            else:
                front = (self.prev_was_prefill and new == list(range(len(new)))
                         and deferred == list(range(len(new), n)))
                fresh = np.zeros((0, q), dtype=np.int32)
                if new and front:
                    fresh = np.array(tokens[: len(new) * q]).reshape(len(new), q)
                    fresh[:, 1:] = self._host_rows(batch, slice(0, len(new)), new)
                elif new:
                    at = (np.asarray(new)[:, None] * q + np.arange(q)).reshape(-1)
                    fresh = np.array(tokens[at]).reshape(len(new), q)
                    fresh[:, 1:] = self._host_rows(batch, np.asarray(new), new)
                blocks = [fresh.reshape(-1), device.reshape(-1)]
                fed = np.concatenate(blocks if front else blocks[::-1])
        return fed, [int(c) - int(r) for c, r in zip(batch.context_lens, rejected, strict=True)]

    def _check(self, batch: Any, fed: np.ndarray, context: list[int]) -> list[int]:
        """Compare what is fed with the truth; return each seq's first fed position."""
        ids, q = list(batch.req_ids), self.k + 1
        counts = [int(c) for c in batch.num_scheduled_tokens]
        starts = [c - n for c, n in zip(context, counts, strict=True)]
        for i, seq in enumerate(ids):
            # Attention reads cdiv(context, block_size) blocks of the table: a short one
            # sends the span's KV to blocks the seq does not own.
            if len(batch.block_tables) == len(ids) and \
                    len(batch.block_tables[i]) * self.block_size < context[i]:
                self.findings.append(Finding(
                    self.step, "short-table", seq, i,
                    f"{len(batch.block_tables[i])} blocks for a context of {context[i]}"))
        prefill = batch.total_seqs_num_prefill > 0
        for i, seq in enumerate(ids):
            known = self.computed.get(seq, 0)
            # A decode span attends to every earlier position: their KV must have been
            # written (a prefill may start later: a prefix-cache hit supplies its KV).
            if not prefill and starts[i] > known:
                self.findings.append(Finding(self.step, "kv-gap", seq, i,
                                             f"starts at {starts[i]}, KV written up to {known}"))
            self.computed[seq] = starts[i] + counts[i] if prefill else starts[i] + 1
        offset = 0
        for i, seq in enumerate(ids):
            span = fed[offset: offset + counts[i]]
            checked = span if batch.total_seqs_num_prefill > 0 else span[:1]
            for j, token in enumerate(checked.tolist()):
                truth = true_token(self.prompts, seq, starts[i] + j)
                if token != truth:
                    kind = "prefill-misfeed" if batch.total_seqs_num_prefill else "anchor-misfeed"
                    self.findings.append(Finding(self.step, kind, seq, i,
                                                 f"fed {token} at {starts[i] + j}, true {truth}"))
                    break
            offset += counts[i] if batch.total_seqs_num_prefill else q
        return starts

    def forward(self, batch: Any) -> Any:
        """One ``ModelRunner.forward``: returns ATOM's ``ScheduledBatchOutput``."""
        k, q = self.k, self.k + 1
        ids = list(batch.req_ids)
        n = len(ids)
        fed, context = self._feed(batch)
        starts = self._check(batch, fed, context)
        prefill = batch.total_seqs_num_prefill > 0
        produces = batch.produces_output() if hasattr(batch, "produces_output") else True
        output = self.atom.scheduler.ScheduledBatchOutput
        if self.layout == "pr1771" and not produces:  # middle chunks: no postprocess
            return output(req_ids=ids, token_ids=[], num_rejected=None, num_bonus=None,
                          draft_token_ids=None)
        if prefill:
            sampled: np.ndarray = np.asarray(
                [sampled_token(self.prompts, seq, context[i]) for i, seq in enumerate(ids)],
                dtype=np.int32)
            accepted = np.zeros(n, dtype=np.int32)
            anchors, after = sampled, np.asarray(context)
            rejected = np.zeros(n, dtype=np.int32)
        else:
            sampled = np.full((n, q), -1, dtype=np.int32)
            accepted = np.zeros(n, dtype=np.int32)
            for i, seq in enumerate(ids):
                drafts = fed[i * q + 1:(i + 1) * q].tolist()
                while accepted[i] < k and drafts[accepted[i]] == true_token(
                        self.prompts, seq, starts[i] + 1 + int(accepted[i])):
                    accepted[i] += 1
                sampled[i, : accepted[i] + 1] = [true_token(self.prompts, seq, starts[i] + 1 + j)
                                                 for j in range(accepted[i] + 1)]
            self.record("verified", sampled_tokens=sampled, num_bonus_tokens=accepted)
            for i, seq in enumerate(ids):
                self.computed[seq] = starts[i] + 1 + int(accepted[i])
            anchors = sampled[np.arange(n), accepted]
            after = np.asarray(starts) + 1 + accepted
            rejected = (k - accepted).astype(np.int32)
        # prepare_sampled_ids: the host receives the previous forward's rows
        delivered = self.host_tokens.pop(0) if self.host_tokens else None
        self.host_tokens.append(sampled.copy())
        out_ids: list[int] = []
        out_tokens: list[tuple[int, ...]] = []
        if self.prev_ids is not None and delivered is not None:
            out_ids = list(self.prev_ids)
            for row in delivered.tolist():
                row = row if isinstance(row, list) else [row]
                out_tokens.append(tuple(row[: row.index(-1)] if -1 in row else row))
        had_previous = self.prev_ids is not None
        status = (self.rejected, self.bonus)
        self.host_status.append((rejected, accepted.copy()))
        self.prev_ids, self.prev_was_prefill = ids, prefill
        self.anchors = np.asarray(anchors, dtype=np.int32)
        proposals = np.asarray([[draft_token(self.prompts, seq, int(after[i]) + 1 + j)
                                 for j in range(k)] for i, seq in enumerate(ids)],
                               dtype=np.int32).reshape(n, k)
        # propose_draft_token_ids(batch, ..., next_token_ids, ...): the token each row
        # sampled last, the MTP head's input (a prefill's sampled token, a decode's anchor)
        self.record("drafted", draft_token_ids=proposals,
                    next_token_ids=np.asarray(anchors, dtype=np.int32))
        self.drafts = proposals
        host_drafts = self.host_drafts.pop(0) if self.host_drafts else np.zeros(0, np.int32)
        self.host_drafts.append(proposals.copy())
        return output(req_ids=out_ids, token_ids=out_tokens,
                      draft_token_ids=host_drafts if had_previous else np.zeros(0, np.int32),
                      is_deferred_out=True, num_rejected=status[0], num_bonus=status[1])


# --- scenarios ---------------------------------------------------------------------------


def prompt(seed: int, length: int) -> list[int]:
    """A deterministic prompt (equal seeds share their prefix)."""
    return [3 + (seed * 97 + i * 13) % 990 for i in range(length)]


class _Veto:
    """A prefill delayer (ATOM's cross-DP prefill gate) that vetoes the given calls."""

    def __init__(self, calls: set[int]) -> None:
        self.calls, self.seen = calls, 0

    def should_allow_prefill(self, *args: Any, **kwargs: Any) -> bool:
        self.seen += 1
        return self.seen - 1 not in self.calls


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One recording: who arrives when, the engine's limits, and how long to run."""

    description: str
    mtp_k: int
    arrivals: dict[int, list[list[int]]]
    steps: int
    limits: dict[str, Any] = dataclasses.field(default_factory=dict)
    veto: frozenset[int] = frozenset()
    remote: dict[int, list[list[int]]] = dataclasses.field(default_factory=dict)
    max_tokens: dict[int, int] = dataclasses.field(default_factory=dict)
    """Output budget by seq id (64 otherwise): a seq that finishes frees its batch slot."""
    remote_drafts: int | None = None
    """Drafts a remote prefill hands over with its first token (mtp_k when None)."""
    block_size: int = BLOCK_SIZE
    """``kv_cache_block_size``."""


SCENARIOS: dict[str, Scenario] = {
    "first-decode-no-drafts": Scenario(
        "Two prompts prefilled together, then decode: on the first decode nobody has host "
        "drafts yet (before #1771 the host rows are np.asarray([]), 1-D and empty).",
        3, {0: [prompt(1, 6), prompt(2, 5)]}, 5),
    "chunked-prefill": Scenario(
        "A 30-token prompt prefilled in chunks of the 12-token budget while a short seq "
        "waits to decode, then both decode.", 2, {0: [prompt(3, 5)], 1: [prompt(4, 30)]}, 8,
        {"max_num_batched_tokens": 12}),
    "new-and-deferred": Scenario(
        "Three seqs, a 6-token budget (two decode seqs a step): when the first finishes, the "
        "next decode batch holds a "
        "seq that was in the previous forward (fed from the device) and one that was not "
        "(fed from the host), [deferred | new].",
        2, {0: [prompt(5, 4), prompt(6, 4)], 1: [prompt(7, 4)]}, 9,
        {"max_num_batched_tokens": 6}, max_tokens={0: 5}),
    "preempt-recompute": Scenario(
        "KV blocks run out: a seq that was not in the previous forward (the 6-token budget "
        "decodes two seqs a step) is preempted and recomputed, in chunks, as a prefill of its "
        "prompt and delivered output.",
        2, {0: [prompt(8, 6), prompt(9, 6), prompt(10, 12)]}, 12,
        {"num_kvcache_blocks": 8, "max_num_batched_tokens": 6}),
    "preempt-placeholder-history": Scenario(
        "KV blocks run out: a seq that was in the previous forward is preempted. preempt() "
        "strips mtp_k + num_rejected tokens, the count before postprocess appended the "
        "step's placeholders, so placeholders stay in its history and the recompute feeds "
        "them as real tokens.",
        2, {0: [prompt(8, 6), prompt(9, 6), prompt(10, 5)]}, 7,
        {"num_kvcache_blocks": 4, "max_num_seqs": 2}),
    "preempt-chunked-recompute": Scenario(
        "KV blocks run out while one seq decodes alone: it is preempted and recomputed with "
        "a 6-token budget. The first chunk covers its prompt, so postprocess (comparing with "
        "num_prompt_tokens) ends the prefill there, and it resumes decoding at its old "
        "position over KV that was never recomputed.",
        2, {0: [prompt(8, 6), prompt(9, 6), prompt(10, 5)]}, 14,
        {"num_kvcache_blocks": 3, "max_num_batched_tokens": 6}),
    "empty-schedule": Scenario(
        "schedule() returns None (nothing to run), then, with prefill vetoed while the only "
        "seq is mid-prefill, a batch with no seqs that the engine never forwards.",
        2, {1: [prompt(10, 20)]}, 6, {"max_num_batched_tokens": 8}, frozenset({2})),
    "prefix-cache-hit": Scenario(
        "Prefix caching: a prompt sharing the first one's first two blocks, then the first "
        "prompt again (a full hit: every block but the last, which ATOM always computes).",
        2, {0: [prompt(11, 25)], 3: [prompt(11, 16) + prompt(12, 6)], 5: [prompt(11, 25)]},
        9, {"enable_prefix_caching": True}),
    "partial-prefill-requeue": Scenario(
        "The seed's trigger: a partial prefill skipped under a prefill veto is re-queued "
        "(at the head before #1444, at the tail after), finishes, and decodes with seqs that "
        "have host drafts.",
        3, {0: [prompt(13, 4), prompt(14, 4)], 3: [prompt(15, 20)]}, 9,
        {"max_num_batched_tokens": 12}, frozenset({4})),
    "middle-chunks-between-decodes": Scenario(
        "Decode steps interleave with the middle chunks of a long prompt (prefill vetoed on "
        "alternate steps); from #1771 a forward of middle chunks skips postprocess, so it is "
        "not the runner's previous forward.",
        2, {0: [prompt(50, 5), prompt(51, 6)], 2: [prompt(52, 30)]}, 10,
        {"max_num_batched_tokens": 12}, frozenset({3, 5})),
    "pd-first-decode": Scenario(
        "P/D consumer: a seq whose prompt KV, first token and drafts come from a remote "
        "prefill decodes with no local prefill, then joins a seq prefilled here.",
        2, {2: [prompt(40, 5)]}, 6, remote={0: [prompt(41, 7)]}),
    "pd-first-decode-short-handover": Scenario(
        "P/D consumer, mtp_k=3: the remote prefill hands over its first token and two "
        "drafts. The seq is the runner's first forward (prev_batch is None), so "
        "prepare_input_ids feeds scheduled_tokens as they are, the last 4 of the seq's "
        "tokens (its last prompt token, the first token, the two drafts), and reads no host "
        "draft row, whatever scheduled_spec_decode_tokens holds (one row of 2 before #1771). "
        "Then it joins a seq prefilled here.",
        3, {2: [prompt(43, 5)]}, 6, remote={0: [prompt(42, 7)]}, remote_drafts=2),
    "pd-remote-joins-running": Scenario(
        "P/D consumer that prefilled a seq of its own first: a remote seq's first decode, "
        "with the drafts the remote prefill handed over, joins the running decode. The seq "
        "is new to this runner, and its drafts are real: "
        "is_first_decode_without_local_prefill says whose they are.",
        2, {0: [prompt(44, 5)]}, 7, remote={2: [prompt(45, 7)]}),
    "middle-chunks-skip-forward": Scenario(
        "Chunked prefill with a 72-token budget: a short prompt and the first chunk of a "
        "150-token one share a forward, the next chunk runs alone (from #1771 a batch of "
        "middle chunks only skips postprocess, so it is not the runner's previous "
        "forward), then the last chunk, then both decode.",
        2, {0: [prompt(60, 8), prompt(61, 150)]}, 7, {"max_num_batched_tokens": 72}),
    "preempt-after-prefill": Scenario(
        "KV blocks run out right after two prompts are prefilled together: the second is "
        "preempted before its first decode. postprocess had appended the prefill step's "
        "placeholders (mtp_k + 1 EOS) and preempt() strips mtp_k + num_rejected, so one "
        "EOS stays where the token sampled at prefill belongs, and the recompute feeds it; "
        "the same happens again on the next preemption.",
        2, {0: [prompt(8, 6), prompt(9, 6)]}, 7,
        {"num_kvcache_blocks": 3, "max_num_seqs": 2}),
    "block-size-4-k4": Scenario(
        "Block size 4 and mtp_k=4: two seqs decode. BlockManager.may_append(seq, mtp_k + 1) "
        "allocates only when 0 < len(seq) % block_size <= mtp_k + 1; a step that accepts "
        "enough drafts to land len(seq) on a block boundary (len % 4 == 0) after crossing "
        "one gets no new block, since mtp_k + 1 >= block_size lets one step advance a whole "
        "block, and the table stops one block short of the context.",
        4, {0: [prompt(24, 5)], 1: [prompt(34, 7)]}, 8, block_size=4),
    **{f"steady-decode-k{k}": Scenario(
        f"mtp_k={k}: two seqs prefilled one after the other, then the same batch decodes "
        "every step.", k, {0: [prompt(20 + k, 5)], 1: [prompt(30 + k, 7)]}, 6)
       for k in (1, 2, 3, 4)},
}


def _config(mtp_k: int, limits: dict[str, Any], block_size: int) -> _Record:
    spec = _Record(num_speculative_tokens=mtp_k, method="mtp", model=None)
    spec.use_dspark = lambda: False  # type: ignore[attr-defined]
    hf = _Record(architectures=["LlamaForCausalLM"], sliding_window=128, model_type="llama")
    settings: dict[str, Any] = {
        "kv_cache_block_size": block_size, "num_kvcache_blocks": 64,
        "enable_prefix_caching": False, "enable_chunked_prefill": True, "max_num_seqs": 4,
        "max_num_batched_tokens": 64, "long_prefill_token_threshold": 0,
        "decode_context_parallel_size": 1, "max_model_len": 256, "bos_token_id": 1,
        "eos_token_id": EOS, "stop_token_ids": [], "scheduler_delay_factor": 0.0}
    settings.update(limits)
    return _Record(**settings, speculative_config=spec, hf_config=hf)


_BATCH_FIELDS = (
    "req_ids", "num_scheduled_tokens", "context_lens", "num_rejected", "num_bonus",
    "per_req_cache_groups", "num_cached_tokens", "scheduled_tokens",
    "scheduled_spec_decode_tokens", "block_tables", "last_block_num_tokens",
    "total_tokens_num", "total_tokens_num_prefill", "total_tokens_num_decode",
    "total_seqs_num", "total_seqs_num_prefill", "total_seqs_num_decode", "num_spec_step",
    "is_dummy_run", "is_final_chunk", "next_token_ids", "is_first_decode_without_local_prefill",
    "remote_kv_seq_blocks")


def _batch_fields(batch: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name in _BATCH_FIELDS:
        if hasattr(batch, name):
            value = getattr(batch, name)
            fields[name] = value.copy() if isinstance(value, np.ndarray) else value
    return fields


#: Findings after which the run is garbage and the recording stops: a span skipped past
#: unwritten KV (SG601), KV written outside the seq's blocks (SG110).
_FINAL = ("SG601", "SG110")


def record(atom: types.SimpleNamespace, layout: str, scenario: Scenario
           ) -> tuple[list[Event], list[Expected]]:
    """Run one scenario on ATOM's scheduler; return its events and what they must report."""
    atom.sequence.Sequence.counter = count()
    config = _config(scenario.mtp_k, scenario.limits, scenario.block_size)
    scheduler = atom.scheduler.Scheduler(config)
    if scenario.veto:
        scheduler.prefill_delayer = _Veto(set(scenario.veto))
    prompts: dict[int, list[int]] = {}
    runner = Runner(atom, layout, scenario.mtp_k, prompts, config.kv_cache_block_size)
    expect: list[Expected] = []

    def admit(tokens: list[int]) -> Any:
        params = atom.sampling.SamplingParams(max_tokens=64, ignore_eos=True)
        seq = atom.sequence.Sequence(list(tokens), config.kv_cache_block_size,
                                     sampling_params=params)
        prompts[seq.id] = list(tokens)
        seq.max_tokens = scenario.max_tokens.get(seq.id, seq.max_tokens)
        return seq

    for step in range(scenario.steps):
        runner.step = step
        for tokens in scenario.arrivals.get(step, []):
            scheduler.add(admit(tokens))
        for tokens in scenario.remote.get(step, []):
            # A P/D consumer's request: KV computed remotely, first token and drafts handed
            # over in kv_transfer_params, transfer finished.
            seq = admit(tokens)
            n = len(tokens)
            seq.kv_transfer_params = {"first_token_id": true_token(prompts, seq.id, n)}
            handed = scenario.mtp_k if scenario.remote_drafts is None else scenario.remote_drafts
            seq.kv_transfer_params["draft_token_ids"] = [
                draft_token(prompts, seq.id, n + 1 + j) for j in range(handed)]
            scheduler.block_manager.allocate(seq)
            seq.num_cached_tokens = n
            runner.computed[seq.id] = n  # the producer wrote the prompt's KV
            seq.status = atom.sequence.SequenceStatus.WAITING_FOR_REMOTE_KVS
            scheduler.add(seq)
            scheduler.finished_recving_kv_req_ids.append(seq.id)
        running = {seq.id for seq in scheduler.running}
        result = scheduler.schedule()
        preempted = [seq.id for seq in scheduler.waiting if seq.id in running]
        if preempted:
            runner.record("preempted", seq_ids=preempted)
        if result is None:
            runner.record("schedule_none")
            continue
        batch, seqs = result
        forwarded = len(batch.req_ids) > 0
        draftless = [i for i, seq in enumerate(seqs.values()) if seq.spec_token_ids.size == 0]
        runner.record("schedule", forwarded=forwarded, **_batch_fields(batch))
        if not forwarded:
            continue
        found = len(runner.findings)
        try:
            output = runner.forward(batch)
        except IndexError as error:
            runner.record("crash", error=str(error))
            first = draftless[0] if draftless else runner.findings[-1].position
            expect.append(Expected(code="SG101", seq_id=int(batch.req_ids[first]),
                                   position=first))
            break
        for finding in runner.findings[found:]:
            code = {"prefill-misfeed": "SG608", "kv-gap": "SG601",
                    "short-table": "SG110"}.get(finding.kind)
            if code is None:
                raise RuntimeError(f"{scenario.description!r}: unexpected {finding}")
            expect.append(Expected(code=code, seq_id=finding.seq, position=finding.position))
            if code in _FINAL:
                break
        if any(e.code in _FINAL for e in expect):
            break
        scheduler.postprocess(list(seqs.values()), output, batch=batch)
    return runner.events, expect


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help="a git checkout of ROCm/ATOM")
    parser.add_argument("--out", type=Path, default=Path("tests/conformance/corpus/atom"),
                        help="folder that receives <commit>/<scenario>.json")
    parser.add_argument("--layout", choices=LAYOUTS, default=None,
                        help="the runner version to model (default: read from the checkout)")
    parser.add_argument("--scenario", action="append", default=None,
                        help="record only this scenario (repeatable)")
    args = parser.parse_args(argv)
    logging.disable(logging.INFO)  # ATOM logs every scheduled batch
    root = args.checkout.resolve()
    version = engine_version(root)
    layout = args.layout or runner_layout(root)
    committed = _git(root, "log", "-1", "--format=%cs")  # orders versions in the docs
    atom = load_atom(root)
    folder = args.out / version
    folder.mkdir(parents=True, exist_ok=True)
    for name, scenario in SCENARIOS.items():
        if args.scenario and name not in args.scenario:
            continue
        events, expect = record(atom, layout, scenario)
        corpus = Corpus(
            engine="atom", engine_version=version, scenario=name,
            description=scenario.description,
            config={"mtp_k": scenario.mtp_k, "vocab_size": VOCAB,
                    "block_size": scenario.block_size,
                    "layout": layout, "committed": committed,
                    **{key: value for key, value in scenario.limits.items()
                       if isinstance(value, int | bool)}},
            events=events, expect=expect)
        write_corpus(folder / f"{name}.json", corpus)
        verdict = ", ".join(f"{e.code} seq {e.seq_id} at {e.position}" for e in expect)
        print(f"{version}/{name}: {len(events)} events, {verdict or 'valid'}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
