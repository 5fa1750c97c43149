/* The models on one pre-tokenized piece: BPE, WordPiece, Unigram, each exactly as HF's. */
#include "mtok_tables.h"

/* ---- BPE -------------------------------------------------------------------------------- */

typedef struct {
    uint64_t key;         /* rank << 32 | position: HF's heap order, lowest rank then leftmost */
    int32_t id;           /* the merged token, to recognise stale entries as HF does */
    int32_t left, right;  /* the pair when queued: while both sides are unchanged it still merges to id */
} HeapItem;

static inline void heap_push(HeapItem *h, size_t *len, HeapItem x) {
    size_t i = (*len)++;
    while (i) {
        size_t parent = (i - 1) / 2;
        if (h[parent].key <= x.key)
            break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = x;
}

static inline HeapItem heap_pop(HeapItem *h, size_t *len) {
    HeapItem top = h[0], x = h[--*len];
    size_t n = *len, i = 0;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= n)
            break;
        size_t m = (l + 1 < n && h[l + 1].key < h[l].key) ? l + 1 : l;
        if (x.key <= h[m].key)
            break;
        h[i] = h[m];
        i = m;
    }
    if (n)
        h[i] = x;
    return top;
}

/* The merge of (left, right) from the model's own map or a .mtok's tables: 1 with its rank and
 * result, or 0. */
static inline int bpe_pair_table(const BPE *m, uint32_t left, uint32_t right, uint32_t *rank, int32_t *id) {
    if (m->mtok)
        return mtok_pair(m->mtok, left, right, rank, id);
    const PairSlot *s = pairmap_get(&m->merges, left, right);
    if (!s)
        return 0;
    *rank = s->rank;
    *id = s->id;
    return 1;
}

static inline size_t memo_slot(uint32_t left, uint32_t right) {
    return (size_t)((((uint64_t)left << 32 | right) * 0x9E3779B97F4A7C15ull) >> (64 - PAIR_MEMO_BITS));
}

/* The thread's pair memo for model m, emptied when it held another model's; NULL without
 * memory (the tables answer alone). */
static PairMemo *pair_memo(const BPE *m, Scratch *sc) {
    size_t n = (size_t)1 << PAIR_MEMO_BITS;
    if (!sc->pairs && !(sc->pairs = malloc(n * sizeof *sc->pairs)))
        return NULL;
    if (sc->pairs_of != m->serial) {
        memset(sc->pairs, 0xFF, n * sizeof *sc->pairs);
        sc->pairs_of = m->serial;
    }
    return sc->pairs;
}

/* bpe_pair_table out of line: the merge loops inline bpe_pair, whose memo answers most lookups,
 * and would grow past what the compiler inlines with the tables' probes in each of them. */
static __attribute__((noinline)) int bpe_pair_far(const BPE *m, uint32_t left, uint32_t right, uint32_t *rank,
                                                  int32_t *id) {
    return bpe_pair_table(m, left, right, rank, id);
}

/* bpe_pair_table through the memo (NULL: none). */
static inline __attribute__((always_inline)) int bpe_pair(const BPE *m, PairMemo *memo, uint32_t left,
                                                          uint32_t right, uint32_t *rank, int32_t *id) {
    if (!memo)
        return bpe_pair_far(m, left, right, rank, id);
    PairMemo *e = &memo[memo_slot(left, right)];
    if (e->left != left || e->right != right) {
        uint32_t r = 0;
        int32_t i = -1;
        if (!bpe_pair_far(m, left, right, &r, &i))
            i = -1;
        *e = (PairMemo){left, right, r, i};
    }
    *rank = e->rank;
    *id = e->id;
    return e->id >= 0;
}

static inline void push_pair(const BPE *m, PairMemo *memo, HeapItem *heap, size_t *len, const int32_t *c, size_t left,
                             size_t right) {
    uint32_t rank;
    int32_t id;
    if (bpe_pair(m, memo, (uint32_t)c[left], (uint32_t)c[right], &rank, &id))
        heap_push(heap, len, (HeapItem){(uint64_t)rank << 32 | left, id, c[left], c[right]});
}

/* Pieces of up to this many symbols are merged by scan_merge. */
enum { SCAN_MERGE_MAX = 32 };

/* scan_merge's key of a pair: its rank with the top bit flipped, so that signed compares (all
 * SSE2 has) order ranks as unsigned; SCAN_NONE for a pair without a merge (ranks stay below
 * UINT32_MAX, the key of which it is). */
#define SCAN_NONE INT32_MAX

/* Start fetching the table slot of the pair (left, right) where the memo lacks it: on new text
 * most of these lookups miss every cache, and a merge's are independent of each other. */
static inline void pair_fetch(const BPE *m, const PairMemo *memo, uint32_t left, uint32_t right) {
    if (memo) {
        const PairMemo *e = &memo[memo_slot(left, right)];
        if (e->left == left && e->right == right)
            return;
    }
    if (m->mtok)
        fetch_line(&m->mtok->mslots[mtok_first_slot(mtok_pair_hash(left, right), m->mtok->msize)]);
    else
        fetch_line(&m->merges.slots[pairmap_slot(&m->merges, (uint64_t)left << 32 | right)]);
}

/* The key and result of the pair c[i], c[i + 1] into key[i], id[i]. */
static inline void scan_pair(const BPE *m, PairMemo *memo, const int32_t *c, size_t i, int32_t *key, int32_t *id) {
    uint32_t rank;
    key[i] = bpe_pair(m, memo, (uint32_t)c[i], (uint32_t)c[i + 1], &rank, &id[i]) ? (int32_t)(rank ^ 0x80000000u)
                                                                                   : SCAN_NONE;
}

#ifdef __SSE2__
static inline __m128i min_epi32(__m128i a, __m128i b) {
    __m128i lower = _mm_cmplt_epi32(a, b);
    return _mm_or_si128(_mm_and_si128(lower, a), _mm_andnot_si128(lower, b));
}
#endif

/* The leftmost of the lowest keys of key[0..n) (n >= 1), with SCAN_NONE from n to the next
 * multiple of 4, and that key into *low: four keys to a step where SSE2 has them, without the
 * branch on which is lowest that the predictor gets wrong about once a merge. */
static inline size_t scan_lowest(const int32_t *key, size_t n, int32_t *low) {
#ifdef __SSE2__
    __m128i best = _mm_loadu_si128((const __m128i *)(const void *)key);
    for (size_t i = 4; i < n; i += 4)
        best = min_epi32(best, _mm_loadu_si128((const __m128i *)(const void *)(key + i)));
    best = min_epi32(best, _mm_shuffle_epi32(best, _MM_SHUFFLE(1, 0, 3, 2)));
    best = min_epi32(best, _mm_shuffle_epi32(best, _MM_SHUFFLE(2, 3, 0, 1)));
    *low = _mm_cvtsi128_si32(best);
    for (size_t i = 0;; i += 4) {
        __m128i eq = _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(const void *)(key + i)), best);
        unsigned lanes = (unsigned)_mm_movemask_ps(_mm_castsi128_ps(eq));
        if (lanes)
            return i + (size_t)__builtin_ctz(lanes);
    }
#else
    size_t j = 0;
    int32_t lo = key[0];
    for (size_t i = 1; i < n; i++) {
        int lower = key[i] < lo;
        lo = lower ? key[i] : lo;
        j = lower ? i : j;
    }
    *low = lo;
    return j;
#endif
}

/* bpe_merge on a short piece: the order HF's queue gives (the lowest rank, then the leftmost
 * pair) found by scanning the current pairs, as tiktoken does. A queued pair whose sides have
 * merged since is skipped by HF unless the new pair there merges to the same token, which
 * would cover other bytes, so it never does: merging the lowest current pair is HF's order.
 * Shorter than the queue's bookkeeping on the words most pieces are. Its steps apart, so that
 * merge_ahead can run several pieces' in turns: each step's pair lookups are fetched at its end
 * and read at the start of the next. */
typedef struct {
    int32_t *c;
    size_t n;
    size_t at;  /* the merge last made, SIZE_MAX before the first */
    int32_t key[SCAN_MERGE_MAX + 3], id[SCAN_MERGE_MAX];
} Scan;

static inline void scan_fetch(const BPE *m, const PairMemo *memo, Scan *s) {
    for (size_t i = 0; i + 1 < s->n; i++)
        pair_fetch(m, memo, (uint32_t)s->c[i], (uint32_t)s->c[i + 1]);
    s->at = SIZE_MAX;
}

/* The pairs fetched at the step before: every pair at first (of n >= 2 symbols), else those
 * beside the last merge */
static inline void scan_keys(const BPE *m, PairMemo *memo, Scan *s) {
    size_t n = s->n, j = s->at;
    if (j == SIZE_MAX) {
        for (size_t i = 0; i + 1 < n; i++)
            scan_pair(m, memo, s->c, i, s->key, s->id);
        for (size_t i = n - 1; i < n + 3; i++)
            s->key[i] = SCAN_NONE;
        return;
    }
    if (j)
        scan_pair(m, memo, s->c, j - 1, s->key, s->id);
    if (j + 1 < n)
        scan_pair(m, memo, s->c, j, s->key, s->id);
}

