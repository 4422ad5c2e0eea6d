# The compiled clearances (_kernels.c). Each answers True (every covered rule passes),
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
