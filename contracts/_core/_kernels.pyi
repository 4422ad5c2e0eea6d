# The compiled kernels (_kernels.c). Each clearance answers True (every covered rule passes),
# False (some rule may fail: the rules run and explain) or None (an input it does not
# read: the numpy clearance answers instead).
from typing import Any

#: Past these many seqs, or tokens of a stream, the kernels decline (numpy is faster).
ROWS_LIMIT: int
TOKENS_LIMIT: int

def unique_ids(ids: Any, /) -> bool | None: ...
def scheduled_batch(seq_ids: Any, is_decode: Any, num_scheduled: Any, context_lens: Any,
                    mtp_k: int, num_tokens: int, num_decode: int, draft_token_ids: Any,
                    vocab_size: int, draft_placeholder: int | None, num_drafts: Any,
                    token_ids: Any, state_slots: Any, draft_seq_ids: Any, /) -> bool | None: ...
def model_input(seq_ids: Any, query_start_loc: Any, num_tokens: int, num_padding: int | None,
                input_ids: Any, vocab_size: int, positions: Any, max_model_len: int | None,
                slot_mapping: Any, num_slots: int, padding_slot_id: int | None,
                /) -> bool | None: ...
def drafter_input(seq_ids: Any, query_start_loc: Any, num_tokens: int, input_ids: Any,
                  vocab_size: int, sample_indices: Any, positions: Any,
                  max_model_len: int | None, seq_lens: Any, max_seq_len: int | None,
                  /) -> bool | None: ...
def verify_output(seq_ids: Any, num_accepted: Any, mtp_k: int, token_ids: Any,
                  vocab_size: int, /) -> bool | None: ...
def drafter_output(seq_ids: Any, draft_token_ids: Any, vocab_size: int, num_proposed: Any,
                   mtp_k: int, /) -> bool | None: ...
def request_output(seq_ids: Any, token_ids: Any, num_emitted: Any, num_generated: Any,
                   stop_token_ids: Any, vocab_size: int, max_new_tokens: Any, finished: Any,
                   /) -> bool | None: ...
def logits_rows(seq_ids: Any, num_drafts: Any, row_starts: Any, row_counts: Any,
                num_logits: int, num_rows: int, /) -> bool | None: ...
def step_transition(starts: Any, expected_starts: Any, refilled: Any, num_drafts: Any,
                    decode_positions: Any, draft_token_ids: Any,
                    draft_placeholder: int | None, has_proposal: Any, proposed: Any,
                    prev_rows: Any, expected_num_drafts: Any, num_proposed: Any, mtp_k: int,
                    first_seen: Any, drafts_handed_over: Any, /) -> bool | None: ...
def block_tables(block_tables: Any, context_lens: Any, block_size: int, read_middle: bool,
                 /) -> bool | None: ...

# The step tracker's fused hand-overs: True only where the object the tracker would build
# passes every rule it runs (and, for the rows, after folding them into the step's arrays,
# which are written only then); False or None: nothing written, numpy decides.
def transition(prev_starts: Any, prev_advance: Any, prev_drafted: Any, prev_proposals: Any,
               prev_num_proposed: Any, prev_mtp_k: int, is_decode: Any, starts: Any,
               num_drafts: Any, draft_token_ids: Any, draft_placeholder: int | None,
               mtp_k: int, drafts_handed_over: Any, prev_rows: Any, same_order: bool,
               refilled: Any, remembered: Any, ends: Any, last_short: Any, first_seen: Any,
               progress: bool, whole: bool, /) -> bool | None: ...
def verify_rows(batch_ids: Any, is_decode: Any, num_drafts: Any, seq_ids: Any,
                num_accepted: Any, mtp_k: int, before: Any, advance: Any,
                /) -> bool | None: ...
def draft_rows(batch_ids: Any, seq_ids: Any, draft_token_ids: Any, num_proposed: Any,
               mtp_k: int, proposals: Any, drafted: Any, counts: Any, /) -> bool | None: ...
# Each id's first row in ``reference`` written to ``out``; True when they are the same ids.
def id_rows(reference: Any, ids: Any, out: Any, /) -> bool | None: ...
# SeqMemory's touch of each seq with its end; None where seqs would be forgotten.
def touch_ends(ends: dict[int, int], seq_ids: Any, starts: Any, advance: Any, room: int,
               /) -> bool | None: ...
def use_torch(tensor: type, strided: Any, bool_: Any, int8: Any, uint8: Any, int16: Any,
              uint16: Any, int32: Any, uint32: Any, int64: Any, /) -> None: ...
# Plain ints (width 0) or lists of ``width`` plain ints into ``out``; None where not.
def pack_ints(values: Any, width: int, out: Any, /) -> bool | None: ...
def plan_sound(ndarray: type, mtp_k: Any, stable_ids: Any, seq_ids: Any, is_decode: Any,
               starts: Any, num_scheduled: Any, draft_token_ids: Any, num_drafts: Any,
               token_ids: Any, num_before_drafts: Any, drafts_handed_over: Any,
               first_scheduled: Any, /) -> bool | None: ...
def no_short_proposals(drafted: Any, num_proposed: Any, rows: Any, mtp_k: int,
                       /) -> bool | None: ...