/* Merge the lowest pair and fetch the pairs it makes; 0 when no pair merges. */
static inline int scan_step(const BPE *m, const PairMemo *memo, Scan *s) {
    if (s->n < 2)
        return 0;
    int32_t low, *c = s->c, *key = s->key, *id = s->id;
    size_t j = scan_lowest(key, s->n - 1, &low);
    if (low == SCAN_NONE)
        return 0;
    c[j] = id[j];
    size_t n = --s->n;
    memmove(c + j + 1, c + j + 2, (n - j - 1) * sizeof *c);
    if (j + 1 < n) {
        memmove(key + j + 1, key + j + 2, (n - j - 2) * sizeof *key);
        memmove(id + j + 1, id + j + 2, (n - j - 2) * sizeof *id);
    }
    key[n - 1] = SCAN_NONE;
    if (j)
        pair_fetch(m, memo, (uint32_t)c[j - 1], (uint32_t)c[j]);
    if (j + 1 < n)
        pair_fetch(m, memo, (uint32_t)c[j], (uint32_t)c[j + 1]);
    s->at = j;
    return 1;
}

static size_t scan_merge(const BPE *m, PairMemo *memo, int32_t *c, size_t n) {
    Scan s;
    s.c = c;
    s.n = n;
    scan_fetch(m, memo, &s);
    do
        scan_keys(m, memo, &s);
    while (scan_step(m, memo, &s));
    return s.n;
}

/* HF's Word::merge_all on c[0..n): pop the lowest (rank, position) pair, skip it if one side
 * has merged since it was queued, merge, queue the two new neighbour pairs. O(n log n).
 * Merged-away symbols are marked -1 and compacted at the end; returns the new count. */
static int bpe_merge(const BPE *m, int32_t *c, size_t n, Scratch *sc, size_t *out_n) {
    *out_n = n;
    if (n < 2)
        return 0;
    uint32_t rank;
    int32_t id;
    PairMemo *memo = pair_memo(m, sc);
    if (n <= SCAN_MERGE_MAX) {
        *out_n = scan_merge(m, memo, c, n);
        return 0;
    }
    /* at most n - 1 initial pairs plus two per merge */
    if (scratch_work(sc, 3 * n * sizeof(HeapItem) + 2 * n * sizeof(int32_t)) < 0)
        return -1;
    HeapItem *heap = sc->work;
    int32_t *prev = (int32_t *)(heap + 3 * n), *next = prev + n;
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    for (size_t i = 0; i + 1 < n; i++)
        push_pair(m, memo, heap, &len, c, i, i + 1);
    while (len) {
        HeapItem top = heap_pop(heap, &len);
        size_t pos = (size_t)(top.key & 0xFFFFFFFFu);
        if (c[pos] < 0 || next[pos] < 0)
            continue;
        size_t right = (size_t)next[pos];
        /* HF looks the current pair up again; the queued pair itself needs no second lookup */
        if ((c[pos] != top.left || c[right] != top.right) &&
            (!bpe_pair(m, memo, (uint32_t)c[pos], (uint32_t)c[right], &rank, &id) || id != top.id))
            continue;
        c[pos] = top.id;
        c[right] = -1;
        next[pos] = next[right];
        if (next[right] >= 0)
            prev[next[right]] = (int32_t)pos;
        if (prev[pos] >= 0)
            push_pair(m, memo, heap, &len, c, (size_t)prev[pos], pos);
        if (next[pos] >= 0)
            push_pair(m, memo, heap, &len, c, pos, (size_t)next[pos]);
    }
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        if (c[i] >= 0)
            c[w++] = c[i];
    *out_n = w;
    return 0;
}

static __attribute__((noinline)) int32_t char_token_far(const BPE *m, uint32_t cp) {
    uint8_t u[4];
    size_t k = utf8_encode(&cp, 1, u);
    return m->mtok ? mtok_token_id(m->mtok, u, k) : strmap_get(&m->vocab, u, k);
}

/* The token of one character of a char-level vocabulary, or -1. A character past the BMP is
 * looked up apart: with that lookup inline, the compiler kept the whole as a call, which was a
 * tenth of Mistral's warm CJK text (two calls a character). */
static inline __attribute__((always_inline)) int32_t char_token(const BPE *m, uint32_t cp) {
    return cp < 0x10000 ? m->bmp[cp] : char_token_far(m, cp);
}

/* The token of a char-level piece's last character + end_of_word_suffix, or -1. */
static int32_t end_char_token(const BPE *m, uint32_t cp) {
    uint8_t key[4 + BPE_SUFFIX_MAX];
    size_t k = utf8_encode(&cp, 1, key);
    memcpy(key + k, m->suffix, m->suffix_len);
    k += m->suffix_len;
    return m->mtok ? mtok_token_id(m->mtok, key, k) : strmap_get(&m->vocab, key, k);
}

/* HF's BPE::merge_word initial symbols: one per character (per byte for byte-level
 * vocabularies), the last one with end_of_word_suffix; an unknown one becomes its <0xXX> byte
 * tokens with byte_fallback, else the unk token, consecutive unknowns fused with fuse_unk. A
 * pending unk survives byte-fallback characters, as in HF. */
static int bpe_symbols(const BPE *m, const uint32_t *cps, size_t n, const uint8_t *b, size_t nb,
                       IdBuf *out) {
    int pending = 0;
    size_t units = m->byte_level ? nb : n;
    for (size_t i = 0; i < units; i++) {
        int32_t id = m->suffix_len && i + 1 == units ? (m->byte_level ? m->end_unit[b[i]] : end_char_token(m, cps[i]))
                     : m->byte_level                 ? m->byte_unit[b[i]]
                                                     : char_token(m, cps[i]);
        if (id >= 0) {
            if (pending && ids_push(out, m->unk_id) < 0)
                return -1;
            pending = 0;
            if (ids_push(out, id) < 0)
                return -1;
            continue;
        }
        if (m->byte_fallback && !m->byte_level) {
            uint8_t u[4];
            size_t k = utf8_encode(&cps[i], 1, u), j = 0;
            while (j < k && m->fallback[u[j]] >= 0)
                j++;
            if (j == k) {
                for (j = 0; j < k; j++)
                    if (ids_push(out, m->fallback[u[j]]) < 0)
                        return -1;
                continue;
            }
        }
        if (m->unk_id >= 0) {
            if (pending && !m->fuse_unk && ids_push(out, m->unk_id) < 0)
                return -1;
            pending = 1;
        }
    }
    if (pending && ids_push(out, m->unk_id) < 0)
        return -1;
    return 0;
}

/* Whether a piece's parts are cut between characters a and b (a_has, b_has: whether each has a
 * token of its own): two characters that have tokens of their own but stand side by side in no
 * token (BPE.joins). HF merges the whole piece; no merge crosses such a cut and each side's
 * merges keep their (rank, position) order, so merging the parts alone gives the same ids. A
 * character without a token (byte fallback, unk) is never cut from its neighbours, whose
 * symbols it may join. */
static inline int part_cut(const BPE *m, uint32_t a, int a_has, uint32_t b, int b_has) {
    size_t bit = join_bit(a, b);
    return a_has & b_has & !(m->joins[bit / 64] >> (bit % 64) & 1);
}

/* The end of the first part of cps[0..n) */
static size_t part_end(const BPE *m, const uint32_t *cps, size_t n) {
    int had = char_token(m, cps[0]) >= 0;
    for (size_t i = 1; i < n; i++) {
        int has = char_token(m, cps[i]) >= 0;
        if (part_cut(m, cps[i - 1], had, cps[i], has))
            return i;
        had = has;
    }
    return n;
}

/* Byte-level joins (BPE.byte_joins). A merge never joins two characters unless some token holds
 * bytes of both side by side, and a token may hold only part of a character at either end: its
 * boundaries are keyed by both characters where it holds them whole, JOIN_ANY for a side it holds
 * part of, and by the two bytes at the boundary (JOIN_BYTE) where it holds part of both. Pairs of
 * ASCII characters are left out (the filter stays small and cheap to build) and never cut. */
#define JOIN_ANY 0xFFFFFFFFu
#define JOIN_BYTE 0x80000000u

static inline void join_set(uint64_t *bits, uint32_t a, uint32_t b) {
    size_t bit = join_bit(a, b);
    bits[bit / 64] |= 1ull << (bit % 64);
}

static inline int join_has(const uint64_t *bits, uint32_t a, uint32_t b) {
    size_t bit = join_bit(a, b);
    return (int)(bits[bit / 64] >> (bit % 64) & 1);
}

void bpe_byte_joins_add(uint64_t *bits, const uint8_t *t, size_t n) {
    size_t i = 0;
    while (i < n && t[i] < 0x80)
        i++;
    if (i == n)
        return;
    /* the characters in order from the one before the first non-ASCII byte; a run of
     * continuation bytes (a character's end, at the token's start) is one part of a character */
    i = i ? i - 1 : 0;
    uint32_t prev = 0;
    uint8_t prev_last = 0;
    for (int first = 1; i < n; first = 0) {
        size_t sub, step = utf8_sequence(t + i, n - i, &sub);
        uint32_t c = JOIN_ANY;
        if (step) {
            utf8_get(t + i, step, &c);
        } else {
            step = 1;
            while (i + step < n && (t[i + step] & 0xC0) == 0x80)
                step++;
        }
        if (!first && (prev >= 0x80 || c >= 0x80)) {
            if (prev == JOIN_ANY && c == JOIN_ANY)
                join_set(bits, JOIN_BYTE | prev_last, JOIN_BYTE | t[i]);
            else
                join_set(bits, prev, c);
        }
        prev = c;
        prev_last = t[i + step - 1];
        i += step;
    }
}

