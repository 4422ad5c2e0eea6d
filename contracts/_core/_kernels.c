/*
 * The clearances of the boundary objects an engine hands over every step, compiled; and
 * the step tracker's hand-overs fused with its bookkeeping (the second half of the file).
 *
 * A clearance answers "would every rule it covers pass?" on an object with clean
 * metadata (see _clearance.py). Its numpy version is a dozen numpy calls, each a few
 * microseconds after a model forward has evicted numpy's code from the caches; these
 * loops read the same host arrays in one call of a few microseconds. Each function
 * answers True (every covered rule passes), False (some rule may fail: the rules run
 * and explain) or None (a form of input it does not read, such as a big-endian dtype or
 * a value large enough for numpy's fixed-width arithmetic to wrap where these loops
 * would not): the numpy clearance answers then, so None never changes a verdict.
 *
 * Above ROWS_LIMIT seqs the kernels decline too: there numpy's vectorised passes are
 * faster than these loops.
 *
 * Arrays arrive through the buffer protocol (no numpy headers at build time); any
 * strides are read, so views and slices need no copy. A CPU torch tensor, which has no
 * buffer, is read in place once use_torch() has named torch's types (see take_tensor):
 * making a numpy view of each tensor first costs more, cold, than the kernel itself.
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")  /* the typed loops below vectorise at O3 */
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Past this magnitude a sum or a +1 of the numpy clearance (and of the rules, in the
 * array's own dtype) could wrap in int32: the compiled loops decline such input. */
#define ARITH_LIMIT ((int64_t)1 << 30)
/* Past these many seqs (or tokens of a stream) numpy's vectorised passes beat the
 * loops below, whose per-seq reads are scalar: the kernels leave such objects to numpy.
 * Decode steps of engines are far below them; their fixed cost is what is compiled. */
#define ROWS_LIMIT 1024
#define TOKENS_LIMIT 16384
#define MAX_HELD 16
#define SMALL_UNIQUE 48

typedef int64_t (*Loader)(const char *);

static int64_t load_i8(const char *p) { return *(const int8_t *)p; }
static int64_t load_u8(const char *p) { return *(const uint8_t *)p; }
static int64_t load_i16(const char *p) { int16_t v; memcpy(&v, p, 2); return v; }
static int64_t load_u16(const char *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static int64_t load_i32(const char *p) { int32_t v; memcpy(&v, p, 4); return v; }
static int64_t load_u32(const char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static int64_t load_i64(const char *p) { int64_t v; memcpy(&v, p, 8); return v; }
static int64_t load_bool(const char *p) { return *(const uint8_t *)p != 0; }

typedef struct {
    const char *buf;
    Py_ssize_t n0, n1, s0, s1;
    int ndim;
    int width;  /* 8 or 4 for int64 or int32 (read by the typed loops), else 0 */
    Loader load;
} Arr;

typedef struct {
    Py_buffer views[MAX_HELD];
    int count;
} Held;

static void release_all(Held *held) {
    for (int i = 0; i < held->count; i++) PyBuffer_Release(&held->views[i]);
    held->count = 0;
}

static Loader loader_of(const Py_buffer *view) {
    const char *f = view->format ? view->format : "B";
    if (*f == '@' || *f == '=' || *f == '<' || *f == '|') f++;
    if (!*f || f[1]) return NULL; /* '>', '!', structs and the like: not read here */
    Py_ssize_t size = view->itemsize;
    switch (*f) {
    case '?': return size == 1 ? load_bool : NULL;
    case 'b': case 'h': case 'i': case 'l': case 'q':
        return size == 1 ? load_i8 : size == 2 ? load_i16 : size == 4 ? load_i32
             : size == 8 ? load_i64 : NULL;
    case 'B': case 'H': case 'I': case 'L': case 'Q':
        /* uint64 is left to numpy: its values past int64 do not fit these loops */
        return size == 1 ? load_u8 : size == 2 ? load_u16 : size == 4 ? load_u32 : NULL;
    default: return NULL;
    }
}

/* torch.Tensor, torch.strided and the dtypes below, once use_torch() has named them. */
#define TORCH_DTYPES 8
static PyObject *tensor_type = NULL, *strided_layout = NULL;
static PyObject *torch_dtypes[TORCH_DTYPES];  /* None where this torch has no such dtype */
static const Loader torch_loaders[TORCH_DTYPES] = {
    load_bool, load_i8, load_u8, load_i16, load_u16, load_i32, load_u32, load_i64};
static const int torch_sizes[TORCH_DTYPES] = {1, 1, 1, 2, 2, 4, 4, 8};
static PyObject *s_is_cpu, *s_layout, *s_dtype, *s_is_neg, *s_shape, *s_stride, *s_data_ptr;

/* A tuple of ``ndim`` non-negative ints into out[]; 0 when it is not one. */
static int read_dims(PyObject *tuple, int ndim, Py_ssize_t *out) {
    if (tuple == NULL || !PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) != ndim) return 0;
    for (int i = 0; i < ndim; i++) {
        Py_ssize_t v = PyLong_AsSsize_t(PyTuple_GET_ITEM(tuple, i));
        if (v < 0) return 0;  /* -1 with an error set, or a negative stride */
        out[i] = v;
    }
    return 1;
}

/* Read a CPU torch tensor of ``ndim`` axes in place: its data pointer, shape and strides,
 * as numpy's view of it would. Only a tensor of exactly torch.Tensor (a subclass may
 * answer data_ptr() as it likes), on the CPU, strided, of one of the integer or bool
 * dtypes, with no lazy negation pending and memory behind its elements; anything else is
 * declined (0), as numpy() refuses such tensors (a wrapper whose data_ptr() raises, a
 * tensor on another device). The caller holds the tensor, so its storage outlives the
 * kernel. */
static int take_tensor(PyObject *obj, Arr *arr, int ndim) {
    if (tensor_type == NULL || (PyObject *)Py_TYPE(obj) != tensor_type) return 0;
    int ok = 0, which = -1;
    Py_ssize_t shape[2], strides[2];
    PyObject *is_cpu = NULL, *layout = NULL, *dtype = NULL, *neg = NULL, *dims = NULL,
             *steps = NULL, *ptr = NULL;
    is_cpu = PyObject_GetAttr(obj, s_is_cpu);
    if (is_cpu != Py_True) goto out;
    layout = PyObject_GetAttr(obj, s_layout);
    if (layout != strided_layout) goto out;
    dtype = PyObject_GetAttr(obj, s_dtype);
    for (int i = 0; i < TORCH_DTYPES && dtype != NULL; i++)
        if (dtype == torch_dtypes[i]) which = i;
    if (which < 0) goto out;
    neg = PyObject_CallMethodNoArgs(obj, s_is_neg);
    if (neg != Py_False) goto out;
    dims = PyObject_GetAttr(obj, s_shape);
    steps = PyObject_CallMethodNoArgs(obj, s_stride);
    if (!read_dims(dims, ndim, shape) || !read_dims(steps, ndim, strides)) goto out;
    ptr = PyObject_CallMethodNoArgs(obj, s_data_ptr);
    if (ptr == NULL || !PyLong_Check(ptr)) goto out;
    void *data = PyLong_AsVoidPtr(ptr);
    if (data == NULL && (PyErr_Occurred() || (shape[0] && (ndim == 1 || shape[1]))))
        goto out;  /* no memory behind elements: a ZeroTensor, say */
    Py_ssize_t size = torch_sizes[which];
    if (strides[0] > PY_SSIZE_T_MAX / size || (ndim == 2 && strides[1] > PY_SSIZE_T_MAX / size))
        goto out;
    arr->buf = (const char *)data;
    arr->ndim = ndim;
    arr->n0 = shape[0];
    arr->s0 = strides[0] * size;
    arr->n1 = ndim == 2 ? shape[1] : 1;
    arr->s1 = ndim == 2 ? strides[1] * size : 0;
    arr->load = torch_loaders[which];
    arr->width = arr->load == load_i64 ? 8 : arr->load == load_i32 ? 4 : 0;
    ok = 1;
out:
    Py_XDECREF(is_cpu); Py_XDECREF(layout); Py_XDECREF(dtype); Py_XDECREF(neg);
    Py_XDECREF(dims); Py_XDECREF(steps); Py_XDECREF(ptr);
    if (PyErr_Occurred()) PyErr_Clear();
    return ok;
}

/* Read ``obj`` as an array of ``ndim`` axes (1 or 2) through a buffer of ``flags``
 * (read-only, or writable for the tracker's own arrays), or, read-only, as a CPU torch
 * tensor. 1 when it can, 0 when not. */
static int take_as(Held *held, PyObject *obj, Arr *arr, int ndim, int flags) {
    if (tensor_type != NULL && (PyObject *)Py_TYPE(obj) == tensor_type)
        /* straight to its reader: torch.Tensor has no buffer, and the TypeError a buffer
         * request raises (its message formatted, then cleared) costs more than the read */
        return !(flags & PyBUF_WRITABLE) && take_tensor(obj, arr, ndim);
    if (held->count >= MAX_HELD) return 0;
    Py_buffer *view = &held->views[held->count];
    if (PyObject_GetBuffer(obj, view, flags) < 0) {
        PyErr_Clear();
        return !(flags & PyBUF_WRITABLE) && take_tensor(obj, arr, ndim);
    }
    held->count++;
    if (view->ndim != ndim || (arr->load = loader_of(view)) == NULL) return 0;
    arr->buf = (const char *)view->buf;
    arr->ndim = ndim;
    arr->n0 = view->shape[0];
    arr->s0 = view->strides[0];
    arr->n1 = ndim == 2 ? view->shape[1] : 1;
    arr->s1 = ndim == 2 ? view->strides[1] : 0;
    arr->width = arr->load == load_i64 ? 8 : arr->load == load_i32 ? 4 : 0;
    return 1;
}

static int take(Held *held, PyObject *obj, Arr *arr, int ndim) {
    return take_as(held, obj, arr, ndim, PyBUF_RECORDS_RO);
}

/* Whether ``a``'s elements lie one after the other (1-D, or 2-D in C order), so that a
 * typed loop can read them as one run. */
static int contiguous(const Arr *a) {
    Py_ssize_t size = a->width;
    if (!size) return 0;
    if (a->ndim == 1) return a->s0 == size || a->n0 <= 1;
    return (a->s1 == size || a->n1 <= 1) && (a->s0 == a->n1 * size || a->n0 <= 1);
}

/* ``obj`` may be None: *present says which. */
static int take_optional(Held *held, PyObject *obj, Arr *arr, int ndim, int *present) {
    *present = obj != Py_None;
    return *present ? take(held, obj, arr, ndim) : 1;
}

/* A Python int as int64; 0 when it is no int or does not fit. */
static int as_int(PyObject *obj, int64_t *out) {
    if (!PyLong_Check(obj)) return 0;
    int overflow = 0;
    long long value = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow || (value == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *out = (int64_t)value;
    return 1;
}

static int as_optional_int(PyObject *obj, int64_t *out, int *present) {
    *present = obj != Py_None;
    return *present ? as_int(obj, out) : 1;
}

/* One element: int64 and int32 inline (a predictable branch), any other dtype through
 * its loader. */
static inline int64_t element(const Arr *a, const char *p) {
    if (a->width == 8) { int64_t v; memcpy(&v, p, 8); return v; }
    if (a->width == 4) { int32_t v; memcpy(&v, p, 4); return v; }
    return a->load(p);
}

#define AT(a, i) element(&(a), (a).buf + (i) * (a).s0)
#define AT2(a, i, j) element(&(a), (a).buf + (i) * (a).s0 + (j) * (a).s1)

/* Every one of ``count`` int64 or int32 values at ``p`` in [lo, hi): a minimum and a
 * maximum, which the compiler vectorises (as numpy's own reductions are). The arrays of
 * an aligned numpy buffer are read in place. */
static int run_within(const char *p, Py_ssize_t count, int width, int64_t lo, int64_t hi) {
    if (count <= 0) return 1;
    if (width == 8) {
        const int64_t *v = (const int64_t *)p;
        int64_t low = v[0], high = v[0];
        for (Py_ssize_t i = 1; i < count; i++) {
            low = v[i] < low ? v[i] : low;
            high = v[i] > high ? v[i] : high;
        }
        return low >= lo && high < hi;
    }
    const int32_t *v = (const int32_t *)p;
    int32_t low = v[0], high = v[0];
    for (Py_ssize_t i = 1; i < count; i++) {
        low = v[i] < low ? v[i] : low;
        high = v[i] > high ? v[i] : high;
    }
    return (int64_t)low >= lo && (int64_t)high < hi;
}

/* Every element in [lo, hi). */
static int within(const Arr *a, int64_t lo, int64_t hi) {
    if (contiguous(a)) return run_within(a->buf, a->n0 * a->n1, a->width, lo, hi);
    for (Py_ssize_t i = 0; i < a->n0; i++)
        for (Py_ssize_t j = 0; j < a->n1; j++) {
            int64_t v = element(a, a->buf + i * a->s0 + j * a->s1);
            if (v < lo || v >= hi) return 0;
        }
    return 1;
}

/* Every element's magnitude at most ARITH_LIMIT. */
static int small(const Arr *a) { return within(a, -ARITH_LIMIT, ARITH_LIMIT + 1); }

static uint64_t mix(int64_t v) { return (uint64_t)v * 0x9E3779B97F4A7C15ULL; }

/* 1: all distinct (any int64 values); 0: not; -1: out of memory (the caller declines). */
static int distinct(const Arr *ids) {
    Py_ssize_t n = ids->n0;
    if (n < 2) return 1;
    if (n <= SMALL_UNIQUE) {
        for (Py_ssize_t i = 1; i < n; i++) {
            int64_t v = AT(*ids, i);
            for (Py_ssize_t j = 0; j < i; j++)
                if (AT(*ids, j) == v) return 0;
        }
        return 1;
    }
    /* Engines number seqs with counters: ids within a few times n of each other take
     * one bit each in a table over their span (unsigned: a span of any two int64s fits). */
    int64_t low = INT64_MAX, high = INT64_MIN;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t v = AT(*ids, i);
        low = v < low ? v : low;
        high = v > high ? v : high;
    }
    uint64_t width = (uint64_t)high - (uint64_t)low;
    if (width < 8 * (uint64_t)n + 64) {
        size_t span = (size_t)width + 1;
        uint8_t *seen = (uint8_t *)calloc((span >> 3) + 1, 1);
        if (seen == NULL) return -1;
        int unique = 1;
        for (Py_ssize_t i = 0; i < n; i++) {
            size_t at = (size_t)((uint64_t)AT(*ids, i) - (uint64_t)low);
            uint8_t bit = (uint8_t)(1u << (at & 7));
            if (seen[at >> 3] & bit) { unique = 0; break; }
            seen[at >> 3] |= bit;
        }
        free(seen);
        return unique;
    }
    /* open addressing over a power of two at least twice n, with a flag per slot */
    int bits = 1;
    while (((Py_ssize_t)1 << bits) < 2 * n) bits++;
    size_t size = (size_t)1 << bits;
    int64_t *slots = (int64_t *)malloc(size * sizeof(int64_t));
    uint8_t *used = (uint8_t *)calloc(size, 1);
    if (slots == NULL || used == NULL) {
        free(slots);
        free(used);
        return -1;
    }
    int answer = 1;
    for (Py_ssize_t i = 0; i < n && answer; i++) {
        int64_t v = AT(*ids, i);
        size_t at = (size_t)(mix(v) >> (64 - bits));
        while (used[at]) {
            if (slots[at] == v) { answer = 0; break; }
            at = (at + 1) & (size - 1);
        }
        used[at] = 1;
        slots[at] = v;
    }
    free(slots);
    free(used);
    return answer;
}

/* 1: unique and non-negative; 0: not; -1: out of memory (the caller declines). */
static int unique_non_negative(const Arr *ids) {
    for (Py_ssize_t i = 0; i < ids->n0; i++)
        if (AT(*ids, i) < 0) return 0;
    return distinct(ids);
}

/* Span offsets that run from 0 to ``end`` without going back (SG304). */
static int sound_spans(const Arr *starts, int64_t end) {
    Py_ssize_t m = starts->n0;
    if (m < 1 || AT(*starts, 0) != 0 || AT(*starts, m - 1) != end) return 0;
    for (Py_ssize_t i = 1; i < m; i++)
        if (AT(*starts, i) < AT(*starts, i - 1)) return 0;
    return 1;
}

/* Positions in [0, limit) (or >= 0 with no limit), and each the previous + 1 inside a
 * span of the first ``count`` tokens (SG303; the spans are sound by then). */
static int positions_sound(const Arr *positions, const Arr *starts, int64_t count,
                           int has_limit, int64_t limit) {
    if (!within(positions, 0, has_limit ? limit : INT64_MAX)) return 0;
    if (count < 2) return 1;
    Py_ssize_t m = starts->n0;
    for (Py_ssize_t s = 0; s + 1 < m; s++) {
        int64_t begin = AT(*starts, s), end = AT(*starts, s + 1);
        for (int64_t i = begin + 1; i < end; i++)
            if (AT(*positions, i) != AT(*positions, i - 1) + 1) return 0;
    }
    return 1;
}

typedef enum { DECLINE = -1, NO = 0, YES = 1 } Verdict;

static PyObject *answer(Held *held, Verdict verdict) {
    release_all(held);
    if (verdict == DECLINE) {
        PyErr_Clear();  /* a decline is an answer: whatever refused the input is no error */
        Py_RETURN_NONE;
    }
    if (verdict == YES) Py_RETURN_TRUE;
    Py_RETURN_FALSE;
}

static int arity(Py_ssize_t nargs, Py_ssize_t wanted, const char *name) {
    if (nargs == wanted) return 1;
    PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%zd given)", name, wanted, nargs);
    return 0;
}

#define NEED(cond) do { if (!(cond)) { verdict = DECLINE; goto done; } } while (0)
#define CHECK(cond) do { if (!(cond)) { verdict = NO; goto done; } } while (0)
#define UNIQUE(ids) do { int u_ = unique_non_negative(&(ids)); NEED(u_ >= 0); CHECK(u_); } while (0)

/* unique_ids(ids): SG010 alone. */
static PyObject *unique_ids(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!arity(nargs, 1, "unique_ids")) return NULL;
    Held held = {.count = 0};
    Verdict verdict = YES;
    Arr ids;
    NEED(take(&held, args[0], &ids, 1));
    UNIQUE(ids);
done:
    return answer(&held, verdict);
}

