"""The fault catalogue: real bugs of the scheduler/runner boundary, reproducible on demand.

Each fault switches one code path of the reference engine to the buggy variant that
shipped in a real engine; nothing builds a bad object directly. With contracts off the
engine then fails the way the original did (an IndexError deep in the runner, an
embedding lookup of ``-1``, tokens that differ from plain greedy decoding, or, silently,
drafts that are almost never accepted); with strict contracts, at the default depth as
at full depth, it stops at the boundary the bad data crosses first, with a violation
naming the rule, the seq and its batch position. Four of them break no rule of any
single object: only the relation between consecutive steps (SG6xx, checked by the
engine's step tracker) shows them.
Four more only show across data-parallel ranks (``specguard run --dp N``, injected on
the last rank): each rank is consistent on its own, but the ranks disagree (SG7xx,
checked on every rank from one gathered row of metadata per step).

``specguard faults`` lists them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "COMPACT_BLOCK_TABLES",
    "COMPACT_DRAFT_ROWS",
    "DUPLICATE_SEQ_ID",
    "FAULTS",
    "MISALIGNED_LOGITS_ROWS",
    "RANK_LOCAL_PADDING",
    "RANK_LOCAL_SEQ_IDS",
    "RANK_MTP_K",
    "RANK_STALE_TOKEN_COUNTS",
    "REMOTE_DRAFTS_LOST",
    "SENTINEL_IN_TARGET_INPUT",
    "SENTINEL_TO_EMBEDDING",
    "SKIPPED_REJECTION_ROLLBACK",
    "STALE_DRAFTS",
    "STALE_DRAFT_SEQ_LENS",
    "STALE_PADDING_SLOTS",
    "UNPROPOSED_DRAFTS",
    "UNTRIMMED_OUTPUT",
    "WRONG_DRAFT_WIDTH",
    "Fault",
]


@dataclass(frozen=True)
class Fault:
    """One injectable bug: what it does, where it lives, and what catches it."""

    name: str
    summary: str
    sites: tuple[str, ...]
    """The functions whose buggy variant the fault switches on."""
    origin: str
    """The real bug it reproduces."""
    rule: str
    """The rule that stops it under strict contracts at full depth (first, where several
    may: see :attr:`also`)."""
    subject: str
    """The object that breaks that rule: where the bad data is stopped."""
    unguarded: str
    """What the engine does with contracts off."""
    also: tuple[str, ...] = ()
    """Rules of the same object that stop it first where it takes another form."""
    across_ranks: bool = False
    """Shows only across data-parallel ranks: needs ``--dp 2`` or more."""

    @property
    def rules(self) -> tuple[str, ...]:
        """Every rule that may stop it: :attr:`rule` first."""
        return (self.rule, *self.also)


COMPACT_DRAFT_ROWS = "compact-draft-rows"
SENTINEL_TO_EMBEDDING = "sentinel-to-embedding"
COMPACT_BLOCK_TABLES = "compact-block-tables"
DUPLICATE_SEQ_ID = "duplicate-seq-id"
WRONG_DRAFT_WIDTH = "wrong-draft-width"
SENTINEL_IN_TARGET_INPUT = "sentinel-in-target-input"
SKIPPED_REJECTION_ROLLBACK = "skipped-rejection-rollback"
STALE_DRAFTS = "stale-drafts"
STALE_PADDING_SLOTS = "stale-padding-slots"
UNPROPOSED_DRAFTS = "unproposed-drafts"
UNTRIMMED_OUTPUT = "untrimmed-output"
MISALIGNED_LOGITS_ROWS = "misaligned-logits-rows"
STALE_DRAFT_SEQ_LENS = "stale-draft-seq-lens"
REMOTE_DRAFTS_LOST = "remote-drafts-lost"
RANK_MTP_K = "rank-mtp-k"
RANK_LOCAL_PADDING = "rank-local-padding"
RANK_LOCAL_SEQ_IDS = "rank-local-seq-ids"
RANK_STALE_TOKEN_COUNTS = "rank-stale-token-counts"

FAULTS: dict[str, Fault] = {f.name: f for f in (
    Fault(COMPACT_DRAFT_ROWS,
          "draft rows only for decode seqs that have drafts, read by batch position",
          ("Scheduler._draft_rows",),
          "ATOM #1444: IndexError: index 127 is out of bounds for axis 0 with size 127",
          "SG101", "ScheduledBatch",
          "IndexError in the runner, reading a decode seq's draft row past the compacted "
          "rows"),
    Fault(SENTINEL_TO_EMBEDDING,
          "a discarded chunked-prefill row's -1 reaches the MTP head's embed_tokens",
          ("drafter.next_token_ids",),
          "vLLM #26231: the max_gen_len == 1 fast path skipping the valid mask",
          "SG301", "DrafterInput",
          "IndexError in the MTP head's embedding (a device-side assert on a GPU)"),
    Fault(COMPACT_BLOCK_TABLES,
          "block tables gathered before admissions are allocated, empty ones dropped",
          ("Scheduler._block_table_rows", "Scheduler.schedule"),
          "ATOM C12/C18: block_tables filtered by `if seq.block_table`, gathered before "
          "the scheduler's last mutation",
          "SG105", "ScheduledBatch",
          "IndexError in the runner, computing KV slots from block tables with rows missing"),
    Fault(DUPLICATE_SEQ_ID,
          "a preempted seq is queued to wait but never leaves the running list",
          ("Scheduler._preempt",),
          "ATOM C14 / SGLang #18984: retract paths that leave a request in two queues",
          "SG010", "ScheduledBatch",
          "finishes; the seq scheduled twice in a step ends with tokens that differ from "
          "plain greedy decoding"),
    Fault(WRONG_DRAFT_WIDTH,
          "a seq near its token limit is scheduled fewer than mtp_k drafts",
          ("Scheduler._decode_width",),
          "ATOM C2/C5: ragged draft rows in a runner that reshapes decode tokens to "
          "(num_decode, mtp_k + 1)",
          "SG103", "ScheduledBatch",
          "IndexError in the runner, where the decode spans are read as mtp_k + 1 tokens "
          "each"),
    Fault(SENTINEL_IN_TARGET_INPUT,
          "-1 draft padding of a first decode is left in the target model's input ids",
          ("Scheduler._draft_rows", "ModelRunner._previous_rows"),
          "vLLM #47029: a first decode padded with -1 drafts; the runner refills from the "
          "device only the seqs it verified last step",
          "SG301", "ModelInput",
          "IndexError in the target model's embedding (a device-side assert on a GPU)"),
    Fault(UNTRIMMED_OUTPUT,
          "every verified token is given to its request, past its stop id and its limit",
          ("request_output.given_tokens",),
          "SGLang #31599 / #33758: a multi-token accept run was given whole, so tokens "
          "after an accepted stop leaked and a run crossing max_new_tokens overshot it; "
          "transformers #47912: assisted/MTP decoding generated past a mid-block EOS",
          "SG403", "RequestOutput",
          "finishes; requests are given more tokens than max_tokens, and tokens after "
          "their stop id, so the outputs differ from plain greedy decoding",
          # A stop id mid-row shows first as a token after it; one that ends the row
          # leaves the request running.
          also=("SG402", "SG404")),
    Fault(MISALIGNED_LOGITS_ROWS,
          "the banned-token bitmask laid out with mtp_k drafts for every request, "
          "prefills included",
          ("TokenBans.layout",),
          "vLLM #49738 (fixes #49694): with async scheduling the engine core laid out the "
          "grammar bitmask with the drafts it scheduled while the runner had trimmed some, "
          "so later requests got their neighbour's bitmask rows",
          "SG312", "LogitsRows",
          "finishes; requests after a constrained prefill are sampled under another "
          "request's bans, so the tokens differ from plain greedy decoding"),
    Fault(STALE_DRAFT_SEQ_LENS,
          "draft steps after the first reuse the first pass's seq_lens and max_seq_len",
          ("drafter.draft_step_metadata",),
          "vLLM 0.11.1 EagleProposer.propose: the draft steps' attention metadata was not "
          "advanced per step (max_seq_len stayed at the first pass's), so the kernels "
          "read a context that no longer ended at the token being drafted",
          "SG306", "DrafterInput",
          "finishes with tokens identical to plain greedy decoding, but the head drafts "
          "every step after the first against the wrong context end and few drafts are "
          "accepted: a silent slowdown no output comparison can see"),
    Fault(SKIPPED_REJECTION_ROLLBACK,
          "a seq still in flight resumes after every drafted slot, rejected ones included",
          ("ModelRunner._merge_decode_rows",),
          "ATOM C11: the runner must subtract the previous step's num_rejected, copied from "
          "the device, from a deferred seq's context; vllm-ascend #13864: a stale "
          "accepted count after batch condensation garbled MTP output",
          "SG601", "StepTransition",
          "finishes; rejected drafts stay in the KV cache, positions drift, and the tokens "
          "differ from plain greedy decoding"),
    Fault(STALE_DRAFTS,
          "a seq still in flight is verified with the drafts of its step before last",
          ("ModelRunner._decode_layout",),
          "vLLM #43434: drafts scattered from the current buffer instead of the previous "
          "step's, so requests were verified against drafts meant for other positions",
          "SG607", "StepTransition",
          "finishes with tokens identical to plain greedy decoding, but almost no draft "
          "is accepted: a silent slowdown no output comparison can see",
          # A seq whose prefill just ended has an empty host row (SG607: none of its
          # proposal verified); one further along carries its older drafts (SG602).
          also=("SG602",)),
    Fault(STALE_PADDING_SLOTS,
          "a padded forward's padding rows keep the slots a longer step left in the "
          "graph's static slot buffer",
          ("ModelRunner._padded_slots",),
          "rvllm #32 and Diffulex #44: padded CUDA-graph rows reused live KV slots or the "
          "stale tail of slot_mapping, overwriting other requests' keys",
          "SG308", "ModelInput",
          "finishes; padding rows overwrite live seqs' KV, and the tokens differ from "
          "plain greedy decoding"),
    Fault(UNPROPOSED_DRAFTS,
          "a step that ran no drafter hands its zeros on as whole proposals",
          ("ModelRunner._device_num_drafts", "Scheduler._deliver"),
          "vLLM GPUModelRunner: a step whose longest seq does not fit the drafter "
          "(input_fits_in_drafter=False) runs no drafter, and the drafts already scheduled "
          "must be stripped; vLLM I5d strips them by mutating scheduler_output",
          "SG660", "StepTransition",
          "finishes with tokens identical to plain greedy decoding, but the skipped "
          "drafter's zeros are verified as drafts and almost none is accepted: a silent "
          "slowdown no output comparison can see"),
    Fault(REMOTE_DRAFTS_LOST,
          "a remotely prefilled seq's first decode schedules its empty draft row as "
          "mtp_k real drafts",
          ("Scheduler._receive",),
          "P/D disaggregation with MTP: the decode instance received the prompt's KV and "
          "first token but not the prefill instance's drafts, and verified the draft "
          "slots it had for the request as if they had been proposed",
          "SG661", "StepTransition",
          "finishes with tokens identical to plain greedy decoding, but every remotely "
          "prefilled request's first decode verifies zeros as drafts and almost none "
          "is accepted: a silent slowdown no output comparison can see"),
    Fault(RANK_MTP_K,
          "one data-parallel rank drafts one token fewer (more, at mtp_k 1) than the others",
          ("RankJob.config_of",),
          "vLLM #40589: one DP rank skipped the drafter for a step while the others ran its "
          "dummy run; the ranks disagreed on speculation and hung",
          "SG703", "RankAgreement",
          "crashes: the rank pads to another size and the step's all-gather fails (gloo "
          "aborts a rank; NCCL hangs until its watchdog)",
          across_ranks=True),
    Fault(RANK_LOCAL_PADDING,
          "one data-parallel rank pads to its own token count, not the largest across ranks",
          ("RankEngine._padded",),
          "vLLM #25906: the DP dummy run chose its CUDA graph by the local token count "
          "instead of num_tokens_after_padding, and the ranks hung",
          "SG704", "RankAgreement",
          "crashes: the rank sends a buffer of another size to the step's all-gather (gloo "
          "aborts a rank; NCCL hangs until its watchdog)",
          across_ranks=True),
    Fault(RANK_LOCAL_SEQ_IDS,
          "one data-parallel rank numbers its requests from 0, as a single engine does",
          ("RankJob.requests_of",),
          "vLLM #27987 (after #27723): request ids, unique only per client, collided once "
          "several clients fed one engine",
          "SG706", "RankAgreement",
          "finishes; outputs are merged by seq id, so one rank's tokens overwrite "
          "another's and differ from plain greedy decoding",
          across_ranks=True),
    Fault(RANK_STALE_TOKEN_COUNTS,
          "one data-parallel rank sizes its step from the token counts of its previous step",
          ("RankEngine._tokens_across_ranks",),
          "vLLM #35294: the speculator kept a num_tokens_across_dp of its own instead of the "
          "counts the ranks agreed for the forward, and the DP group hung",
          "SG708", "TokensAcrossRanks",
          "crashes: the rank pads to a size the others did not agree on and the step's "
          "all-gather fails (gloo aborts a rank; NCCL hangs until its watchdog)",
          # Where its own count did not change, its copy still differs from the others'.
          also=("SG710",), across_ranks=True),
)}


def check_name(name: str | None) -> str | None:
    """``name`` if it is a known fault (or None); ValueError listing the known ones."""
    if name is not None and name not in FAULTS:
        raise ValueError(f"unknown fault {name!r}; known: {', '.join(FAULTS)}")
    return name