int bpe_byte_joins_init(BPE *m, size_t due) {
    if (!(m->byte_joins = calloc(1, sizeof *m->byte_joins)))
        return -1;
    m->byte_joins->due = due;
    if (due)
        return 0;
    if (!(m->byte_joins->bits = calloc(1, BPE_JOINS_BYTES)))
        return -1;
    atomic_store_explicit(&m->byte_joins->state, JOINS_READY, memory_order_relaxed);
    return 0;
}

void bpe_byte_joins_free(BPE *m) {
    if (m->byte_joins)
        free(m->byte_joins->bits);
    free(m->byte_joins);
    m->byte_joins = NULL;
}

/* Whether some token may hold bytes of both a and b side by side (bpe_byte_joins_add's keys). */
static inline int byte_joined(const uint64_t *bits, uint32_t a, uint32_t b) {
    if (a < 0x80 && b < 0x80)
        return 1;
    uint8_t ua[4], ub[4];
    size_t na = utf8_put(a, ua);
    utf8_put(b, ub);
    return join_has(bits, a, b) || join_has(bits, JOIN_ANY, b) || join_has(bits, a, JOIN_ANY) ||
           join_has(bits, JOIN_BYTE | ua[na - 1], JOIN_BYTE | ub[0]);
}

/* The byte-level joins for a piece of nb bytes: a .mtok's are built here once they are due, by
 * the first thread to ask; NULL before, while another thread builds them, or where they could
 * not be. */
static const uint64_t *bpe_byte_joins(const BPE *m, size_t nb) {
    ByteJoins *j = m->byte_joins;
    int state = atomic_load_explicit(&j->state, memory_order_acquire);
    if (state == JOINS_READY)
        return j->bits;
    if (state != JOINS_UNBUILT || atomic_fetch_add_explicit(&j->owed, nb, memory_order_relaxed) + nb < j->due)
        return NULL;
    int unbuilt = JOINS_UNBUILT;
    if (!atomic_compare_exchange_strong(&j->state, &unbuilt, JOINS_BUILDING))
        return NULL;
    uint64_t *bits = calloc(1, BPE_JOINS_BYTES);
    if (!bits || mtok_byte_joins(m->mtok, bits) < 0) {
        free(bits);
        atomic_store_explicit(&j->state, JOINS_FAILED, memory_order_release);
        return NULL;
    }
    j->bits = bits;
    atomic_store_explicit(&j->state, JOINS_READY, memory_order_release);
    return bits;
}

/* Whether each byte of c has a token: a byte without one is dropped (or becomes unk, fused with
 * its neighbours), which makes the symbols on either side neighbours; no cut is made beside it. */
static inline int byte_units(const BPE *m, uint32_t c) {
    uint8_t u[4];
    size_t n = utf8_put(c, u);
    for (size_t k = 0; k < n; k++)
        if (m->byte_unit[u[k]] < 0)
            return 0;
    return 1;
}

/* part_end for a byte-level vocabulary: the first cut between two characters no token joins. */
static size_t byte_part_end(const BPE *m, const uint64_t *bits, const uint32_t *cps, size_t n) {
    for (size_t i = 1; i < n; i++)
        if (!byte_joined(bits, cps[i - 1], cps[i]) && byte_units(m, cps[i - 1]) && byte_units(m, cps[i]))
            return i;
    return n;
}

/* The ids of a part of a piece (UTF-8 b[0..nb)) from the cache, else merged and cached. With
 * ignore_merges a piece of the same bytes may be a token and so have other ids than the part:
 * the part's key ends in a byte no text holds (0xFF). */
static int part_cached(const BPE *m, Cache *cache, const uint32_t *cps, size_t n, const uint8_t *b, size_t nb,
                       Scratch *sc, IdBuf *out) {
    uint8_t key[CACHE_MAX_PIECE + 1 + KEY_PAD];
    size_t nk = nb + (m->ignore_merges ? 1 : 0);
    int cacheable = nk <= CACHE_MAX_PIECE;
    uint64_t h = 0;
    if (cacheable) {
        memcpy(key, b, nb);
        memset(key + nb, 0xFF, 1 + KEY_PAD);
        h = hash_padded(key, nk);
        const CacheEntry *e = cache_get_padded(cache, key, nk, h);
        if (e)
            return cache_ids_extend(out, e);
    }
    size_t start = out->n, merged;
    if (bpe_symbols(m, cps, n, b, nb, out) < 0 || bpe_merge(m, out->v + start, out->n - start, sc, &merged) < 0)
        return -1;
    out->n = start + merged;
    if (cacheable)
        cache_put(cache, key, nk, h, out->v + start, merged);
    return 0;
}

/* The merged ids of cps[0..n) (UTF-8 b[0..nb)): part by part, each from the cache when it
 * repeats, which parts do far more often than whole pieces. */
static int bpe_merged(const BPE *m, Cache *cache, const uint32_t *cps, size_t n, const uint8_t *b, size_t nb,
                      Scratch *sc, IdBuf *out) {
    const uint64_t *byte_joins = NULL;
    size_t end = n;
    if (m->joins && n > 2)
        end = part_end(m, cps, n);
    else if (m->byte_joins && n > 2 && nb > n && (byte_joins = bpe_byte_joins(m, nb)))
        end = byte_part_end(m, byte_joins, cps, n);
    if (end == n) {
        size_t start = out->n, merged;
        if (bpe_symbols(m, cps, n, b, nb, out) < 0 || bpe_merge(m, out->v + start, out->n - start, sc, &merged) < 0)
            return -1;
        out->n = start + merged;
        return 0;
    }
    for (size_t start = 0, bstart = 0; start < n; start = end) {
        if (start)
            end = start + (byte_joins ? byte_part_end(m, byte_joins, cps + start, n - start)
                                      : part_end(m, cps + start, n - start));
        size_t pb = utf8_size(cps + start, end - start);
        int32_t tok = byte_joins ? (pb == 1 ? m->byte_unit[b[bstart]] : -1)
                      : end - start == 1 ? char_token(m, cps[start])
                                         : -1;
        if (tok >= 0 ? ids_push(out, tok) < 0 : part_cached(m, cache, cps + start, end - start, b + bstart, pb, sc, out) < 0)
            return -1;
        bstart += pb;
    }
    return 0;
}

/* One piece the cache did not hold when bpe_spans asked it: its UTF-8 b[0..nb) with hash h, its
 * code points cps[0..n), merged and cached. With ignore_merges a piece that is a token is that
 * token; bpe_spans asks the cache first, as a whole-token lookup (on a byte-level .mtok, of the
 * piece mapped to GPT-2 characters) costs more than a cache hit. */
static int bpe_word(const BPE *m, Cache *cache, const uint32_t *cps, size_t n, const uint8_t *b, size_t nb,
                    uint64_t h, Scratch *sc, IdBuf *out) {
    /* one character with a token is that token, whatever the merges: not cached */
    int32_t tok = n == 1 && !m->byte_level && !m->suffix_len ? char_token(m, cps[0]) : -1;
    if (tok >= 0)
        return ids_push(out, tok);
    int32_t id = !m->ignore_merges ? -1
                 : !m->mtok        ? strmap_get_h(&m->vocab, b, nb, h)
                 : m->byte_level   ? mtok_byte_level_id(m->mtok, b, nb)
                                   : mtok_token_id(m->mtok, b, nb);
    size_t start = out->n;
    if (id >= 0 ? ids_push(out, id) < 0 : bpe_merged(m, cache, cps, n, b, nb, sc, out) < 0)
        return -1;
    if (nb <= CACHE_MAX_PIECE)
        cache_put(cache, b, nb, h, out->v + start, out->n - start);
    return 0;
}

/* Room in sc->words for n more words after the first nw */
static inline int words_room(Scratch *sc, size_t nw, size_t n) {
    if (sc->words_cap - nw >= n)
        return 0;
    size_t cap = 2 * (nw + n) > 64 ? 2 * (nw + n) : 64;
    Word *v = realloc(sc->words, cap * sizeof *v);
    if (!v)
        return -1;
    sc->words = v;
    sc->words_cap = cap;
    return 0;
}

static inline int words_push(Scratch *sc, size_t *nw, size_t c, size_t nc, size_t b, size_t nb) {
    if (words_room(sc, *nw, 1) < 0)
        return -1;
    sc->words[(*nw)++] = (Word){c, nc, b, nb, 0, 0};
    return 0;
}

/* The piece buf[c..c+nc) (UTF-8 at b): a piece too long for the cache goes in as its parts
 * (bpe_merged), which it may hold, cut in one pass over its characters (each one's token looked
 * at once, its UTF-8 counted there). A cut falls at random in CJK text: the pass takes no branch
 * on it, but notes every character as the start of the next part, kept only where it is cut. */