/* scheduled_batch(seq_ids, is_decode, num_scheduled, context_lens, mtp_k, num_tokens,
 *   num_decode, draft_token_ids, vocab_size, draft_placeholder, num_drafts, token_ids,
 *   state_slots, draft_seq_ids): SG010, SG103, SG106-SG109, SG111-SG113, SG115. */
static PyObject *scheduled_batch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!arity(nargs, 14, "scheduled_batch")) return NULL;
    Held held = {.count = 0};
    Verdict verdict = YES;
    Arr ids, flags, counts, context, drafts, num_drafts, tokens, slots, owners;
    int64_t mtp_k, total, num_decode, vocab, placeholder = 0;
    int has_placeholder, has_slots, has_owners;
    NEED(take(&held, args[0], &ids, 1) && take(&held, args[1], &flags, 1)
         && take(&held, args[2], &counts, 1) && take(&held, args[3], &context, 1));
    NEED(ids.n0 <= ROWS_LIMIT);  /* first: a large object is declined at once */
    NEED(as_int(args[4], &mtp_k) && as_int(args[5], &total) && as_int(args[6], &num_decode));
    NEED(take(&held, args[7], &drafts, 2) && as_int(args[8], &vocab));
    NEED(as_optional_int(args[9], &placeholder, &has_placeholder));
    NEED(take(&held, args[10], &num_drafts, 1) && take(&held, args[11], &tokens, 1));
    NEED(take_optional(&held, args[12], &slots, 1, &has_slots));
    NEED(take_optional(&held, args[13], &owners, 1, &has_owners));
    Py_ssize_t n = ids.n0;
    NEED(flags.n0 == n && counts.n0 == n && context.n0 == n && mtp_k >= 0
         && mtp_k < ARITH_LIMIT && total >= 0);
    int64_t width = mtp_k + 1, decoding = 0;
    for (Py_ssize_t i = 0; i < n; i++) decoding += AT(flags, i) != 0;
    CHECK(decoding == num_decode);  /* SG107's count */
    UNIQUE(ids);  /* SG010 */
    int64_t scheduled = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t c = AT(counts, i);
        if (AT(flags, i)) CHECK(c == width);  /* SG103 */
        else CHECK(c >= 1);  /* SG107's prefill counts */
        CHECK(c <= total);  /* SG106's range */
        scheduled += c;
    }
    CHECK(scheduled == total);  /* SG106 */
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t c = AT(counts, i), have = AT(context, i);
        CHECK(have >= c && !(AT(flags, i) && have == c));  /* SG111 */
    }
    for (Py_ssize_t i = 0; i < drafts.n0; i++)  /* SG108 */
        for (Py_ssize_t j = 0; j < drafts.n1; j++) {
            int64_t d = AT2(drafts, i, j);
            CHECK((has_placeholder && d == placeholder) || (d >= 0 && d < vocab));
        }
    CHECK(within(&num_drafts, 0, width));  /* SG109 */
    CHECK(within(&tokens, 0, vocab));  /* SG112 */
    if (has_slots) CHECK(within(&slots, 0, INT64_MAX));  /* SG113 */
    if (has_owners) {  /* SG115: the decode seqs, in batch order */
        NEED(owners.n0 == decoding);
        Py_ssize_t row = 0;
        for (Py_ssize_t i = 0; i < n; i++)
            if (AT(flags, i)) CHECK(AT(ids, i) == AT(owners, row++));
    }