static inline int piece_push(const BPE *m, Scratch *sc, size_t *nw, const uint32_t *buf, size_t c, size_t nc,
                             size_t b, size_t nb) {
    if (nb <= CACHE_MAX_PIECE || !m->joins || m->ignore_merges)
        return words_push(sc, nw, c, nc, b, nb);
    if (words_room(sc, *nw, nc + 1) < 0)
        return -1;
    Word *w = sc->words;
    size_t k = *nw, at = b;
    w[k].c = c;
    w[k].b = b;
    int had = char_token(m, buf[c]) >= 0;
    for (size_t i = c + 1; i < c + nc; i++) {
        int has = char_token(m, buf[i]) >= 0;
        at += utf8_width(buf[i - 1]);
        w[k + 1].c = i;
        w[k + 1].b = at;
        k += (size_t)part_cut(m, buf[i - 1], had, buf[i], has);
        had = has;
    }
    w[k + 1].c = c + nc;
    w[k + 1].b = b + nb;
    for (size_t j = *nw; j <= k; j++)
        w[j] = (Word){w[j].c, w[j + 1].c - w[j].c, w[j].b, w[j + 1].b - w[j].b, 0, 0};
    *nw = k + 1;
    return 0;
}

/* How many pieces ahead of its lookup a piece's cache entry is fetched (its slot was fetched
 * when the piece was listed). */
#define LOOKAHEAD 4
/* The characters bpe_spans and wordpiece_spans tell apart as all ASCII or not, together. */
#define ASCII_BLOCK 16

/* Every ASCII character's byte (its UTF-8) into to[0..n), 0xFF for any other (no UTF-8
 * continuation byte), and whether each block of ASCII_BLOCK of them holds one that is not ASCII
 * into wide; whether all are ASCII. */
static inline int low_bytes(const uint32_t *restrict from, size_t n, uint8_t *restrict to, uint8_t *restrict wide) {
    uint8_t any = 0;
    size_t k = 0;
#ifdef __SSE2__
    for (; (k + 1) * ASCII_BLOCK <= n; k++) {
        __m128i b = ascii16(from + k * ASCII_BLOCK);
        b = _mm_or_si128(b, _mm_cmplt_epi8(b, _mm_setzero_si128())); /* U+0080..U+00FF kept their low byte */
        _mm_storeu_si128((__m128i *)(void *)(to + k * ASCII_BLOCK), b);
        wide[k] = _mm_movemask_epi8(b) != 0;
        any |= wide[k];
    }
#endif
    for (; k * ASCII_BLOCK < n; k++) {
        size_t end = (k + 1) * ASCII_BLOCK < n ? (k + 1) * ASCII_BLOCK : n;
        uint8_t block = 0;
        for (size_t i = k * ASCII_BLOCK; i < end; i++) {
            to[i] = from[i] < 0x80 ? (uint8_t)from[i] : 0xFF;
            block |= from[i] >= 0x80;
        }
        wide[k] = block;
        any |= block;
    }
    return !any;
}

/* The characters of a segment's pieces, and the first and the end of those they span. */
static inline size_t spans_bounds(const Span *spans, size_t nspans, size_t *lo, size_t *hi) {
    size_t chars = 0;
    *lo = SIZE_MAX;
    *hi = 0;
    for (size_t k = 0; k < nspans; k++) {
        chars += spans[k].end - spans[k].start;
        *lo = spans[k].start < *lo ? spans[k].start : *lo;
        *hi = spans[k].end > *hi ? spans[k].end : *hi;
    }
    return chars;
}

/* Whether the n characters (1 to ASCII_BLOCK) from offset `at` of low_bytes' text lie in ASCII
 * blocks: in two blocks at most, the first and the last. */
static inline int ascii_piece(const uint8_t *wide, size_t at, size_t n) {
    return n && n <= ASCII_BLOCK && !(wide[at / ASCII_BLOCK] | wide[(at + n - 1) / ASCII_BLOCK]);
}

/* The pieces' hashes, in a pass of their own: the bytes just stored one at a time, read back at
 * once as words, would each wait for the store buffer. Each one's cache slot is fetched there,
 * and the first pieces' entries: the loop over them fetches each entry LOOKAHEAD pieces before
 * its lookup. With by_char (a character-level BPE, buf its code points) a piece of one
 * character with a token (most parts of CJK text, cut between characters no token joins) is
 * that token, which bpe_word does not cache: neither hashed nor fetched, its id is kept in
 * place of the hash, nids 1 marking it. */
static void words_hash(const Cache *cache, Word *w, size_t nw, const uint8_t *bytes, const BPE *by_char,
                       const uint32_t *buf) {
    for (size_t k = 0; k < nw; k++) {
        int32_t t = by_char && w[k].nc == 1 ? char_token(by_char, buf[w[k].c]) : -1;
        if (t >= 0) {
            w[k].h = (uint64_t)t;
            w[k].nids = 1;
            continue;
        }
        w[k].h = hash_padded(bytes + w[k].b, w[k].nb);
        cache_prefetch_slot(cache, w[k].h);
    }
    for (size_t k = 0; k < nw && k < LOOKAHEAD; k++)
        if (!(by_char && w[k].nids == 1))
            cache_prefetch_entry(cache, w[k].h);
}

/* A piece's ids from its cache entry e onto out, and each one's span of buf's characters onto
 * spans_out where the cache keeps them beside e (the piece is then spanned), else -1, -1 each
 * (e noted as the piece's entry, to keep them once placed). */
static int entry_ids(const Cache *cache, const CacheEntry *e, Word *w, IdBuf *out, IdBuf *spans_out) {
    size_t n = e->nids;
    w->nids = n;
    if (cache_ids_extend(out, e) < 0 || (spans_out->cap - spans_out->n < 2 * n && ids_grow(spans_out, 2 * n) < 0))
        return -1;
    int32_t *to = spans_out->v + spans_out->n;
    spans_out->n += 2 * n;
    w->entry = e;
    w->spanned = cache_spans_get(cache, e, (int32_t)w->c, to);
    for (size_t j = 0; !w->spanned && j < 2 * n; j++)
        to[j] = -1;
    return 0;
}

/* A piece's n ids whose spans are not known yet, -1 each on spans_out */
static int spans_unknown(IdBuf *spans_out, size_t n) {
    if (spans_out->cap - spans_out->n < 2 * n && ids_grow(spans_out, 2 * n) < 0)
        return -1;
    for (size_t j = 0; j < 2 * n; j++)
        spans_out->v[spans_out->n++] = -1;
    return 0;
}

/* How many pieces merge_ahead merges in turns, and how many from a miss on it looks at */
enum { AHEAD_LANES = 8, AHEAD_WINDOW = 128 };

/* Whether the cache lacks piece w and it may be one bpe_word would merge whole from its bytes'
 * tokens (or with ignore_merges take whole): a byte-level BPE's (no suffix) piece of
 * 2..SCAN_MERGE_MAX bytes */
static inline int ahead_piece(Cache *cache, const Word *w) {
    return w->nb >= 2 && w->nb <= SCAN_MERGE_MAX && cache_lacks(cache, w->h);
}

/* Whether bpe_word takes the piece of code points cps[0..n) (nb bytes) through its parts
 * rather than merged whole from its bytes: one of characters of three bytes or more (CJK text),
 * whose parts, cached apart, repeat far more than pieces do (merged whole, new CJK text took 45%
 * more time), or one bpe_merged would cut (where the byte-level joins are built: at a pair of
 * characters no token joins). */
static int ahead_cut(const BPE *m, const uint32_t *cps, size_t n, size_t nb) {
    if (nb == n)
        return 0;
    if (nb > 2 * n)
        return 1;
    if (!m->byte_joins || n <= 2 || atomic_load_explicit(&m->byte_joins->state, memory_order_acquire) != JOINS_READY)
        return 0;
    return byte_part_end(m, m->byte_joins->bits, cps, n) < n;
}

/* Whether merge_ahead merges piece w (UTF-8 at b, code points at buf + w->c): an ahead_piece
 * whose every byte is a token and that bpe_merged would not cut. With ignore_merges a piece that
 * is a token is that token, as in bpe_word: cached here. */
static int ahead_wanted(const BPE *m, Cache *cache, const Word *w, const uint8_t *b, const uint32_t *buf) {
    if (!ahead_piece(cache, w))
        return 0;
    for (size_t i = 0; i < w->nb; i++)
        if (m->byte_unit[b[i]] < 0)
            return 0;
    if (ahead_cut(m, buf + w->c, w->nc, w->nb))
        return 0;
    if (!m->ignore_merges)
        return 1;
    int32_t id = m->mtok ? mtok_byte_level_id(m->mtok, b, w->nb) : strmap_get_h(&m->vocab, b, w->nb, w->h);
    if (id < 0)
        return 1;
    cache_put(cache, b, w->nb, w->h, &id, 1);
    return 0;
}

/* The pieces of w[0..nw) that bpe_word would merge from their bytes (ahead_wanted), merged
 * AHEAD_LANES at a time in turns and cached, for bpe_words to find there. On new text a piece's
 * pair lookups miss every cache (a merge table of megabytes) and each merge waits on the
 * lookups of the one before; in turns the pieces' waits overlap, each step's lookups fetched at
 * its end and read at the next. A new English word takes 15-25% less time (llama3, GPT-4o,
 * Qwen3: 26K words, each new once); a first pass over 400 KB of English, whose words repeat,
 * 3-10%; new text of other alphabets (words of two-byte characters, Cyrillic, Greek, Arabic)
 * 2-11% (llama3, GPT-4o; Qwen3's as before). With ignore_merges the whole-token lookups (slot,
 * then key) are fetched first. What this leaves, and what the cache did not keep, bpe_words
 * merges as before. */
static void merge_ahead(const BPE *m, Cache *cache, const Word *w, size_t nw, const uint32_t *buf, Scratch *sc) {
    PairMemo *memo = pair_memo(m, sc);
    if (!memo)
        return;
    const uint8_t *bytes = sc->bytes;
    if (m->ignore_merges && !m->mtok) {
        for (size_t k = 0; k < nw; k++)
            if (ahead_piece(cache, &w[k]))
                strmap_prefetch(&m->vocab, w[k].h);
        for (size_t k = 0; k < nw; k++)
            if (ahead_piece(cache, &w[k]))
                strmap_prefetch_key(&m->vocab, w[k].h);
    }
    Scan lane[AHEAD_LANES];
    int32_t sym[AHEAD_LANES][SCAN_MERGE_MAX];
    const Word *of[AHEAD_LANES] = {0};
    size_t k = 0, live;
    do {
        live = 0;
        for (size_t l = 0; l < AHEAD_LANES; l++) {
            if (of[l]) {
                scan_keys(m, memo, &lane[l]);
                if (scan_step(m, memo, &lane[l])) {
                    live++;
                    continue;
                }
                cache_put(cache, bytes + of[l]->b, of[l]->nb, of[l]->h, lane[l].c, lane[l].n);
                of[l] = NULL;
            }
            for (; k < nw && !of[l]; k++) {
                const uint8_t *b = bytes + w[k].b;
                if (!ahead_wanted(m, cache, &w[k], b, buf))
                    continue;
                for (size_t i = 0; i < w[k].nb; i++)
                    sym[l][i] = m->byte_unit[b[i]];
                lane[l].c = sym[l];
                lane[l].n = w[k].nb;
                scan_fetch(m, memo, &lane[l]);
                of[l] = &w[k];
                live++;
            }
        }
    } while (live);
}

/* The words[0..nw) of bpe_spans and bpe_ascii, their UTF-8 in sc->bytes: their hashes, then the
 * pieces in order, each one's cache lookup started a few pieces earlier: a lookup is two
 * dependent misses (slot, entry), which then overlap the work on earlier pieces. */
static int bpe_words(const BPE *m, Cache *cache, const uint32_t *buf, size_t nw, Scratch *sc, IdBuf *out) {
    Word *w = sc->words;
    int chars = !m->byte_level && !m->suffix_len; /* bpe_word's one character of a token */
    words_hash(cache, w, nw, sc->bytes, chars ? m : NULL, buf);
    /* the pieces up to here were looked at by merge_ahead */
    size_t ahead = cache && m->byte_level && !m->suffix_len ? 0 : nw;
    /* a piece the cache lacks is looked up whole in the vocabulary first (ignore_merges), as
     * far ahead as the cache's entries */
    int whole = m->ignore_merges && !m->mtok;
    for (size_t k = 0; k < nw; k++) {
        if (chars && w[k].nids == 1) {
            if (ids_push(out, (int32_t)w[k].h) < 0)
                return -1;
            continue;
        }
        size_t a = k + LOOKAHEAD;
        if (a < nw && !(chars && w[a].nids == 1) && !cache_prefetch_entry(cache, w[a].h) && whole)
            strmap_prefetch(&m->vocab, w[a].h);
        /* a hit here, the common case, saves bpe_word's calls; an entry holds the piece's ids
         * whichever way bpe_word would have found them, and a miss is bpe_word's to fill */
        const uint8_t *b = sc->bytes + w[k].b;
        const CacheEntry *e = w[k].nb <= CACHE_MAX_PIECE ? cache_get_padded(cache, b, w[k].nb, w[k].h) : NULL;
        if (!e && k >= ahead) {
            /* new text: the misses of the next pieces merged at once */
            ahead = k + AHEAD_WINDOW < nw ? k + AHEAD_WINDOW : nw;
            merge_ahead(m, cache, w + k, ahead - k, buf, sc);
            e = w[k].nb <= CACHE_MAX_PIECE ? cache_get_padded(cache, b, w[k].nb, w[k].h) : NULL;
        }
        size_t before = out->n;
        if (e ? cache_ids_extend(out, e) < 0
              : bpe_word(m, cache, buf + w[k].c, w[k].nc, b, w[k].nb, w[k].h, sc, out) < 0)
            return -1;
        w[k].nids = out->n - before;
    }
    sc->nwords = nw;
    return 0;
}

#ifdef __SSE2__
/* Whether the 4 code points at s are U+0800..U+FFFF, three UTF-8 bytes each, and not U+2581 */
static inline int three_byte4(const uint32_t *s) {
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)s);
    __m128i in = _mm_and_si128(_mm_cmpgt_epi32(v, _mm_set1_epi32(0x7FF)), _mm_cmplt_epi32(v, _mm_set1_epi32(0x10000)));
    return _mm_movemask_epi8(_mm_andnot_si128(_mm_cmpeq_epi32(v, _mm_set1_epi32(0x2581)), in)) == 0xFFFF;
}
#endif

/* bpe_spans' pieces of a segment not all ASCII, onto sc->words: a piece of ASCII blocks (whole
 * stretches of English or code between other scripts) where low_bytes put it, at its offset
 * from lo in to (sc->bytes), the others' UTF-8 after those from to[pos] on, cut before U+2581 in
 * the same pass: a segment of mixed text would otherwise take every character a step at a time
 * (a tenth of a long text's time). A store through uint8_t may alias anything (sc's fields,
 * m's) but through `to`. */
static int pieces_utf8(const BPE *m, Scratch *sc, size_t *words, const uint32_t *buf, const Span *spans, size_t nspans,
                       size_t lo, const uint8_t *wide, uint8_t *restrict to, size_t pos) {
    const int split = m->split_metaspace;
    size_t nw = *words;
    for (size_t k = 0; k < nspans; k++) {
        size_t start = spans[k].start, bstart = pos, len = spans[k].end - start;
        if (ascii_piece(wide, start - lo, len)) {
            if (words_push(sc, &nw, start, len, start - lo, len) < 0)
                return -1;
            continue;
        }
        for (size_t i = start, end = spans[k].end; i < end; i++) {
            uint32_t c = buf[i];
            if (c < 0x80) {
#ifdef __SSE2__
                /* a run of them (a word between U+2581s) 16 at a time: a block's bytes past the
                 * run are written over after it */
                if (i + 16 <= end) {
                    __m128i v = ascii16(buf + i);
                    _mm_storeu_si128((__m128i *)(void *)(to + pos), v);
                    size_t run = (size_t)__builtin_ctz((unsigned)_mm_movemask_epi8(v) | 0x10000u);
                    pos += run;
                    i += run - 1;
                    continue;
                }
#endif
                to[pos++] = (uint8_t)c;
                continue;
            }
            /* the next most common character in SentencePiece-style text, every space: tested
             * before the others, its UTF-8 stored as a constant */
            if (c == 0x2581) {
                /* no token holds U+2581 after another character (build_bpe): no merge joins there */
                if (split && i > start && buf[i - 1] != 0x2581) {
                    if (piece_push(m, sc, &nw, buf, start, i - start, bstart, pos - bstart) < 0)
                        return -1;
                    start = i;
                    bstart = pos;
                }
                memcpy(to + pos, "\xE2\x96\x81", 3);
                pos += 3;
                continue;
            }
#ifdef __SSE2__
            /* four characters of three bytes each (CJK text), U+2581 none of them, without a
             * branch on each one's length: each one's bytes stored as a word of four, the fourth
             * written over by the next (the last one's lies within the room of four bytes a
             * character) */
            if (c >= 0x800 && i + 4 <= end && three_byte4(buf + i)) {
                for (size_t j = 0; j < 4; j++, pos += 3) {
                    uint32_t d = buf[i + j];
                    uint32_t u = (0xE0 | d >> 12) | (0x80 | (d >> 6 & 0x3F)) << 8 | (0x80 | (d & 0x3F)) << 16;
                    memcpy(to + pos, &u, 4);
                }
                i += 3;
                continue;
            }
#endif
            pos += utf8_put(c, to + pos);
        }
        if (start < spans[k].end &&
            piece_push(m, sc, &nw, buf, start, spans[k].end - start, bstart, pos - bstart) < 0)
            return -1;
    }
    *words = nw;
    return 0;
}

/* The UTF-8 and bounds of every piece (cutting before U+2581 in the same pass), for bpe_words.
 * A piece's UTF-8 need not follow the one before: an ASCII piece's is where low_bytes put it,
 * the others' after those (pieces_utf8). */
int bpe_spans(const BPE *m, Cache *cache, const uint32_t *buf, const Span *spans, size_t nspans, Scratch *sc,
              IdBuf *out) {
    size_t nw = 0, lo, hi, chars = spans_bounds(spans, nspans, &lo, &hi);
    sc->nwords = 0;
    if (!nspans)
        return 0;
    size_t nblocks = (hi - lo + ASCII_BLOCK - 1) / ASCII_BLOCK;
    if (scratch_bytes(sc, hi - lo + 4 * chars + nblocks) < 0)
        return -1;
    /* ASCII text, the common case, is its own UTF-8 and holds no U+2581: low_bytes gives every
     * piece's bytes, at the piece's offset */
    uint8_t *wide = sc->bytes + (hi - lo) + 4 * chars;
    int ascii = low_bytes(buf + lo, hi - lo, sc->bytes, wide);
    for (size_t k = 0; ascii && k < nspans; k++) {
        size_t start = spans[k].start, len = spans[k].end - start;
        if (len && piece_push(m, sc, &nw, buf, start, len, start - lo, len) < 0)
            return -1;
    }
    if (!ascii && pieces_utf8(m, sc, &nw, buf, spans, nspans, lo, wide, sc->bytes, hi - lo) < 0)
        return -1;
    return bpe_words(m, cache, buf, nw, sc, out);
}