done:
    return answer(&held, verdict);
}

/* model_input(seq_ids, query_start_loc, num_tokens, num_padding, input_ids, vocab_size,
 *   positions, max_model_len, slot_mapping, num_slots, padding_slot_id):
 *   SG010, SG301, SG303-SG305, SG308-SG310. */
static PyObject *model_input(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!arity(nargs, 11, "model_input")) return NULL;
    Held held = {.count = 0};
    Verdict verdict = YES;
    Arr ids, starts, input_ids, positions, slots;
    int64_t count, padding = 0, vocab, limit = 0, num_slots, pad_id = -1;
    int has_padding, has_limit, has_pad_id;
    NEED(take(&held, args[0], &ids, 1) && take(&held, args[1], &starts, 1));
    NEED(ids.n0 <= ROWS_LIMIT);  /* first: a large object is declined at once */
    NEED(as_int(args[2], &count) && as_optional_int(args[3], &padding, &has_padding));
    NEED(take(&held, args[4], &input_ids, 1) && as_int(args[5], &vocab));
    NEED(take(&held, args[6], &positions, 1));
    NEED(as_optional_int(args[7], &limit, &has_limit));
    NEED(take(&held, args[8], &slots, 1) && as_int(args[9], &num_slots));
    NEED(as_optional_int(args[10], &pad_id, &has_pad_id));
    NEED(positions.n0 >= count && count >= 0 && count <= TOKENS_LIMIT);
    UNIQUE(ids);  /* SG010 */
    int64_t real = count - (has_padding ? padding : 0);
    CHECK(real >= 0 && sound_spans(&starts, real));  /* SG304, SG309, SG308 */
    CHECK(within(&input_ids, 0, vocab));  /* SG301 */
    CHECK(positions_sound(&positions, &starts, real, has_limit, limit));  /* SG303 */
    CHECK(within(&slots, -1, num_slots));  /* SG305 */
    if (has_padding) {  /* SG308, SG310 */
        int64_t pad = has_pad_id ? pad_id : -1;
        for (Py_ssize_t i = 0; i < slots.n0; i++) {
            int64_t s = AT(slots, i);
            CHECK(i < real ? s != pad : s == pad);
        }
    }
done:
    return answer(&held, verdict);
}

/* drafter_input(seq_ids, query_start_loc, num_tokens, input_ids, vocab_size,
 *   sample_indices, positions, max_model_len, seq_lens, max_seq_len):
 *   SG010, SG301-SG304, SG306, SG307. */
static PyObject *drafter_input(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!arity(nargs, 10, "drafter_input")) return NULL;
    Held held = {.count = 0};
    Verdict verdict = YES;
    Arr ids, starts, input_ids, picks, positions, seq_lens;
    int64_t count, vocab, limit = 0, bound = 0;
    int has_limit, has_lens, has_bound;
    NEED(take(&held, args[0], &ids, 1) && take(&held, args[1], &starts, 1));
    NEED(ids.n0 <= ROWS_LIMIT);  /* first: a large object is declined at once */
    NEED(as_int(args[2], &count) && take(&held, args[3], &input_ids, 1));
    NEED(as_int(args[4], &vocab) && take(&held, args[5], &picks, 1));
    NEED(take(&held, args[6], &positions, 1) && as_optional_int(args[7], &limit, &has_limit));
    NEED(take_optional(&held, args[8], &seq_lens, 1, &has_lens));
    NEED(as_optional_int(args[9], &bound, &has_bound));
    Py_ssize_t m = starts.n0;
    NEED(count >= 0 && count <= TOKENS_LIMIT && positions.n0 >= count && m >= 1
         && picks.n0 == m - 1);
    NEED(!has_lens || (seq_lens.n0 == m - 1 && small(&seq_lens)));
    UNIQUE(ids);  /* SG010 */
    CHECK(sound_spans(&starts, count));  /* SG304 */
    CHECK(within(&input_ids, 0, vocab));  /* SG301 */
    for (Py_ssize_t i = 0; i < picks.n0; i++) {  /* SG302 */
        int64_t p = AT(picks, i);
        CHECK(p >= AT(starts, i) && p < AT(starts, i + 1));
    }
    CHECK(positions_sound(&positions, &starts, count, has_limit, limit));  /* SG303 */
    if (!has_lens) goto done;
    if (count > 0 && m >= 2) {  /* SG306: each nonempty span's last position + 1 */
        for (Py_ssize_t s = 0; s + 1 < m; s++) {
            int64_t begin = AT(starts, s), end = AT(starts, s + 1);
            if (end <= begin) continue;
            int64_t last = AT(positions, end - 1);
            if (has_limit && last >= limit) continue;
            CHECK(AT(seq_lens, s) - 1 == last);
        }
    }
    if (has_bound && seq_lens.n0)  /* SG307 */
        CHECK(within(&seq_lens, INT64_MIN, bound == INT64_MAX ? INT64_MAX : bound + 1));
done:
    return answer(&held, verdict);
}

/* Vocabulary ids exactly at the first ``real[i]`` columns of row i (``inclusive``: up to
 * and including column real[i]), -1 everywhere else (SG202, SG401's rows). */