int bpe_ascii(const BPE *m, Cache *cache, const uint32_t *buf, const int32_t *pieces, size_t npieces, Scratch *sc,
              IdBuf *out) {
    size_t nw = 0;
    sc->nwords = 0;
    /* a word a piece but where a long one is cut into parts: the loop keeps the count and the
     * array in registers, which a store to a word might otherwise overwrite for all it knows */
    if (words_room(sc, 0, npieces) < 0)
        return -1;
    Word *w = sc->words;
    for (size_t k = 0; k < npieces; k++) {
        size_t start = (size_t)pieces[2 * k], len = (size_t)pieces[2 * k + 1] - start;
        if (len <= CACHE_MAX_PIECE) {
            /* the fields BPE reads before it writes them (not h, words_hash's) */
            w[nw].c = w[nw].b = start;
            w[nw].nc = w[nw].nb = len;
            w[nw++].nids = 0;
            continue;
        }
        if (piece_push(m, sc, &nw, buf, start, len, start, len) < 0 || words_room(sc, nw, npieces - k) < 0)
            return -1;
        w = sc->words;
    }
    return bpe_words(m, cache, buf, nw, sc, out);
}

int bpe_chars_init(BPE *m) {
    m->bmp = malloc(BPE_BMP_BYTES);
    m->joins = calloc(1, BPE_JOINS_BYTES);
    if (!m->bmp || !m->joins)
        return -1;
    memset(m->bmp, 0xFF, BPE_BMP_BYTES);
    return 0;
}

int bpe_chars_add(BPE *m, const uint8_t *s, size_t len, int32_t id) {
    int metaspace_inside = 0;
    size_t chars = 0;
    uint32_t prev = 0, cp = 0;
    /* tokens are valid UTF-8 (a .mtok's records are checked at load): a step is a character */
    for (size_t i = 0, step; i < len; i += step, chars++, prev = cp) {
        step = utf8_get(s + i, len - i, &cp);
        if (i) {
            size_t bit = join_bit(prev, cp);
            m->joins[bit / 64] |= 1ull << (bit % 64);
            metaspace_inside |= cp == 0x2581 && prev != 0x2581;
        }
    }
    if (chars == 1 && cp < 0x10000)
        m->bmp[cp] = id;
    return metaspace_inside;
}

void bpe_free(BPE *m) {
    strmap_free(&m->vocab);
    pairmap_free(&m->merges);
    bpe_byte_joins_free(m);
    free(m->joins);
    m->joins = NULL;
    free(m->bmp);
    m->bmp = NULL;
}

/* ---- WordPiece -------------------------------------------------------------------------- */

#define BMP_CHARS 0x10000

static inline size_t char_start_at_or_before(const uint8_t *b, size_t lo, size_t i) {
    while (i > lo && (b[i] & 0xC0) == 0x80)
        i--;
    return i;
}

/* The whole piece's token, where greedy matching begins (most words are a token; such words
 * stay out of the cache, and are looked up before it, a probe there being a miss too): the
 * unknown token for a piece of more than max_chars characters, -1 where the vocabulary lacks
 * it. */
static inline int32_t wordpiece_whole(const WordPiece *m, const Word *w, const uint8_t *b) {
    return w->nc > m->max_chars ? m->unk_id : w->nb <= m->vocab.max_len ? strmap_get_h(&m->vocab, b, w->nb, w->h) : -1;
}

/* Greedy longest match first, for a piece neither in the vocabulary whole (wordpiece_whole)
 * nor in the cache, which it goes into; the continuation map holds tokens without their
 * prefix. Ends step back one character at a time, and start no further than the longest token
 * beginning with the start's character allows (WordPiece.longest). The piece is UTF-8
 * b[0..nb), hashed h, readable KEY_PAD bytes on, b[nb] no continuation byte (ends at nb are
 * character starts). */
static int wordpiece_parts(const WordPiece *m, Cache *cache, const uint8_t *b, size_t nb, uint64_t h, IdBuf *out) {
    size_t first = out->n, start = 0;
    while (start < nb) {
        const StrMap *map = start ? &m->cont : &m->vocab;
        size_t longest = map->max_len;
        uint32_t c;
        if (m->longest && utf8_get(b + start, nb - start, &c) && c < BMP_CHARS) {
            uint8_t bound = m->longest[(start ? BMP_CHARS : 0) + c];
            if (bound < UINT8_MAX)
                longest = bound;
        }
        size_t end = nb - start > longest ? start + longest : nb;
        end = char_start_at_or_before(b, start, end);
        int32_t id = -1;
        while (end > start) {
            id = strmap_get(map, b + start, end - start);
            if (id >= 0)
                break;
            end = char_start_at_or_before(b, start, end - 1);
        }
        if (id < 0) {
            out->n = first;
            if (ids_push(out, m->unk_id) < 0)
                return -1;
            break;
        }
        if (ids_push(out, id) < 0)
            return -1;
        start = end;
    }
    if (nb <= CACHE_MAX_PIECE)
        cache_put(cache, b, nb, h, out->v + first, out->n - first);
    return 0;
}

/* A piece's cache entry, NULL where the cache lacks it or cannot hold it */
static inline const CacheEntry *wordpiece_cached(const Cache *cache, const Word *w, const uint8_t *b) {
    return w->nb <= CACHE_MAX_PIECE ? cache_get_padded(cache, b, w->nb, w->h) : NULL;
}

/* A piece's ids for wordpiece_spans with spans_out: a piece of one token (a whole-word match,
 * the unknown token of a word too long) spans the whole piece; the others' spans are those
 * kept beside their cache entry, else left to place. */
static int wordpiece_spanned(const WordPiece *m, Cache *cache, Word *w, const uint8_t *b, IdBuf *out,
                             IdBuf *spans_out) {
    int32_t id = wordpiece_whole(m, w, b);
    if (id >= 0) {
        w->nids = 1;
        w->spanned = 1;
        return ids_push(out, id) < 0 || ids_push(spans_out, (int32_t)w->c) < 0 ||
                       ids_push(spans_out, (int32_t)(w->c + w->nc)) < 0
                   ? -1
                   : 0;
    }
    const CacheEntry *e = wordpiece_cached(cache, w, b);
    if (e)
        return entry_ids(cache, e, w, out, spans_out);
    size_t before = out->n;
    if (wordpiece_parts(m, cache, b, w->nb, w->h, out) < 0)
        return -1;
    w->nids = out->n - before;
    return spans_unknown(spans_out, w->nids);
}

/* A token key[0..len) into the longest by first character; one of UINT8_MAX bytes or more as
 * UINT8_MAX, which wordpiece_parts reads as the map's longest */
static void longest_put(uint8_t *longest, const uint8_t *key, size_t len) {
    uint32_t c;
    if (!len || !utf8_get(key, len, &c) || c >= BMP_CHARS)
        return;
    uint8_t n = len < UINT8_MAX ? (uint8_t)len : UINT8_MAX;
    if (longest[c] < n)
        longest[c] = n;
}

int wordpiece_put(WordPiece *m, const uint8_t *key, size_t len, int32_t id, const uint8_t *prefix, size_t plen) {
    int cont = len >= plen && memcmp(key, prefix, plen) == 0;
    if (strmap_put(&m->vocab, key, len, id) < 0 || (cont && strmap_put(&m->cont, key + plen, len - plen, id) < 0))
        return -1;
    if (!m->longest && !(m->longest = pages_alloc(2 * BMP_CHARS)))
        return -1;
    longest_put(m->longest, key, len);
    if (cont)
        longest_put(m->longest + BMP_CHARS, key + plen, len - plen);
    /* the keys are UTF-8 (both readers check): one of a character is as long as its lead says */
    uint32_t c;
    if (len < 1 || len > 3 || utf8_get(key, len, &c) != len)
        return 0;
    if (!m->bmp && !(m->bmp = pages_alloc(BMP_CHARS * sizeof *m->bmp)))
        return -1;
    m->bmp[c] = id + 1;
    return 0;
}

/* The token of a piece of one BMP character, b[0..nb) its UTF-8 (1 to 3 bytes): greedy
 * matching's answer, the whole piece's token or else the unknown one */
static inline int32_t wordpiece_char(const WordPiece *m, const uint8_t *b, size_t nb) {
    uint32_t c;
    utf8_get(b, nb, &c);
    return m->bmp[c] ? m->bmp[c] - 1 : m->unk_id;
}

/* The words[0..nw) of wordpiece_spans and wordpiece_ascii, their UTF-8 in sc->bytes, each
 * followed by a byte that continues no character: hashed in a pass of their own (the bytes
 * just stored one at a time, read back at once as words, would each wait for the store
 * buffer), each one's vocabulary slot fetched there, some pieces before its lookup. A piece of
 * one BMP character (each mark of punctuation behind BERT's split, each ideograph) takes its
 * token in that pass, kept in place of the hash, nids 1 marking it (wordpiece_ascii may have
 * marked it already; the others' nids are 0). */