static int prefix_layout(const Arr *tokens, const Arr *real, int inclusive, int64_t vocab) {
    for (Py_ssize_t i = 0; i < tokens->n0; i++) {
        int64_t r = AT(*real, i);
        for (Py_ssize_t j = 0; j < tokens->n1; j++) {
            int64_t t = AT2(*tokens, i, j);
            if (t < -1 || t >= vocab) return 0;
            int is_real = inclusive ? (int64_t)j <= r : (int64_t)j < r;
            if ((t != -1) != is_real) return 0;
        }
    }
    return 1;
}

/* verify_output(seq_ids, num_accepted, mtp_k, token_ids, vocab_size): SG010, SG201, SG202. */
static PyObject *verify_output(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!arity(nargs, 5, "verify_output")) return NULL;
    Held held = {.count = 0};
    Verdict verdict = YES;
    Arr ids, accepted, tokens;
    int64_t mtp_k, vocab;
    NEED(take(&held, args[0], &ids, 1) && take(&held, args[1], &accepted, 1));
    NEED(ids.n0 <= ROWS_LIMIT);  /* first: a large object is declined at once */
    NEED(as_int(args[2], &mtp_k) && take(&held, args[3], &tokens, 2) && as_int(args[4], &vocab));
    NEED(mtp_k >= 0 && mtp_k < ARITH_LIMIT && tokens.n0 == accepted.n0
         && tokens.n1 == mtp_k + 1);
    UNIQUE(ids);  /* SG010 */
    CHECK(within(&accepted, 0, mtp_k + 1));  /* SG201 */
    CHECK(prefix_layout(&tokens, &accepted, 1, vocab));  /* SG202 */
done:
    return answer(&held, verdict);
}

/* drafter_output(seq_ids, draft_token_ids, vocab_size, num_proposed, mtp_k):
 *   SG010, SG108, SG116. */
static PyObject *drafter_output(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!arity(nargs, 5, "drafter_output")) return NULL;
    Held held = {.count = 0};
    Verdict verdict = YES;
    Arr ids, drafts, counts;
    int64_t vocab, mtp_k;
    int has_counts;
    NEED(take(&held, args[0], &ids, 1) && take(&held, args[1], &drafts, 2));
    NEED(ids.n0 <= ROWS_LIMIT);  /* first: a large object is declined at once */
    NEED(as_int(args[2], &vocab) && take_optional(&held, args[3], &counts, 1, &has_counts));
    NEED(as_int(args[4], &mtp_k) && mtp_k < INT64_MAX);
    UNIQUE(ids);  /* SG010 */
    CHECK(within(&drafts, 0, vocab));  /* SG108 */
    if (has_counts) CHECK(within(&counts, 0, mtp_k + 1));  /* SG116 */
done:
    return answer(&held, verdict);
}

/* request_output(seq_ids, token_ids, num_emitted, num_generated, stop_token_ids,
 *   vocab_size, max_new_tokens, finished): SG010, SG401-SG404. */
static PyObject *request_output(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!arity(nargs, 8, "request_output")) return NULL;
    Held held = {.count = 0};
    Verdict verdict = YES;
    Arr ids, tokens, counts, given, stops, limits, finished;
    int64_t vocab;
    NEED(take(&held, args[0], &ids, 1) && take(&held, args[1], &tokens, 2));
    NEED(ids.n0 <= ROWS_LIMIT);  /* first: a large object is declined at once */
    NEED(take(&held, args[2], &counts, 1) && take(&held, args[3], &given, 1));
    NEED(take(&held, args[4], &stops, 2) && as_int(args[5], &vocab));
    NEED(take(&held, args[6], &limits, 1) && take(&held, args[7], &finished, 1));
    Py_ssize_t n = tokens.n0, width = tokens.n1;
    NEED(counts.n0 == n && given.n0 == n && stops.n0 == n && limits.n0 == n
         && finished.n0 == n && small(&given) && small(&limits));
    UNIQUE(ids);  /* SG010 */
    CHECK(within(&counts, 0, (int64_t)width + 1));  /* SG401's counts */
    CHECK(within(&given, 0, INT64_MAX));  /* SG401 */
    CHECK(within(&stops, -1, vocab));  /* SG401's stop ids */
    CHECK(prefix_layout(&tokens, &counts, 0, vocab));  /* SG401 */
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t count = AT(counts, i), total = AT(given, i) + count, limit = AT(limits, i);
        CHECK(total <= limit);  /* SG403 */
        int stopped_last = 0;
        for (Py_ssize_t j = 0; j < count; j++) {  /* past the emitted ones: all -1 */
            int64_t t = AT2(tokens, i, j);
            int hit = 0;
            for (Py_ssize_t c = 0; c < stops.n1 && !hit; c++) {
                int64_t stop = AT2(stops, i, c);
                hit = stop >= 0 && t == stop;
            }
            if (!hit) continue;
            CHECK((int64_t)j == count - 1);  /* SG402: nothing after a stop */
            stopped_last = 1;
        }
        if (count > 0 && (stopped_last || total >= limit))
            CHECK(AT(finished, i));  /* SG404 */
    }
done:
    return answer(&held, verdict);
}

typedef struct { int64_t first, end; } Interval;

static int by_first(const void *a, const void *b) {
    int64_t x = ((const Interval *)a)->first, y = ((const Interval *)b)->first;
    return (x > y) - (x < y);
}

/* logits_rows(seq_ids, num_drafts, row_starts, row_counts, num_logits, num_rows):
 *   SG010, SG311, SG312. */
static PyObject *logits_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!arity(nargs, 6, "logits_rows")) return NULL;
    Held held = {.count = 0};
    Verdict verdict = YES;
    Interval *intervals = NULL;
    Arr ids, drafts, starts, counts;
    int64_t num_logits, num_rows;
    NEED(take(&held, args[0], &ids, 1) && take(&held, args[1], &drafts, 1));
    NEED(ids.n0 <= ROWS_LIMIT);  /* first: a large object is declined at once */
    NEED(take(&held, args[2], &starts, 1) && take(&held, args[3], &counts, 1));
    NEED(as_int(args[4], &num_logits) && as_int(args[5], &num_rows));
    Py_ssize_t n = drafts.n0;
    NEED(starts.n0 == n && counts.n0 == n && small(&drafts) && small(&starts)
         && small(&counts));
    UNIQUE(ids);  /* SG010 */
    CHECK(within(&drafts, 0, INT64_MAX) && within(&starts, -1, INT64_MAX));
    int64_t rows = n;
    for (Py_ssize_t i = 0; i < n; i++) rows += AT(drafts, i);
    CHECK(rows == num_logits);  /* SG311 */
    Py_ssize_t covered = 0;
    int in_order = 1;  /* each request's rows after the previous one's: nothing to sort */
    int64_t previous_end = INT64_MIN;
    for (Py_ssize_t i = 0; i < n; i++) {  /* SG312: 1 + K rows each, inside the data */
        int64_t start = AT(starts, i), c = AT(counts, i);
        if (start < 0) { CHECK(c == 0); continue; }
        CHECK(c == AT(drafts, i) + 1 && start + c <= num_rows);
        in_order &= start >= previous_end;
        previous_end = start + c;
        covered++;
    }
    if (covered < 2 || in_order) goto done;
    intervals = (Interval *)malloc((size_t)covered * sizeof(Interval));
    NEED(intervals != NULL);
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t start = AT(starts, i);
        if (start >= 0) {
            intervals[k].first = start;
            intervals[k++].end = start + AT(counts, i);
        }
    }
    qsort(intervals, (size_t)covered, sizeof(Interval), by_first);
    for (Py_ssize_t i = 1; i < covered; i++)  /* SG312: no request's rows shared */
        CHECK(intervals[i].first >= intervals[i - 1].end);
done:
    free(intervals);
    return answer(&held, verdict);
}

/* step_transition(starts, expected_starts, refilled, num_drafts, decode_positions,
 *   draft_token_ids, draft_placeholder, has_proposal, proposed, prev_rows,
 *   expected_num_drafts, num_proposed, mtp_k, first_seen, drafts_handed_over):
 *   SG601, SG602, SG603, SG607, SG660, SG661. */