static int wordpiece_words(const WordPiece *m, Cache *cache, size_t nw, Scratch *sc, IdBuf *out, IdBuf *spans_out) {
    Word *w = sc->words;
    const StrMap *vocab = &m->vocab;
    const int chars = m->max_chars && m->bmp; /* max_chars 0: a character is too long a word */
    for (size_t k = 0; k < nw; k++) {
        if (w[k].nids)
            continue;
        if (chars && w[k].nc == 1 && w[k].nb - 1 < 3) {
            w[k].h = (uint64_t)wordpiece_char(m, sc->bytes + w[k].b, w[k].nb);
            w[k].nids = 1;
            continue;
        }
        w[k].h = hash_padded(sc->bytes + w[k].b, w[k].nb);
        __builtin_prefetch(&vocab->slots[(size_t)(w[k].h >> 32) & vocab->mask]);
    }
    for (size_t k = 0; k < nw; k++) {
        if (w[k].nids) {
            w[k].spanned = 1;
            if (ids_push(out, (int32_t)w[k].h) < 0 ||
                (spans_out && (ids_push(spans_out, (int32_t)w[k].c) < 0 || ids_push(spans_out, (int32_t)w[k].c + 1) < 0)))
                return -1;
            continue;
        }
        if (spans_out) {
            if (wordpiece_spanned(m, cache, &w[k], sc->bytes + w[k].b, out, spans_out) < 0)
                return -1;
            continue;
        }
        const uint8_t *b = sc->bytes + w[k].b;
        int32_t id = wordpiece_whole(m, &w[k], b);
        const CacheEntry *e = id < 0 ? wordpiece_cached(cache, &w[k], b) : NULL;
        size_t before = out->n;
        if (id >= 0   ? ids_push(out, id) < 0
            : e       ? cache_ids_extend(out, e) < 0
                      : wordpiece_parts(m, cache, b, w[k].nb, w[k].h, out) < 0)
            return -1;
        w[k].nids = out->n - before;
    }
    sc->nwords = nw;
    return 0;
}

int wordpiece_spans(const WordPiece *m, Cache *cache, const uint32_t *buf, const Span *spans, size_t nspans,
                    Scratch *sc, IdBuf *out, IdBuf *spans_out) {
    size_t nw = 0, lo, hi, chars = spans_bounds(spans, nspans, &lo, &hi);
    sc->nwords = 0;
    if (!nspans)
        return 0;
    size_t nblocks = (hi - lo + ASCII_BLOCK - 1) / ASCII_BLOCK;
    if (scratch_bytes(sc, hi - lo + 1 + 5 * chars + nblocks) < 0)
        return -1;
    /* as bpe_spans: a piece of ASCII blocks is its own UTF-8 where low_bytes put it (the byte
     * after it, from low_bytes too, no continuation byte, over which greedy matching would step
     * back from the piece's end); the others' UTF-8, each followed by a 0, after those */
    uint8_t *to = sc->bytes, *wide = sc->bytes + (hi - lo) + 1 + 5 * chars;
    low_bytes(buf + lo, hi - lo, to, wide);
    to[hi - lo] = 0;
    size_t pos = hi - lo + 1;
    for (size_t k = 0; k < nspans; k++) {
        size_t start = spans[k].start, end = spans[k].end, n = end - start;
        if (!n)
            continue;
        if (ascii_piece(wide, start - lo, n)) {
            if (words_push(sc, &nw, start, n, start - lo, n) < 0)
                return -1;
            continue;
        }
        /* one character (each CJK one, each mark of punctuation behind BERT's split) inline */
        size_t nb = n > m->max_chars ? 0 : n == 1 ? utf8_put(buf[start], sc->bytes + pos)
                                                  : utf8_encode(buf + start, n, sc->bytes + pos);
        if (words_push(sc, &nw, start, n, pos, nb) < 0)
            return -1;
        pos += nb;
        sc->bytes[pos++] = 0;
    }
    return wordpiece_words(m, cache, nw, sc, out, spans_out);
}

int wordpiece_ascii(const WordPiece *m, Cache *cache, const int32_t *pieces, size_t npieces, Scratch *sc,
                    IdBuf *out, IdBuf *spans_out) {
    sc->nwords = 0;
    if (words_room(sc, 0, npieces) < 0)
        return -1;
    /* a piece of one character (most of code's, behind BERT's split) is its byte's token */
    const int32_t *one = m->max_chars ? m->bmp : NULL;
    Word *w = sc->words;
    for (size_t k = 0; k < npieces; k++) {
        size_t start = (size_t)pieces[2 * k], n = (size_t)pieces[2 * k + 1] - start;
        int single = one && n == 1;
        int32_t id = single && one[sc->bytes[start]] ? one[sc->bytes[start]] - 1 : m->unk_id;
        w[k] = (Word){start, n, start, n, single ? (uint64_t)id : 0, (size_t)single};
    }
    return wordpiece_words(m, cache, npieces, sc, out, spans_out);
}

void wordpiece_free(WordPiece *m) {
    strmap_free(&m->vocab);
    strmap_free(&m->cont);
    if (m->bmp)
        pages_free(m->bmp, BMP_CHARS * sizeof *m->bmp);
    if (m->longest)
        pages_free(m->longest, 2 * BMP_CHARS);
    m->bmp = NULL;
    m->longest = NULL;
}

/* ---- Unigram ---------------------------------------------------------------------------- */

/* An edge's place comes from the bytes of the path to it, not from its parent node: Viterbi
 * knows the places of a walk's next steps before it has found the nodes, and fetches them
 * ahead (a walk's steps were each a dependent miss). The key keeps the top TRIE_HASH_BITS of
 * that hash above the node and the byte, which alone identify the edge, so that growing the
 * table can place an edge again. */
#define TRIE_HASH_BITS 24
#define TRIE_HASH_SHIFT (64 - TRIE_HASH_BITS)
/* how many steps of a walk are fetched before it starts */
#define TRIE_AHEAD 6

/* The hash of a path one byte longer (trie_path_start for its first byte) */
static inline uint64_t trie_path(uint64_t h, uint8_t byte) { return (h + byte + 1) * 0x9E3779B97F4A7C15ull; }
static inline uint64_t trie_path_start(uint8_t byte) { return trie_path(0x2545F4914F6CDD1Dull, byte); }

static inline uint64_t trie_key(uint64_t path, uint32_t node, uint8_t byte) {
    return (path >> TRIE_HASH_SHIFT) << TRIE_HASH_SHIFT | (uint64_t)node << 8 | byte;
}

/* A key's first slot (with a table of more than 2^TRIE_HASH_BITS slots, one of the first) */
static inline size_t trie_home(const Unigram *m, uint64_t key) { return (size_t)(key >> TRIE_HASH_SHIFT) & m->trie_mask; }

/* The first empty slot from key's home on, in a table of mask + 1 slots. */
static size_t trie_free_slot(const TrieSlot *t, size_t mask, size_t home) {
    size_t j = home;
    while (t[j].key != PAIR_EMPTY)
        j = (j + 1) & mask;
    return j;
}

/* The edge of that key (trie_key of the path ending with the edge's byte), or NULL. */
static inline const TrieSlot *trie_edge(const Unigram *m, uint64_t key) {
    size_t i = trie_home(m, key);
    for (;;) {
        const TrieSlot *s = &m->trie[i];
        if (s->key == key)
            return s;
        if (s->key == PAIR_EMPTY)
            return NULL;
        i = (i + 1) & m->trie_mask;
    }
}

/* The table twice as large. Sized by the edges it holds, not by the pieces' bytes (an upper
 * bound): T5's 83k edges took a 16 MB table sized for its 267k bytes, and every step of
 * Viterbi's walk is a probe into it. */
static int trie_grow(Unigram *m) {
    size_t slots = 2 * (m->trie_mask + 1);
    TrieSlot *old = m->trie, *t = malloc(slots * sizeof *t);
    if (!t)
        return -1;
    for (size_t i = 0; i < slots; i++)
        t[i].key = PAIR_EMPTY;
    size_t old_slots = m->trie_mask + 1;
    m->trie = t;
    m->trie_mask = slots - 1;
    for (size_t i = 0; i < old_slots; i++) {
        if (old[i].key == PAIR_EMPTY)
            continue;
        t[trie_free_slot(t, m->trie_mask, trie_home(m, old[i].key))] = old[i];
    }
    free(old);
    return 0;
}

/* HF keeps the last id of a duplicated piece. The table stays at most 70% full. */
int trie_insert(Unigram *m, const uint8_t *key, size_t len, int32_t id) {
    if (!len)
        return 0; /* HF's prefix search never reports the empty piece */
    uint32_t node = m->root[key[0]];
    if (!node)
        node = m->root[key[0]] = ++m->nnodes;
    if (len == 1) {
        m->root_id[key[0]] = id;
        return 0;
    }
    TrieSlot *edge = NULL;
    uint64_t path = trie_path_start(key[0]);
    for (size_t i = 1; i < len; i++) {
        path = trie_path(path, key[i]);
        uint64_t k = trie_key(path, node, key[i]);
        edge = (TrieSlot *)trie_edge(m, k);
        if (!edge) {
            if ((m->nedges + 1) * 10 > (m->trie_mask + 1) * 7 && trie_grow(m) < 0)
                return -1;
            edge = &m->trie[trie_free_slot(m->trie, m->trie_mask, trie_home(m, k))];
            *edge = (TrieSlot){k, ++m->nnodes, -1};
            m->nedges++;
        }
        node = edge->child;
    }
    edge->id = id;
    return 0;
}