static PyObject *step_transition(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!arity(nargs, 15, "step_transition")) return NULL;
    Held held = {.count = 0};
    Verdict verdict = YES;
    Arr starts, expected, refilled, num_drafts, rows_at, drafts, has_proposal, proposed;
    Arr prev_rows, wanted, num_proposed, first_seen, handed;
    int64_t placeholder = 0, mtp_k;
    int has_placeholder, has_proposed_counts, has_first, has_handed;
    NEED(take(&held, args[0], &starts, 1) && take(&held, args[1], &expected, 1));
    NEED(take(&held, args[2], &refilled, 1) && take(&held, args[3], &num_drafts, 1));
    NEED(take(&held, args[4], &rows_at, 1) && take(&held, args[5], &drafts, 2));
    NEED(as_optional_int(args[6], &placeholder, &has_placeholder));
    NEED(take(&held, args[7], &has_proposal, 1) && take(&held, args[8], &proposed, 2));
    NEED(take(&held, args[9], &prev_rows, 1) && take(&held, args[10], &wanted, 1));
    NEED(take_optional(&held, args[11], &num_proposed, 1, &has_proposed_counts));
    NEED(as_int(args[12], &mtp_k));
    NEED(take_optional(&held, args[13], &first_seen, 1, &has_first));
    NEED(take_optional(&held, args[14], &handed, 1, &has_handed));
    NEED(expected.n0 == starts.n0 && starts.n0 <= ROWS_LIMIT);
    for (Py_ssize_t i = 0; i < starts.n0; i++) {  /* SG601 */
        int64_t want = AT(expected, i), start = AT(starts, i);
        CHECK(!(want >= 0 && start >= 0 && start != want));
    }
    Py_ssize_t rows = rows_at.n0;
    if (rows == 0) goto done;  /* every other rule reads decode rows only */
    NEED(refilled.n0 == rows && num_drafts.n0 == rows && drafts.n0 == rows
         && has_proposal.n0 == rows && proposed.n0 == rows && proposed.n1 == drafts.n1
         && wanted.n0 == rows);
    NEED(!has_proposed_counts || num_proposed.n0 == rows);
    NEED(!has_first || first_seen.n0 == rows);
    NEED(!has_handed || handed.n0 == rows);
    Py_ssize_t prev_n = prev_rows.n0;
    int all_in_range = 1;  /* numpy's take raises on any index out of range */
    for (Py_ssize_t i = 0; i < rows; i++) {
        int64_t at = AT(rows_at, i);
        all_in_range &= at >= -(int64_t)prev_n && at < (int64_t)prev_n;
    }
    for (Py_ssize_t i = 0; i < rows; i++) {
        int read = !AT(refilled, i);
        int64_t real = AT(num_drafts, i);
        int needs = !read;
        for (Py_ssize_t j = 0; j < drafts.n1; j++) {
            int64_t d = AT2(drafts, i, j);
            int is_placeholder = has_placeholder && d == placeholder;
            needs |= is_placeholder;
            if (read && AT(has_proposal, i) && (int64_t)j < real && !is_placeholder)
                CHECK(d == AT2(proposed, i, j));  /* SG602 */
        }
        if (needs) {  /* SG603: the runner's buffers need a previous row */
            int64_t at = AT(rows_at, i);
            NEED(all_in_range);
            CHECK(AT(prev_rows, at < 0 ? at + prev_n : at) >= 0);
        }
        int64_t want = AT(wanted, i);
        CHECK(!(want >= 0 && real < want));  /* SG607 */
        if (has_proposed_counts) {  /* SG660 */
            int64_t made = AT(num_proposed, i), carried = read ? real : mtp_k;
            CHECK(!(made >= 0 && carried > made));
        }
        if (has_first && AT(first_seen, i) && real > 0 && read)  /* SG661 */
            CHECK(has_handed && AT(handed, i));
    }
done:
    return answer(&held, verdict);
}

/* block_tables(block_tables, context_lens, block_size, read_middle): SG110's clean
 * answer. Each seq needs blocks 0 .. (len - 1) // block_size of its table: the first and
 * the last needed must be real (>= 0), and with ``read_middle`` every one between too.
 * A seq with no context, one that needs more blocks than the table has, or a block size
 * past int32 is declined: the rule itself explains those. */
static PyObject *block_tables(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!arity(nargs, 4, "block_tables")) return NULL;
    Held held = {.count = 0};
    Verdict verdict = YES;
    Arr tables, lens;
    int64_t size;
    NEED(take(&held, args[0], &tables, 2) && take(&held, args[1], &lens, 1));
    NEED(as_int(args[2], &size) && size > 0 && size <= INT32_MAX);
    int read_middle = PyObject_IsTrue(args[3]);
    NEED(read_middle >= 0 && lens.n0 == tables.n0 && tables.n0 <= ROWS_LIMIT);
    for (Py_ssize_t i = 0; i < tables.n0; i++) {
        int64_t length = AT(lens, i);
        NEED(length >= 1);
        int64_t last = (length - 1) / size;
        NEED(last < (int64_t)tables.n1);
        CHECK(AT2(tables, i, 0) >= 0 && AT2(tables, i, last) >= 0);
        if (!read_middle || last < 2) continue;
        if (tables.width && tables.s1 == tables.width) {
            const char *row = tables.buf + i * tables.s0 + tables.s1;
            CHECK(run_within(row, (Py_ssize_t)last - 1, tables.width, 0, INT64_MAX));
        } else {
            for (int64_t j = 1; j < last; j++) CHECK(AT2(tables, i, j) >= 0);
        }
    }
done:
    return answer(&held, verdict);
}

/* ===================================================================================
 * The step tracker's hand-overs, fused with its bookkeeping.
 *
 * Each step the tracker derives a StepTransition from the previous step and the batch,
 * and then the rows of the verifier and of the drafter are checked against the step and
 * folded into it. In numpy that is some sixty small calls a step; the kernels below do
 * each hand-over in one. A kernel answers True only where the object the tracker would
 * build passes every rule it runs, and only for input whose metadata is certainly clean
 * (Index fields int32 or int64, Bool fields bool): then the tracker need not build the
 * object at all. On True the bookkeeping is done; on False or None nothing was written
 * and the tracker takes its numpy path, which builds the object and names the offender.
 * =================================================================================== */

/* Past this magnitude a start plus an advance could overflow int64. */
#define TRACK_LIMIT ((int64_t)1 << 62)

static int is_flags(const Arr *a) { return a->load == load_bool; }

/* int32 or int64: the dtypes of an Index field, whose metadata is then clean. */
static int is_index(const Arr *a) { return a->width != 0; }

static int is_small_track(int64_t v) { return v > -TRACK_LIMIT && v < TRACK_LIMIT; }

/* A writable array of the tracker's own (int64, or bool with ``flags``), to fill in. */
static int take_out(Held *held, PyObject *obj, Arr *arr, int ndim, int flags) {
    return take_as(held, obj, arr, ndim, PyBUF_RECORDS)
        && (flags ? arr->load == load_bool : arr->load == load_i64);
}

static void put_i64(const Arr *a, Py_ssize_t i, Py_ssize_t j, int64_t v) {
    memcpy((char *)a->buf + i * a->s0 + j * a->s1, &v, 8);
}

static void put_flag(const Arr *a, Py_ssize_t i) { *((char *)a->buf + i * a->s0) = 1; }

static int truth(PyObject *obj, int *out) {
    int value = PyObject_IsTrue(obj);
    if (value < 0) return 0;
    *out = value;
    return 1;
}

/* transition(prev_starts, prev_advance, prev_drafted, prev_proposals, prev_num_proposed,
 *            prev_mtp_k, is_decode, starts, num_drafts, draft_token_ids,
 *            draft_placeholder, mtp_k, drafts_handed_over, prev_rows, same_order,
 *            refilled, remembered, ends, last_short, first_seen, progress, whole):
 * whether the StepTransition the tracker would derive from these passes SG601, SG602,
 * SG603, SG607, SG660 and SG661. Derives each row's fields as the tracker's numpy does
 * (step_tracker._transition) and checks them as the clearance does, without building
 * any of them. Writes nothing. */
static PyObject *transition(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!arity(nargs, 22, "transition")) return NULL;
    Held held = {.count = 0};
    Verdict verdict = YES;
    Arr p_starts, p_advance, p_drafted, p_proposals, p_counts, is_decode, starts;
    Arr num_drafts, drafts, handed, rows, refilled, remembered, ends, last_short, first;
    int64_t prev_k, k, placeholder = 0;
    int has_counts, has_placeholder, has_handed, has_last, has_first, same, progress, whole;
    NEED(take(&held, args[0], &p_starts, 1) && take(&held, args[1], &p_advance, 1));
    NEED(take(&held, args[2], &p_drafted, 1) && take(&held, args[3], &p_proposals, 2));
    NEED(take_optional(&held, args[4], &p_counts, 1, &has_counts));
    NEED(as_int(args[5], &prev_k));
    NEED(take(&held, args[6], &is_decode, 1) && take(&held, args[7], &starts, 1));
    NEED(take(&held, args[8], &num_drafts, 1) && take(&held, args[9], &drafts, 2));
    NEED(as_optional_int(args[10], &placeholder, &has_placeholder) && as_int(args[11], &k));
    NEED(take_optional(&held, args[12], &handed, 1, &has_handed));
    NEED(take(&held, args[13], &rows, 1) && truth(args[14], &same));
    NEED(take(&held, args[15], &refilled, 1) && take(&held, args[16], &remembered, 1));
    NEED(take(&held, args[17], &ends, 1));
    NEED(take_optional(&held, args[18], &last_short, 1, &has_last));
    NEED(take_optional(&held, args[19], &first, 1, &has_first));
    NEED(truth(args[20], &progress) && truth(args[21], &whole));
    /* the kinds that make the transition's metadata clean */
    NEED(is_flags(&is_decode) && is_flags(&p_drafted) && is_flags(&refilled)
         && is_flags(&remembered) && (!has_handed || is_flags(&handed))
         && (!has_first || is_flags(&first)));
    NEED(is_index(&starts) && is_index(&num_drafts) && is_index(&drafts));
    Py_ssize_t n = is_decode.n0, n_prev = p_starts.n0;
    NEED(n <= ROWS_LIMIT && starts.n0 == n && rows.n0 == n && remembered.n0 == n
         && ends.n0 == n);
    NEED(p_advance.n0 == n_prev && p_drafted.n0 == n_prev && p_proposals.n0 == n_prev
         && (!has_counts || p_counts.n0 == n_prev));
    same = same && n == n_prev;
    Py_ssize_t d = 0;
    for (Py_ssize_t i = 0; i < n; i++) d += AT(is_decode, i) != 0;
    NEED(num_drafts.n0 == d && drafts.n0 == d && drafts.n1 == k && refilled.n0 == d);
    NEED((!has_handed || handed.n0 == d) && (!has_last || last_short.n0 == d)
         && (!has_first || first.n0 == d));
    int same_width = prev_k == k && n_prev > 0;
    NEED(!same_width || p_proposals.n1 == k);
    Py_ssize_t j = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t row = AT(rows, i), start = AT(starts, i);
        int decode = AT(is_decode, i) != 0;
        if (progress) {  /* SG601: where the seq's last step left it */
            int64_t want = AT(remembered, i) ? AT(ends, i) : -1;
            if (n_prev > 0) {
                Py_ssize_t at = same ? i : (row > 0 ? (Py_ssize_t)row : 0);
                NEED(at < n_prev);
                int64_t advance = AT(p_advance, at), begun = AT(p_starts, at);
                NEED(is_small_track(advance) && is_small_track(begun));
                if ((same || row >= 0) && !AT(remembered, i) && advance >= 0)
                    want = begun + advance;
            }
            if (!decode && start >= 0 && start < want) want = -1;  /* a recompute */
            CHECK(!(want >= 0 && start >= 0 && start != want));
        }
        if (!decode) continue;
        /* the decode row's proposal from the previous step */
        int64_t prev_row = same ? (int64_t)i : row;
        Py_ssize_t at = prev_row > 0 ? (Py_ssize_t)prev_row : 0;
        int has_proposal = prev_row >= 0 && same_width;
        int64_t counted = k;
        if (same_width) {
            NEED(at < n_prev);
            has_proposal = has_proposal && AT(p_drafted, at);
            if (has_counts) counted = AT(p_counts, at);
        }
        int64_t made = has_proposal ? counted : (has_last ? AT(last_short, j) : -1);
        int read = !AT(refilled, j);
        int64_t wanted = whole && has_proposal && read ? made : -1;
        int64_t real = AT(num_drafts, j);
        int needs = !read;
        for (Py_ssize_t c = 0; c < drafts.n1; c++) {
            int64_t draft = AT2(drafts, j, c);
            int is_placeholder = has_placeholder && draft == placeholder;
            needs |= is_placeholder;
            if (read && has_proposal && (int64_t)c < real && !is_placeholder)
                CHECK(draft == AT2(p_proposals, at, c));  /* SG602 */
        }
        if (needs) CHECK(row >= 0);  /* SG603: the runner's buffers need a previous row */
        CHECK(!(wanted >= 0 && real < wanted));  /* SG607 */
        int64_t carried = read ? real : k;
        CHECK(!(made >= 0 && carried > made));  /* SG660 */
        if (has_first && AT(first, j) && real > 0 && read)  /* SG661 */
            CHECK(has_handed && AT(handed, j));
        j++;
    }
done:
    return answer(&held, verdict);
}

/* Whether the first ``count`` ids of ``ids`` are ``reference``'s at the batch positions
 * of its decode seqs (``decode`` set: those of ``is_decode``; else every one). */
static int rows_follow(const Arr *reference, const Arr *is_decode, int decode,
                       const Arr *ids) {
    Py_ssize_t j = 0;
    for (Py_ssize_t i = 0; i < reference->n0; i++) {
        if (decode && !AT(*is_decode, i)) continue;
        if (j >= ids->n0 || AT(*ids, j) != AT(*reference, i)) return 0;
        j++;
    }
    return j == ids->n0;
}

/* verify_rows(batch_ids, is_decode, num_drafts, seq_ids, num_accepted, mtp_k, before,
 *             advance): SG604 and SG605 on the verifier's rows against the step in
 * flight; on True, each row's accepted count is folded into ``advance`` as the
 * tracker's record_accepted does (``advance[p] = accepted + before[p]`` for the rows
 * with 0 <= accepted <= mtp_k). Declined where the step's ids repeat: the rows are then
 * matched by first occurrence, which numpy does. */
static PyObject *verify_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!arity(nargs, 8, "verify_rows")) return NULL;
    Held held = {.count = 0};
    Verdict verdict = YES;
    Arr batch_ids, is_decode, num_drafts, ids, accepted, before, advance;
    int64_t k;
    NEED(take(&held, args[0], &batch_ids, 1) && take(&held, args[1], &is_decode, 1));
    NEED(take(&held, args[2], &num_drafts, 1) && take(&held, args[3], &ids, 1));
    NEED(take(&held, args[4], &accepted, 1) && as_int(args[5], &k));
    NEED(take_out(&held, args[6], &before, 1, 0) && take_out(&held, args[7], &advance, 1, 0));
    NEED(is_index(&batch_ids) && is_flags(&is_decode) && is_index(&num_drafts)
         && is_index(&ids) && is_index(&accepted));
    Py_ssize_t n = batch_ids.n0;
    NEED(n <= ROWS_LIMIT && is_decode.n0 == n && before.n0 == n && advance.n0 == n);
    NEED(accepted.n0 == ids.n0);
    int unique = distinct(&batch_ids);
    NEED(unique == 1);
    CHECK(rows_follow(&batch_ids, &is_decode, 1, &ids));  /* SG604 */
    NEED(num_drafts.n0 == ids.n0);
    for (Py_ssize_t j = 0; j < ids.n0; j++)
        CHECK(AT(accepted, j) <= AT(num_drafts, j));  /* SG605 */
    for (Py_ssize_t i = 0, j = 0; i < n; i++) {
        if (!AT(is_decode, i)) continue;
        int64_t count = AT(accepted, j++);
        if (count >= 0 && count <= k) put_i64(&advance, i, 0, count + AT(before, i));
    }
done:
    return answer(&held, verdict);
}

/* draft_rows(batch_ids, seq_ids, draft_token_ids, num_proposed, mtp_k, proposals,
 *            drafted, counts): SG606 on the drafter's rows against the step in flight;
 * on True, each row's drafts are kept as its proposal (``proposals``, ``drafted``, and
 * ``counts`` from ``num_proposed`` where given), as the tracker's draft_rows does.
 * Declined where the step's ids repeat, or the drafts are not one integer row of
 * ``mtp_k`` per seq (the tracker then keeps nothing). */
static PyObject *draft_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!arity(nargs, 8, "draft_rows")) return NULL;
    Held held = {.count = 0};
    Verdict verdict = YES;
    Arr batch_ids, ids, drafts, proposed, proposals, drafted, counts;
    int64_t k;
    int has_proposed;
    NEED(take(&held, args[0], &batch_ids, 1) && take(&held, args[1], &ids, 1));
    NEED(take(&held, args[2], &drafts, 2));
    NEED(take_optional(&held, args[3], &proposed, 1, &has_proposed) && as_int(args[4], &k));
    NEED(take_out(&held, args[5], &proposals, 2, 0) && take_out(&held, args[6], &drafted, 1, 1));
    NEED(take_out(&held, args[7], &counts, 1, 0));
    NEED(is_index(&batch_ids) && is_index(&ids) && !is_flags(&drafts));
    NEED(!has_proposed || (!is_flags(&proposed) && proposed.n0 == ids.n0));
    Py_ssize_t n = batch_ids.n0;
    NEED(n <= ROWS_LIMIT && drafts.n0 == ids.n0 && drafts.n1 == k);
    NEED(proposals.n0 == n && proposals.n1 == k && drafted.n0 == n && counts.n0 == n);
    int unique = distinct(&batch_ids);
    NEED(unique == 1);
    CHECK(rows_follow(&batch_ids, NULL, 0, &ids));  /* SG606 */
    for (Py_ssize_t i = 0; i < n; i++) {
        for (Py_ssize_t c = 0; c < k; c++) put_i64(&proposals, i, c, AT2(drafts, i, c));
        put_flag(&drafted, i);
        if (has_proposed) put_i64(&counts, i, 0, AT(proposed, i));
    }
done:
    return answer(&held, verdict);
}

/* id_rows(reference, ids, out): for each id its index in ``reference`` (the first, when
 * repeated) or -1, written to ``out`` (int64, one per id), as IdLookup.rows does by
 * sorting. True when ``ids`` are the reference itself, in order and all distinct (each
 * row is then its own index), False otherwise; None (nothing written) for input it does
 * not read. */