/* The ids of one Viterbi segment [s, e): the piece's id, else its byte tokens, else unk. With
 * ranges, each id's bytes of the piece as HF's Unigram::tokenize reports them: a byte token
 * the whole segment's, as the unk token. */
static int unigram_emit(const Unigram *m, const uint8_t *b, size_t s, size_t e, IdBuf *out, IdBuf *ranges) {
    int32_t id = strmap_get(&m->vocab, b + s, e - s);
    size_t from = out->n;
    int err = 0;
    if (id < 0 && m->byte_fallback) {
        size_t i = s;
        while (i < e && m->fallback[b[i]] >= 0)
            i++;
        if (i == e) {
            for (i = s; !err && i < e; i++)
                err = ids_push(out, m->fallback[b[i]]);
            id = -2;
        }
    }
    if (id != -2)
        err = ids_push(out, id >= 0 ? id : m->unk_id);
    for (size_t k = from; ranges && !err && k < out->n; k++)
        err = ids_push(ranges, (int32_t)s) < 0 || ids_push(ranges, (int32_t)e) < 0 ? -1 : 0;
    return err;
}

/* HF's Unigram::encode_optimized over the UTF-8 bytes: best path by f64 score sums, strict
 * `>` so that the first candidate (earlier start, then shorter piece) keeps a tie; a character
 * no piece covers alone gets an unk edge; consecutive unk nodes fuse into one piece. */
static int unigram_bytes(const Unigram *m, Cache *cache, const uint8_t *b, size_t nb, uint64_t h, Scratch *sc,
                         IdBuf *out, IdBuf *ranges) {
    if (ranges && nb > INT32_MAX)
        return -2;
    int cacheable = cache && nb <= CACHE_MAX_PIECE;
    if (cacheable) {
        const CacheEntry *e = cache_get_padded(cache, b, nb, h);
        if (e)
            return cache_ids_extend(out, e);
    }
    size_t cells = nb + 1;
    if (scratch_work(sc, cells * (sizeof(double) + 3 * sizeof(int32_t))) < 0)
        return -1;
    double *best = sc->work;
    int32_t *from = (int32_t *)(best + cells), *node_id = from + cells, *ends = node_id + cells;
    for (size_t i = 0; i < cells; i++) {
        best[i] = 0.0;
        from[i] = -1;
        node_id[i] = 0;
    }
    for (size_t st = 0; st < nb;) {
        double here = best[st];
        size_t mblen = utf8_len(b[st]);
        int single = 0;
        uint32_t node = m->root[b[st]];
        int32_t id = m->root_id[b[st]];
        /* the first steps' slots fetched at once: most walks end within them */
        uint64_t path = trie_path_start(b[st]), ahead = path;
        for (size_t k = st + 1; node && k < nb && k <= st + TRIE_AHEAD; k++) {
            ahead = trie_path(ahead, b[k]);
            __builtin_prefetch(&m->trie[trie_home(m, ahead)]);
        }
        for (size_t k = st + 1; node; k++) {
            if (id >= 0) {
                double cand = m->scores[id] + here;
                if (from[k] < 0 || cand > best[k]) {
                    best[k] = cand;
                    from[k] = (int32_t)st;
                    node_id[k] = id;
                }
                if (k - st == mblen)
                    single = 1;
            }
            if (k >= nb)
                break;
            path = trie_path(path, b[k]);
            const TrieSlot *edge = trie_edge(m, trie_key(path, node, b[k]));
            if (!edge)
                break;
            node = edge->child;
            id = edge->id;
        }
        if (!single) {
            size_t k = st + mblen;
            double cand = m->unk_score + here;
            if (from[k] < 0 || cand > best[k]) {
                best[k] = cand;
                from[k] = (int32_t)st;
                node_id[k] = m->unk_id;
            }
        }
        st += mblen;
    }
    /* walk back, recording node ends, then emit forwards fusing unk runs */
    size_t nodes = 0;
    for (size_t e = nb; e > 0; e = (size_t)from[e])
        ends[nodes++] = (int32_t)e;
    size_t first = out->n, run_start = 0;
    int in_run = 0;
    for (size_t k = nodes; k-- > 0;) {
        size_t e = (size_t)ends[k], s = (size_t)from[e];
        if (node_id[e] == m->unk_id) {
            if (!in_run)
                run_start = s;
            in_run = 1;
            continue;
        }
        if (in_run && unigram_emit(m, b, run_start, s, out, ranges) < 0)
            return -1;
        in_run = 0;
        if (ids_push(out, node_id[e]) < 0 ||
            (ranges && (ids_push(ranges, (int32_t)s) < 0 || ids_push(ranges, (int32_t)e) < 0)))
            return -1;
    }
    if (in_run && unigram_emit(m, b, run_start, nb, out, ranges) < 0)
        return -1;
    if (cacheable)
        cache_put(cache, b, nb, h, out->v + first, out->n - first);
    return 0;
}

/* The words[0..nw) of unigram_spans and unigram_ascii, their UTF-8 in sc->bytes: hashed, then
 * each one's ids from the cache or unigram_bytes, the lookups started a few pieces ahead as
 * bpe_words' */
static int unigram_words(const Unigram *m, Cache *cache, size_t nw, Scratch *sc, IdBuf *out, IdBuf *spans_out) {
    Word *w = sc->words;
    words_hash(cache, w, nw, sc->bytes, NULL, NULL);
    for (size_t k = 0; k < nw; k++) {
        if (k + LOOKAHEAD < nw)
            cache_prefetch_entry(cache, w[k + LOOKAHEAD].h);
        const uint8_t *b = sc->bytes + w[k].b;
        /* with spans_out the entry itself, beside which the piece's spans are kept */
        const CacheEntry *e =
            spans_out && w[k].nb <= CACHE_MAX_PIECE ? cache_get_padded(cache, b, w[k].nb, w[k].h) : NULL;
        if (e) {
            if (entry_ids(cache, e, &w[k], out, spans_out) < 0)
                return -1;
            continue;
        }
        size_t before = out->n;
        if (unigram_bytes(m, cache, b, w[k].nb, w[k].h, sc, out, NULL) < 0)
            return -1;
        w[k].nids = out->n - before;
        if (spans_out && spans_unknown(spans_out, w[k].nids) < 0)
            return -1;
    }
    sc->nwords = nw;
    return 0;
}

int unigram_spans(const Unigram *m, Cache *cache, const uint32_t *buf, const Span *spans, size_t nspans, Scratch *sc,
                  IdBuf *out, IdBuf *spans_out) {
    size_t chars = 0, nw = 0, pos = 0;
    sc->nwords = 0;
    for (size_t k = 0; k < nspans; k++)
        chars += spans[k].end - spans[k].start;
    if (scratch_bytes(sc, 4 * chars) < 0)
        return -1;
    for (size_t k = 0; k < nspans; k++) {
        size_t start = spans[k].start, n = spans[k].end - start;
        if (!n)
            continue;
        size_t nb = utf8_encode(buf + start, n, sc->bytes + pos);
        if (words_push(sc, &nw, start, n, pos, nb) < 0)
            return -1;
        pos += nb;
    }
    return unigram_words(m, cache, nw, sc, out, spans_out);
}

int unigram_ascii(const Unigram *m, Cache *cache, size_t n, const int32_t *pieces, size_t npieces, int64_t prefix,
                  Scratch *sc, IdBuf *out, IdBuf *spans_out) {
    size_t nw = 0;
    sc->nwords = 0;
    if (prefix < 0) {
        for (size_t k = 0; k < npieces; k++) {
            size_t start = (size_t)pieces[2 * k], len = (size_t)pieces[2 * k + 1] - start;
            if (words_push(sc, &nw, start, len, start, len) < 0)
                return -1;
        }
        return unigram_words(m, cache, nw, sc, out, spans_out);
    }
    /* each piece's key is the prefix's UTF-8 and the piece, written after the text */
    uint8_t pre[4];
    size_t npre = utf8_put((uint32_t)prefix, pre);
    if (scratch_bytes(sc, 2 * n + npre * npieces) < 0)
        return -1;
    uint8_t *text = sc->bytes;
    size_t pos = n;
    for (size_t k = 0; k < npieces; k++) {
        size_t start = (size_t)pieces[2 * k], len = (size_t)pieces[2 * k + 1] - start;
        if (words_push(sc, &nw, start, len + 1, pos, npre + len) < 0)
            return -1;
        memcpy(text + pos, pre, npre);
        memcpy(text + pos + npre, text + start, len);
        pos += npre + len;
    }
    return unigram_words(m, cache, nw, sc, out, spans_out);
}

int unigram_piece_ranges(const Unigram *m, const uint8_t *b, size_t nb, Scratch *sc, IdBuf *out, IdBuf *ranges) {
    return nb ? unigram_bytes(m, NULL, b, nb, 0, sc, out, ranges) : 0;
}

void unigram_free(Unigram *m) {
    strmap_free(&m->vocab);
    free(m->trie);
    free(m->scores);
    m->trie = NULL;
    m->scores = NULL;
}