static PyObject *id_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!arity(nargs, 3, "id_rows")) return NULL;
    Held held = {.count = 0};
    Verdict verdict = YES;
    Arr reference, ids, out;
    int64_t keys[2 * ROWS_LIMIT];
    int32_t first[2 * ROWS_LIMIT];
    NEED(take(&held, args[0], &reference, 1) && take(&held, args[1], &ids, 1));
    NEED(take_out(&held, args[2], &out, 1, 0));
    Py_ssize_t n = reference.n0, m = ids.n0;
    NEED(n <= ROWS_LIMIT && m <= TOKENS_LIMIT && out.n0 == m);
    int bits = 1;
    while (((Py_ssize_t)1 << bits) < 2 * n) bits++;
    size_t size = (size_t)1 << bits, mask = size - 1;
    memset(first, 0xff, size * sizeof(int32_t));
    int repeated = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t v = AT(reference, i);
        size_t at = (size_t)(mix(v) >> (64 - bits));
        while (first[at] >= 0 && keys[at] != v) at = (at + 1) & mask;
        if (first[at] >= 0) {
            repeated = 1;  /* the first index stays */
            continue;
        }
        keys[at] = v;
        first[at] = (int32_t)i;
    }
    int identical = !repeated && m == n && n > 0;
    for (Py_ssize_t j = 0; j < m; j++) {
        int64_t v = AT(ids, j), row = -1;
        if (n > 0) {
            size_t at = (size_t)(mix(v) >> (64 - bits));
            while (first[at] >= 0 && keys[at] != v) at = (at + 1) & mask;
            row = first[at];
        }
        identical &= row == (int64_t)j;
        put_i64(&out, j, 0, row);
    }
    if (!identical) verdict = NO;
done:
    return answer(&held, verdict);
}

/* touch_ends(ends, seq_ids, starts, advance): SeqMemory's touch of each seq in order with
 * its end (``start + advance``, or -1 where either is negative): the seq's entry of the
 * ``ends`` dict is moved to the dict's end, its most recent place. True when done; None
 * (nothing touched) for input it does not read, or where the touches would take the
 * dict past ``room`` more entries (seqs would be forgotten: SeqMemory does that). */
static PyObject *touch_ends(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!arity(nargs, 5, "touch_ends")) return NULL;
    Held held = {.count = 0};
    Verdict verdict = YES;
    Arr ids, starts, advance;
    int64_t room;
    PyObject *ends = args[0];
    NEED(PyDict_CheckExact(ends));
    NEED(take(&held, args[1], &ids, 1) && take(&held, args[2], &starts, 1));
    NEED(take(&held, args[3], &advance, 1) && as_int(args[4], &room));
    Py_ssize_t n = ids.n0;
    NEED(starts.n0 == n && advance.n0 == n && n <= ROWS_LIMIT && (int64_t)n <= room);
    for (Py_ssize_t i = 0; i < n; i++)
        NEED(is_small_track(AT(starts, i)) && is_small_track(AT(advance, i)));
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t start = AT(starts, i), moved = AT(advance, i);
        PyObject *key = PyLong_FromLongLong(AT(ids, i));
        PyObject *end = PyLong_FromLongLong(moved >= 0 && start >= 0 ? start + moved : -1);
        int failed = key == NULL || end == NULL;
        if (!failed) {
            int present = PyDict_Contains(ends, key);
            failed = present < 0 || (present && PyDict_DelItem(ends, key) < 0)
                || PyDict_SetItem(ends, key, end) < 0;
        }
        Py_XDECREF(key);
        Py_XDECREF(end);
        if (failed) {  /* out of memory, mid-way: an error, not a decline */
            release_all(&held);
            return NULL;
        }
    }
done:
    return answer(&held, verdict);
}

/* seen_seqs(bits, shift, seq_ids, is_decode, prev_rows, first): the step tracker's
 * SeenSeqs over one batch. The seqs absent from the previous forward (``prev_rows[i] <
 * 0``; every seq where ``prev_rows`` is None) are looked up and then recorded in the
 * Bloom filter ``bits`` (one flag per slot, a power of two of them; each id's two slots
 * are the top bits of its uint64 products with the two multipliers, ``>> shift``); where
 * ``first`` is given (bool, one per decode seq) it is set to whether each decode seq was
 * certainly never recorded before this batch (False for the seqs of the previous
 * forward). True when done; None (nothing written) for input it does not read. */
static PyObject *seen_seqs(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!arity(nargs, 6, "seen_seqs")) return NULL;
    Held held = {.count = 0};
    Verdict verdict = YES;
    Arr bits, ids, is_decode, prev_rows, first;
    int64_t shift;
    int has_rows, has_first;
    NEED(take_out(&held, args[0], &bits, 1, 1) && as_int(args[1], &shift));
    NEED(take(&held, args[2], &ids, 1) && take(&held, args[3], &is_decode, 1));
    NEED(take_optional(&held, args[4], &prev_rows, 1, &has_rows));
    has_first = args[5] != Py_None;
    NEED(!has_first || take_out(&held, args[5], &first, 1, 1));
    Py_ssize_t n = ids.n0, slots = bits.n0;
    NEED(n <= ROWS_LIMIT && is_flags(&is_decode) && is_decode.n0 == n);
    NEED(!has_rows || prev_rows.n0 == n);
    NEED(shift >= 1 && shift <= 63 && slots == ((Py_ssize_t)1 << (64 - shift)));
    Py_ssize_t d = 0;
    for (Py_ssize_t i = 0; i < n; i++) d += AT(is_decode, i) != 0;
    NEED(!has_first || first.n0 == d);
    const uint64_t m1 = 0x9E3779B97F4A7C15ULL, m2 = 0xBF58476D1CE4E5B9ULL;
    char *flags = (char *)bits.buf;
    if (has_first) {  /* every lookup before any record: a repeated id is new twice */
        for (Py_ssize_t i = 0, j = 0; i < n; i++) {
            if (!AT(is_decode, i)) continue;
            int unseen = 0;
            if (!has_rows || AT(prev_rows, i) < 0) {
                uint64_t key = (uint64_t)AT(ids, i);
                unseen = !(flags[((key * m1) >> shift) * bits.s0]
                           && flags[((key * m2) >> shift) * bits.s0]);
            }
            *((char *)first.buf + j * first.s0) = (char)unseen;
            j++;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (has_rows && AT(prev_rows, i) >= 0) continue;
        uint64_t key = (uint64_t)AT(ids, i);
        flags[((key * m1) >> shift) * bits.s0] = 1;
        flags[((key * m2) >> shift) * bits.s0] = 1;
    }
done:
    return answer(&held, verdict);
}

/* The kind of a native-order buffer's elements, as numpy's dtype.kind says it: 'i' for
 * any integer (unsigned ones and uint64 included), 'b' for bool, 0 for anything else
 * (floats, structs, a byte order not native: numpy's own reading answers then). */
static char buffer_kind(const Py_buffer *view) {
    const char *f = view->format ? view->format : "B";
    if (*f == '@' || *f == '=') f++;
    if (!*f || f[1]) return 0;
    switch (*f) {
    case '?': return view->itemsize == 1 ? 'b' : 0;
    case 'b': case 'h': case 'i': case 'l': case 'q':
    case 'B': case 'H': case 'I': case 'L': case 'Q': return 'i';
    default: return 0;
    }
}

/* ``obj``, a numpy array (the caller has checked), seen through its buffer: its kind
 * (buffer_kind) and shape. 1 when read, 0 when not read here. */
static int plan_array(Held *held, PyObject *obj, char *kind, const Py_ssize_t **shape,
                      int *ndim) {
    if (held->count >= MAX_HELD) return 0;
    Py_buffer *view = &held->views[held->count];
    if (PyObject_GetBuffer(obj, view, PyBUF_RECORDS_RO) < 0) return 0;
    held->count++;
    *kind = buffer_kind(view);
    *shape = view->shape;
    *ndim = view->ndim;
    return *kind != 0;
}

static int is_vector(int ndim, const Py_ssize_t *shape, Py_ssize_t n) {
    return ndim == 1 && shape[0] == n;
}

/* plan_sound(ndarray, mtp_k, stable_ids, seq_ids, is_decode, starts, num_scheduled,
 *            draft_token_ids, num_drafts, token_ids, num_before_drafts,
 *            drafts_handed_over, first_scheduled): StepPlan.is_sound() in one call.
 * True or False as the method answers; None (it answers itself) for arrays read
 * otherwise than here: another byte order, a dtype of another kind where the method
 * would look at its kind. ``ndarray`` is numpy's array type. */
static PyObject *plan_sound(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!arity(nargs, 13, "plan_sound")) return NULL;
    Held held = {.count = 0};
    Verdict verdict = YES;
    PyObject *ndarray = args[0];
    NEED(PyType_Check(ndarray));
    char kind[6];
    const Py_ssize_t *shape[6];
    int ndim[6];
    for (int i = 0; i < 6; i++) {  /* seq_ids .. num_drafts: required arrays */
        if (!PyObject_TypeCheck(args[3 + i], (PyTypeObject *)ndarray)) {
            verdict = NO;
            goto done;
        }
        NEED(plan_array(&held, args[3 + i], &kind[i], &shape[i], &ndim[i]));
    }
    /* token_ids: any array at all, or None */
    CHECK(args[9] == Py_None || PyObject_TypeCheck(args[9], (PyTypeObject *)ndarray));
    CHECK(ndim[0] == 1);
    Py_ssize_t n = shape[0][0];
    CHECK(is_vector(ndim[1], shape[1], n) && is_vector(ndim[2], shape[2], n)
          && is_vector(ndim[3], shape[3], n) && kind[1] == 'b');
    /* the decode rows: is_decode's True entries */
    Py_buffer *flags = &held.views[1];
    Py_ssize_t decode = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        decode += *((const char *)flags->buf + i * flags->strides[0]) != 0;
    char extra_kind;
    const Py_ssize_t *extra_shape;
    int extra_ndim;
    if (args[10] != Py_None) {  /* num_before_drafts: integers, one per decode row */
        CHECK(PyObject_TypeCheck(args[10], (PyTypeObject *)ndarray));
        NEED(plan_array(&held, args[10], &extra_kind, &extra_shape, &extra_ndim));
        CHECK(is_vector(extra_ndim, extra_shape, decode) && extra_kind == 'i');
    }
    for (int i = 11; i < 13; i++) {  /* drafts_handed_over, first_scheduled: flags */
        if (args[i] == Py_None) continue;
        CHECK(PyObject_TypeCheck(args[i], (PyTypeObject *)ndarray));
        NEED(plan_array(&held, args[i], &extra_kind, &extra_shape, &extra_ndim));
        CHECK(is_vector(extra_ndim, extra_shape, i == 11 ? decode : n) && extra_kind == 'b');
    }
    CHECK(PyLong_CheckExact(args[1]) && PyBool_Check(args[2]));
    int64_t k;
    CHECK(as_int(args[1], &k) && k >= 1);
    CHECK(kind[0] == 'i' && kind[2] == 'i' && kind[3] == 'i' && kind[4] == 'i' && kind[5] == 'i');
    CHECK(ndim[4] == 2 && shape[4][0] == decode && shape[4][1] == k);
    CHECK(is_vector(ndim[5], shape[5], decode));
done:
    return answer(&held, verdict);
}

/* no_short_proposals(drafted, num_proposed, rows, mtp_k): whether no row of ``rows`` (a
 * flag per row) that the drafter ran for proposed fewer than ``mtp_k`` drafts (the tracker
 * asks with ``rows`` = ``drafted``: it then has no short proposal to note); None for input
 * not read here. */
static PyObject *no_short_proposals(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!arity(nargs, 4, "no_short_proposals")) return NULL;
    Held held = {.count = 0};
    Verdict verdict = YES;
    Arr drafted, counts, rows;
    int64_t k;
    NEED(take(&held, args[0], &drafted, 1) && take(&held, args[1], &counts, 1));
    NEED(take(&held, args[2], &rows, 1) && as_int(args[3], &k));
    NEED(is_flags(&drafted) && is_flags(&rows) && !is_flags(&counts));
    NEED(counts.n0 == drafted.n0 && rows.n0 == drafted.n0);
    for (Py_ssize_t i = 0; i < drafted.n0; i++)
        CHECK(!(AT(drafted, i) && AT(rows, i) && AT(counts, i) < k));
done:
    return answer(&held, verdict);
}

/* A plain int (not a bool, not a subclass) within int64 into *out; 0 for anything else. */
static int exact_int(PyObject *obj, int64_t *out) {
    return PyLong_CheckExact(obj) && as_int(obj, out);
}

/* pack_ints(values, width, out): ``values``, a list or tuple of plain ints (width 0) or of
 * lists of exactly ``width`` plain ints, written in order into ``out`` (a writable,
 * contiguous int64 vector of that many entries). True when every entry was; None where
 * one is anything else (a bool, a numpy integer, a float, an int past int64, a row of
 * another length), and then ``out`` holds nothing to read: the caller's own reading of
 * the values decides what they are. An engine hands its ids, counts and draft lists
 * over as Python lists; numpy first discovers their shape and dtype, struct builds an
 * argument tuple of them, and this reads them where they lie. */
static PyObject *pack_ints(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!arity(nargs, 3, "pack_ints")) return NULL;
    Held held = {.count = 0};
    Verdict verdict = YES;
    Arr out;
    int64_t width;
    PyObject *values = args[0];
    NEED(PyList_CheckExact(values) || PyTuple_CheckExact(values));
    NEED(as_int(args[1], &width) && width >= 0 && width <= ARITH_LIMIT);
    NEED(take_out(&held, args[2], &out, 1, 0) && contiguous(&out));
    Py_ssize_t n = PySequence_Fast_GET_SIZE(values), per = width ? (Py_ssize_t)width : 1;
    NEED(n <= PY_SSIZE_T_MAX / per && out.n0 == n * per);
    /* Nothing below runs Python code (plain ints only), so the list cannot change. */
    PyObject **items = PySequence_Fast_ITEMS(values);
    int64_t *into = (int64_t *)out.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = items[i];
        if (!width) {
            NEED(exact_int(item, &into[i]));
            continue;
        }
        NEED(PyList_CheckExact(item) && PyList_GET_SIZE(item) == per);
        for (Py_ssize_t j = 0; j < per; j++)
            NEED(exact_int(PyList_GET_ITEM(item, j), &into[i * per + j]));
    }
done:
    return answer(&held, verdict);
}

/* use_torch(Tensor, strided, bool, int8, uint8, int16, uint16, int32, uint32, int64): name
 * torch's types (None for a dtype this torch lacks),
 * so that the kernels read CPU tensors in place from then on. */
static PyObject *use_torch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!arity(nargs, 2 + TORCH_DTYPES, "use_torch")) return NULL;
    if (!PyType_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "use_torch: the first argument is torch.Tensor");
        return NULL;
    }
    Py_XSETREF(tensor_type, Py_NewRef(args[0]));
    Py_XSETREF(strided_layout, Py_NewRef(args[1]));
    for (int i = 0; i < TORCH_DTYPES; i++)
        Py_XSETREF(torch_dtypes[i], Py_NewRef(args[2 + i]));
    Py_RETURN_NONE;
}

#define KERNEL(name, doc) {#name, (PyCFunction)(void (*)(void))name, METH_FASTCALL, doc}

static PyMethodDef kernel_methods[] = {
    KERNEL(unique_ids, "SG010 alone: True, False, or None where not read here."),
    KERNEL(scheduled_batch, "The clearance of a ScheduledBatch."),
    KERNEL(model_input, "The clearance of a ModelInput."),
    KERNEL(drafter_input, "The clearance of a DrafterInput."),
    KERNEL(verify_output, "The clearance of a VerifyOutput."),
    KERNEL(drafter_output, "The clearance of a DrafterOutput (and of DraftTokens)."),
    KERNEL(request_output, "The clearance of a RequestOutput."),
    KERNEL(logits_rows, "The clearance of a LogitsRows."),
    KERNEL(block_tables, "SG110's answer on a clean batch's block tables."),
    KERNEL(step_transition, "The clearance of a StepTransition."),
    KERNEL(transition, "A StepTransition's rules, derived and checked in one pass."),
    KERNEL(verify_rows, "SG604 and SG605 on the verifier's rows; folds accepted counts in."),
    KERNEL(draft_rows, "SG606 on the drafter's rows; keeps their proposals."),
    KERNEL(id_rows, "Each id's first row in a reference, and whether they are the same."),
    KERNEL(touch_ends, "SeqMemory's touch of each seq with its end, in order."),
    KERNEL(seen_seqs, "The tracker's SeenSeqs over one batch: looked up, then recorded."),
    KERNEL(plan_sound, "StepPlan.is_sound() in one call."),
    KERNEL(no_short_proposals, "Whether no drafted decode row proposed fewer than mtp_k drafts."),
    KERNEL(pack_ints, "Plain ints (or lists of them) packed into an int64 vector."),
    KERNEL(use_torch, "Name torch's tensor type, layout and dtypes: CPU tensors are then read in place."),
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef kernel_module = {
    PyModuleDef_HEAD_INIT, "_kernels",
    "The compiled clearances of the per-step boundary objects (see _compiled.py).", -1,
    kernel_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernels(void) {
    PyObject *module = PyModule_Create(&kernel_module);
    if (module == NULL) return NULL;
    static const char *names[] = {"is_cpu", "layout", "dtype", "is_neg", "shape", "stride",
                                  "data_ptr"};
    PyObject **slots[] = {&s_is_cpu, &s_layout, &s_dtype, &s_is_neg, &s_shape, &s_stride,
                          &s_data_ptr};
    for (int i = 0; i < 7; i++) {
        if (*slots[i] == NULL && (*slots[i] = PyUnicode_InternFromString(names[i])) == NULL) {
            Py_DECREF(module);
            return NULL;
        }
    }
    if (PyModule_AddIntConstant(module, "ROWS_LIMIT", ROWS_LIMIT) < 0
            || PyModule_AddIntConstant(module, "TOKENS_LIMIT", TOKENS_LIMIT) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
