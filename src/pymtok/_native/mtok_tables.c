/* pymtok._native.MtokTables: a .mtok model section validated and indexed in place.
 *
 * The reader (pymtok/mtok.py) hands over the file's bytes and where the vocabulary records
 * start; this checks every record (bounds, UTF-8, ids, duplicates) and every merge (ids that
 * exist, a result token that exists) with errors naming section and byte offset, and builds the
 * index of mtok_tables.h. Python sees the vocabulary through it (token -> id, id -> token) and
 * the native encoder reads it directly; nothing is copied into per-token Python objects unless
 * asked for (tokens(), merge_table(): the pure-Python path's dicts).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "mtok_tables.h"

#include <errno.h>
#include <unistd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#ifdef __linux__
#include <sys/mman.h>
#endif

enum { KIND_BPE, KIND_WORDPIECE };

/* The index's tables, all in one zeroed mapping, of which the first `hot` bytes are written and
 * the rest (cells of ids no record has, the merges' results where a build has no use for them)
 * stay untouched. The build writes every page of its tables
 * at random; in a fresh process each page is a fault (over a thousand for a 150k vocabulary),
 * and on a virtual machine faulting a page in costs over a microsecond, less when one system call
 * faults them all. So the hot part is faulted in at once. Not in 2 MB pages: on a virtual machine
 * a huge page the guest has not used lately is backed by the host page by page, and a load then
 * took 16-50 ms instead of 0.3 (4 KB pages: a steady 1.0-1.4 ms for Llama 3's 4.3 MB). */
typedef struct {
    uint8_t *at;
    size_t size;
} Arena;

enum { PAGE = 4096 };

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/* The whole pages of [p, p + n) faulted in by one system call; only a hint: where it fails, they
 * are faulted in one at a time. Memory malloc gives again is in already (a file read again into
 * the heap), and populating it walks every page anyway, 0.2 ms for 5 MB: where the first and the
 * last page are in, the rest is taken to be. */
static void populate(void *p, size_t n) {
#ifdef MADV_POPULATE_WRITE
    uintptr_t start = round_up((uintptr_t)p, PAGE), end = ((uintptr_t)p + n) / PAGE * PAGE;
    unsigned char first = 0, last = 0;
    if (end <= start ||
        (mincore((void *)start, PAGE, &first) == 0 && mincore((void *)(end - PAGE), PAGE, &last) == 0 && first & last & 1))
        return;
    madvise((void *)start, end - start, MADV_POPULATE_WRITE);
#else
    (void)p;
    (void)n;
#endif
}

#if defined(__linux__) && defined(MAP_ANONYMOUS) && defined(MADV_DONTNEED)
#define ARENA_SPARE 1
/* The tables of the tokenizer freed last, kept mapped for the next build (all builds and frees
 * hold the GIL): a process that loads again (a server reloading its model, a test suite) would
 * otherwise fault all their pages in anew, 1.2 ms for Llama 3's 4.3 MB on a virtual machine,
 * where zeroing them again takes 0.2. The pages the next tables do not write are given back
 * (MADV_DONTNEED), so that no more of them stay in than a fresh mapping would have. */
static Arena spare;
#endif

/* [0, hot) zeroed and faulted in, [hot, zeroed) zeroed, [zeroed, size) of any content: a table
 * written whole before it is read (zeroed a multiple of PAGE). */
static int arena_alloc(Arena *a, size_t hot, size_t zeroed, size_t size) {
    a->size = round_up(size ? size : 1, PAGE);
    hot = round_up(hot, PAGE) < zeroed ? round_up(hot, PAGE) : zeroed;
#ifdef ARENA_SPARE
    if (spare.at && spare.size >= a->size) {
        *a = spare;
        spare.at = NULL;
        memset(a->at, 0, hot);
        if (zeroed > hot)
            madvise(a->at + hot, zeroed - hot, MADV_DONTNEED);
        return 0;
    }
#endif
    if (!(a->at = pages_alloc(a->size)))
        return -1;
    populate(a->at, hot);
    return 0;
}

/* [p, p + n) of an arena given back: a spare's pages there may be in, and a build that has no
 * use for them should not keep them. */
static void arena_drop(void *p, size_t n) {
#ifdef ARENA_SPARE
    uintptr_t start = round_up((uintptr_t)p, PAGE), end = ((uintptr_t)p + n) / PAGE * PAGE;
    if (start < end)
        madvise((void *)start, end - start, MADV_DONTNEED);
#else
    (void)p;
    (void)n;
#endif
}

/* The room n bytes take in an arena: a cache line each, at least one. */
static size_t arena_room(size_t n) { return round_up(n ? n : 1, 64); }

/* n bytes at offset *at of the arena */
static void *arena_take(const Arena *a, size_t *at, size_t n) {
    void *p = a->at + *at;
    *at += arena_room(n);
    return p;
}

/* The larger of a and the spare stays as the spare. */
static void arena_free(Arena *a) {
    Arena gone = *a;
    a->at = NULL;
#ifdef ARENA_SPARE
    if (gone.at && (!spare.at || spare.size < gone.size)) {
        Arena smaller = spare;
        spare = gone;
        gone = smaller;
    }
#endif
    pages_free(gone.at, gone.size);
}

typedef struct {
    PyObject_HEAD
    Py_buffer buf;   /* keeps the file's bytes alive while the index points into them */
    MtokIndex x;
    Arena arena;     /* x's tables but sparse and rank */
    int32_t *merged_room; /* x->merged's place in the arena: only some builds store results */
    size_t vocab_pos, merges_pos; /* absolute offsets, for error messages */
    Py_ssize_t end;  /* the offset after the model's records */
    int kind;
    int built;       /* indexed, and the merges' result tokens known */
    uint32_t unresolved; /* the first merge whose result is not a token, UINT32_MAX when none */
} Tables;

static PyTypeObject TablesType;

int mtok_tables_check(PyObject *o) { return PyObject_TypeCheck(o, &TablesType); }

/* FormatError("<section> at byte <at>: <message>"); mtok.py puts the file name in front. */
static void format_error(const char *section, size_t at, const char *fmt, ...) {
    PyObject *errors = PyImport_ImportModule("pymtok.errors");
    PyObject *cls = errors ? PyObject_GetAttrString(errors, "FormatError") : NULL;
    Py_XDECREF(errors);
    if (!cls)
        return;
    char message[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    PyErr_Format(cls, "%s at byte %zu: %s", section, at, message);
    Py_DECREF(cls);
}

/* The offset of the first byte of the first invalid sequence (as Python's strict decoder
 * reports it), or n when s is valid UTF-8. */
static size_t utf8_invalid_at(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            for (uint64_t w; n - i >= 8 && (memcpy(&w, s + i, 8), !(w & 0x8080808080808080ull));)
                i += 8; /* ASCII runs a word at a time */
            continue;
        }
        size_t k;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF)
            k = 1, cp = c & 0x1F;
        else if (c >= 0xE0 && c <= 0xEF)
            k = 2, cp = c & 0x0F;
        else if (c >= 0xF0 && c <= 0xF4)
            k = 3, cp = c & 0x07;
        else
            return i;
        if (n - i - 1 < k)
            return i;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                return i;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        if ((k == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (k == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return i;
        i += k + 1;
    }
    return n;
}

/* Well-formed UTF-8 (Unicode's table 3-7) as a DFA whose transitions for a byte are one word:
 * state s's successor is at bits 6s..6s+5, as 6 × its number, so a byte costs one load and a
 * shift that do not wait on each other across bytes. Checking a vocabulary's records this way
 * is several times faster than branching per character; utf8_invalid_at then finds where an
 * invalid one breaks. */
enum { U_OK, U_NEED1, U_NEED2, U_NEED3, U_BAD, U_E0, U_ED, U_F0, U_F4, U_STATES };
static uint64_t utf8_dfa[256];

static int utf8_next(int s, int b) {
    int cont = b >= 0x80 && b <= 0xBF;
    switch (s) {
    case U_OK:
        return b < 0x80 ? U_OK : b >= 0xC2 && b <= 0xDF ? U_NEED1 : b == 0xE0 ? U_E0 : b == 0xED ? U_ED
             : b >= 0xE1 && b <= 0xEF ? U_NEED2 : b == 0xF0 ? U_F0 : b >= 0xF1 && b <= 0xF3 ? U_NEED3
             : b == 0xF4 ? U_F4 : U_BAD;
    case U_NEED1: case U_NEED2: case U_NEED3:
        return cont ? s - 1 : U_BAD;
    case U_E0: /* no overlong three-byte form */
        return b >= 0xA0 && b <= 0xBF ? U_NEED1 : U_BAD;
    case U_ED: /* no surrogate */
        return b >= 0x80 && b <= 0x9F ? U_NEED1 : U_BAD;
    case U_F0: /* no overlong four-byte form */
        return b >= 0x90 && b <= 0xBF ? U_NEED2 : U_BAD;
    case U_F4: /* nothing above U+10FFFF */
        return b >= 0x80 && b <= 0x8F ? U_NEED2 : U_BAD;
    default:
        return U_BAD;
    }
}

static void utf8_dfa_init(void) {
    for (int b = 0; b < 256; b++) {
        uint64_t row = 0;
        for (int s = 0; s < U_STATES; s++)
            row |= (uint64_t)(6 * utf8_next(s, b)) << (6 * s);
        utf8_dfa[b] = row;
    }
}

static inline int utf8_valid(const uint8_t *s, size_t n) {
    uint64_t state = 6 * U_OK;
    /* only the low 6 bits of state are the state: a 64-bit shift reads no more of its count,
     * so they need no mask inside the loop, and a byte costs one shift on the chain; four
     * bytes a round, for fewer loop branches per byte */
    size_t i = 0;
    for (; n - i >= 4; i += 4) {
        state = utf8_dfa[s[i]] >> (state & 63);
        state = utf8_dfa[s[i + 1]] >> (state & 63);
        state = utf8_dfa[s[i + 2]] >> (state & 63);
        state = utf8_dfa[s[i + 3]] >> (state & 63);
    }
    for (; i < n; i++)
        state = utf8_dfa[s[i]] >> (state & 63);
    return (state & 63) == 6 * U_OK;
}

/* Slot tables are 3/5 full: linear probing's misses (most of the encoder's pair lookups) then
 * read about 3.6 slots, no more than a power-of-two table's did at its usual fill, and the
 * tables stay small (RSS is part of the budget). */
static size_t slots_for(size_t n) { return n + 2 * n / 3 + 16; }

/* The record of an id: its offset + 1 in the vocabulary, or 0. */
static uint32_t record_of(const MtokIndex *x, uint32_t id) {
    if (id < x->nby_id)
        return x->by_id[id];
    size_t lo = 0, hi = x->sparse ? x->count : 0;
    while (lo < hi && x->sparse) {
        size_t mid = (lo + hi) / 2;
        uint32_t at = (uint32_t)(x->sparse[mid] >> 32);
        if (at == id)
            return (uint32_t)x->sparse[mid] + 1;
        if (at < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Ids below this bound are indexed by a table, those above (legal but sparse: a fuzzer's or a
 * hand-made file's 2^31 - 1) by a sorted array: memory follows the record count, not the ids. */
static size_t dense_bound(uint32_t count) { return 2 * (size_t)count + 1024; }

/* Records and merges are taken in blocks: the random accesses of a block's inserts are
 * prefetched while the block before it is put in, so that they overlap instead of queueing, and
 * the loops between hold no per-item bookkeeping. Fewer merges a block: in HF's order each
 * merge's record is a random access too, and Llama 3 loaded a few percent faster with blocks of
 * 16 merges than of 64. One thread builds the tables: on a machine with other work a second one
 * was seen to cost more (its start in a fresh process, its waits, its share of the cores) than it
 * saved. */
enum { RECORD_BLOCK = 64, MERGE_BLOCK = 16 };

/* The length of the block of `size` items `back` blocks before the one from lo, of n items (0
 * before the first and after the last). */
static size_t block_len(size_t lo, size_t back, size_t size, size_t n) {
    size_t from = lo - back * size;
    return lo < back * size || from >= n ? 0 : n - from < size ? n - from : size;
}

/* The first record that cannot be indexed: what, and where (its byte offset in the section). */
enum { FOUND_NOTHING, FOUND_BAD_UTF8, FOUND_TWICE, FOUND_ID_TWICE };

typedef struct {
    int found;
    size_t at;
    uint32_t id;
} Found;

static uint64_t load64(const uint8_t *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

static uint32_t load32(const uint8_t *p) {
    uint32_t w;
    memcpy(&w, p, 4);
    return w;
}

/* Byte-level vocabularies hold ASCII and two-byte characters only (GPT-2's characters are at
 * most U+0143), and nearly all their tokens are shorter than 32 bytes: checking 16 bytes at once
 * that a token holds nothing else, well-formed, takes a fraction of the DFA's instructions. */
typedef int8_t i8x16 __attribute__((vector_size(16)));
typedef uint64_t u64x2 __attribute__((vector_size(16)));

static inline i8x16 load16(const void *p) {
    i8x16 v;
    memcpy(&v, p, 16);
    return v;
}

/* n <= 16 lanes of ones, then zeros. */
static inline i8x16 first_lanes(size_t n) {
    /* 16 bytes from below + 16 - n */
    static const int8_t below[32] = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
    return load16(below + 16 - n);
}

/* The 16 bytes from p, zero from byte n on. */
static inline i8x16 bytes16(const uint8_t *p, size_t n) { return load16(p) & first_lanes(n < 16 ? n : 16); }

/* The lead bytes of v (C2-DF; as signed bytes -62..-33), as lanes of ones. */
static inline i8x16 two_byte_leads(i8x16 v) { return (v > -63) & (v < -32); }

/* The bytes of v that break "ASCII and well-formed two-byte characters", as lanes of ones; prev:
 * the 16 bytes one before v's, whose leads must be followed by continuation bytes (80-BF, as
 * signed bytes -128..-65) and these by nothing else. Loading the bytes again one place earlier
 * moves the leads along without a shuffle, which compilers spell each their own way. */
static inline i8x16 two_byte_breaks(i8x16 v, i8x16 prev) {
    i8x16 cont = v < -64;
    return ((v < 0) ^ two_byte_leads(v) ^ cont) | (cont ^ two_byte_leads(prev));
}

/* Whether no lane of v is set. */
static inline int no_lanes(i8x16 v) {
    u64x2 w = (u64x2)v;
    return !(w[0] | w[1]);
}

/* hash_bytes(p, n) of a token of n < 16 bytes with 16 bytes readable from p, and *plain: whether
 * it holds ASCII and well-formed two-byte characters only (byte n, 0, ends a last lead; byte -1,
 * the high byte of the record's length, is 0 and no lead). */
static inline uint64_t short_token_hash(const uint8_t *p, size_t n, int *plain) {
    i8x16 v = bytes16(p, n);
    *plain = no_lanes(two_byte_breaks(v, bytes16(p - 1, n + 1)));
    u64x2 w = (u64x2)v;
    uint64_t h = hash_start(n), one = hash_step(h, w[0]);
    int two = n >= 8;
    return hash_finish(two ? one : h, two ? w[1] : w[0]);
}

/* Whether a token of 16 <= n < 32 bytes with 32 bytes readable from p holds ASCII and
 * well-formed two-byte characters only. */
static inline int two_byte_utf8(const uint8_t *p, size_t n) {
    return no_lanes(two_byte_breaks(bytes16(p, n), bytes16(p - 1, n + 1)) |
                    two_byte_breaks(bytes16(p + 16, n - 16), bytes16(p + 15, n - 15)));
}

/* The token slots' table, in locals of the loops that fill it (see scan_vocab). */
typedef struct {
    uint32_t *slots;
    size_t size;
    uint32_t off_mask;
    const uint8_t *vocab;
} TokenSlots;

/* Where a key whose slots start at first goes when the first slot or the next takes it and
 * neither may hold the same key already (the first is empty, or holds another tag and the next
 * is empty); SIZE_MAX when the probe has to look on. Most keys go into one of the two, and a
 * branch taken nearly always costs less than a probe loop, whose exit mispredicted about once
 * in two inserts. */
static inline size_t near_slot(const uint32_t *slots, size_t size, size_t first, uint32_t tag, uint32_t off_mask) {
    if (first + 1 >= size)
        return SIZE_MAX;
    /* in arithmetic, not in conditions, which compilers make branches of */
    uint32_t s0 = slots[first], s1 = slots[first + 1];
    uint32_t used = mtok_slot_ref(s0, off_mask) != 0, chosen = s0 ^ ((s0 ^ s1) & (0u - used));
    uint32_t takes = (mtok_slot_ref(chosen, off_mask) == 0) & !(used & ((s0 & ~off_mask) == tag));
    return takes ? first + used : SIZE_MAX;
}

/* A record's token into the slots from its first slot: 0, or 1 when an earlier record holds the
 * same bytes. value is the slot's: tag | record offset + 1. */
static inline int insert_token(TokenSlots t, size_t first, uint32_t value) {
    uint32_t tag = value & ~t.off_mask;
    size_t at = near_slot(t.slots, t.size, first, tag, t.off_mask);
    if (at != SIZE_MAX) {
        t.slots[at] = value;
        return 0;
    }
    const uint8_t *mine = t.vocab + (value & t.off_mask) - 1;
    for (size_t i = first;; i = mtok_next_slot(i, t.size)) {
        uint32_t s = t.slots[i], o = mtok_slot_ref(s, t.off_mask);
        if (!o) {
            t.slots[i] = value;
            return 0;
        }
        const uint8_t *other = t.vocab + o - 1;
        if ((s & ~t.off_mask) == tag && mtok_u16(other) == mtok_u16(mine) &&
            bytes_eq(other + 2, mine + 2, mtok_u16(mine)))
            return 1;
    }
}

/* A record between the two passes of scan_vocab: its first slot, its slot value and its id. */
typedef struct {
    uint32_t first, value, id;
} PendingRecord;

/* The records in file order: each one's UTF-8 checked, its id given its record, its token put in
 * the slots. Exporters write records in no order of id (MNN's in hash order), so both the id's
 * cell and the token's slot are random accesses: a block of records is read and the two
 * prefetched, then the block before it is given and put. The error is the pure reader's: the
 * first bad UTF-8 or id given twice in the file, else the first token listed a second time. */
static void scan_vocab(Tables *t, size_t *nsparse, Found *f) {
    const MtokIndex *x = &t->x;
    /* x's fields in locals: stores to the 32-bit slots and cells could otherwise alias x's 32-bit
     * fields, which the compiler would then load again at every record */
    const TokenSlots slots = {x->slots, x->size, x->off_mask, x->vocab};
    const uint32_t tag_mask = ~slots.off_mask;
    uint32_t *by_id = x->by_id;
    uint64_t *sparse = x->sparse;
    const size_t nby_id = x->nby_id, tail = x->tail;
    /* the bytes from the first record to the end of the data */
    const size_t readable = (size_t)t->buf.len - t->vocab_pos;
    size_t pos = 0, ns = 0;
    PendingRecord ring[2 * RECORD_BLOCK];
    Found bad = {FOUND_NOTHING, 0, 0}, twice = bad;
    /* after a bad record, only the ones before it are given and put */
    size_t end = x->count;
    for (size_t lo = 0; lo < end + RECORD_BLOCK; lo += RECORD_BLOCK) {
        PendingRecord *r = ring + lo % (2 * RECORD_BLOCK), *block = r;
        for (PendingRecord *r_end = r + block_len(lo, 0, RECORD_BLOCK, end); r < r_end; r++) {
            size_t len = mtok_u16(slots.vocab + pos);
            const uint8_t *token = slots.vocab + pos + 2;
            int plain = 0;
            uint64_t h;
            if (len < 16 && pos + 2 + 16 <= readable) {
                h = short_token_hash(token, len, &plain);
            } else {
                h = hash_bytes(token, len);
                plain = len < 32 && pos + 2 + 32 <= readable && two_byte_utf8(token, len);
            }
            if (!plain && !utf8_valid(token, len)) {
                bad = (Found){FOUND_BAD_UTF8, pos + 2 + utf8_invalid_at(token, len), 0};
                end = lo + (size_t)(r - block);
                break;
            }
            size_t first = mtok_first_slot(h, slots.size);
            uint32_t id = mtok_u32(token + len);
            __builtin_prefetch(&slots.slots[first], 1);
            if (id < nby_id)
                __builtin_prefetch(&by_id[id], 1);
            *r = (PendingRecord){(uint32_t)first, ((uint32_t)h & tag_mask) | (uint32_t)(pos + 1), id};
            pos += 2 + len + tail;
        }
        r = ring + (lo - RECORD_BLOCK) % (2 * RECORD_BLOCK);
        for (const PendingRecord *r_end = r + block_len(lo, 1, RECORD_BLOCK, end); r < r_end; r++) {
            uint32_t ref = r->value & slots.off_mask; /* the record's offset + 1 */
            if (r->id < nby_id) {
                if (by_id[r->id]) {
                    bad = (Found){FOUND_ID_TWICE, ref - 1, r->id};
                    goto done;
                }
                by_id[r->id] = ref;
            } else {
                sparse[ns++] = (uint64_t)r->id << 32 | (ref - 1);
            }
            if (insert_token(slots, r->first, r->value) && !twice.found)
                twice = (Found){FOUND_TWICE, ref - 1, 0};
        }
    }
done:
    *nsparse = ns;
    *f = bad.found ? bad : twice;
}

/* Every record's extent and id are checked, and the section's measures taken, before anything
 * is indexed. */
static int walk_records(Tables *t, const uint8_t *base, size_t size) {
    MtokIndex *x = &t->x;
    const char *section = "model vocabulary";
    size_t pos = t->vocab_pos;
    for (uint32_t k = 0; k < x->count; k++) {
        size_t at = pos;
        if (size - pos < 2) {
            format_error(section, at, "vocabulary record is truncated");
            return -1;
        }
        size_t len = mtok_u16(base + pos);
        if (size - pos - 2 < len + x->tail) {
            format_error(section, at, "vocabulary record is truncated");
            return -1;
        }
        uint32_t id = mtok_u32(base + pos + 2 + len);
        if (id > INT32_MAX) {
            format_error(section, at, "vocabulary id %u is not a valid token id", id);
            return -1;
        }
        pos += 2 + len + x->tail;
        if (pos - t->vocab_pos > UINT32_MAX - 1) {
            format_error(section, at, "the vocabulary section is larger than 4 GiB");
            return -1;
        }
        if (len > x->max_len)
            x->max_len = len;
        if ((int32_t)id > x->max_id)
            x->max_id = (int32_t)id;
    }
    x->vocab = base + t->vocab_pos;
    x->vocab_len = pos - t->vocab_pos;
    t->end = (Py_ssize_t)pos;
    if (t->kind != KIND_BPE)
        return 0;
    t->merges_pos = pos;
    size_t n = x->nmerges;
    if ((size - pos) / 12 < n) {
        format_error("merges", pos, "%zu merges need %zu bytes but only %zu remain (truncated?)", n, 12 * n, size - pos);
        return -1;
    }
    x->merges = base + pos;
    t->end = (Py_ssize_t)(pos + 12 * n);
    return 0;
}

static void vocab_error(const Tables *t, const Found *part) {
    const char *section = "model vocabulary";
    size_t at = t->vocab_pos + part->at;
    if (part->found == FOUND_BAD_UTF8)
        format_error(section, at, "vocabulary token is not valid UTF-8");
    else if (part->found == FOUND_TWICE)
        format_error(section, at, "the vocabulary lists a token twice");
    else
        format_error(section, at, "vocabulary id %u is given to two tokens", part->id);
}

static int index_vocab(Tables *t) {
    MtokIndex *x = &t->x;
    const char *section = "model vocabulary";
    size_t nsparse = 0;
    /* a record offset + 1 is at most the section's length */
    x->off_mask = mtok_low_mask(x->vocab_len);
    int sparse = x->max_id >= 0 && (size_t)x->max_id >= x->nby_id;
    if (sparse && !(x->sparse = malloc(x->count * sizeof *x->sparse))) {
        PyErr_NoMemory();
        return -1;
    }
    Found found;
    scan_vocab(t, &nsparse, &found);
    if (found.found) {
        vocab_error(t, &found);
        return -1;
    }
    if (sparse) {
        qsort(x->sparse, nsparse, sizeof *x->sparse, cmp_u64);
        for (size_t k = 1; k < nsparse; k++)
            if (x->sparse[k] >> 32 == x->sparse[k - 1] >> 32) {
                format_error(section, t->vocab_pos + x->vocab_len, "vocabulary id %u is given to two tokens",
                             (unsigned)(x->sparse[k] >> 32));
                return -1;
            }
        /* record_of searches count entries: pad with ids no record has */
        for (size_t k = nsparse; k < x->count; k++)
            x->sparse[k] = UINT64_MAX;
    }
    return 0;
}

/* Stable order of merges by the file's rank: HF's rank is the position in that order. */
static const uint8_t *sort_base;
static int cmp_rank(const void *a, const void *b) {
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    uint32_t ri = mtok_u32(sort_base + 12 * (size_t)i + 8), rj = mtok_u32(sort_base + 12 * (size_t)j + 8);
    return ri != rj ? (ri < rj ? -1 : 1) : (i < j ? -1 : i > j);
}

static uint32_t rank_of(const MtokIndex *x, uint32_t k) {
    return x->rank ? x->rank[k] : mtok_u32(x->merges + 12 * (size_t)k + 8);
}

static const uint8_t *record(const MtokIndex *x, uint32_t s) { return x->vocab + s - 1; }

/* The bytes of record r's first skip characters (all of them when it is shorter). */
static size_t skipped_bytes(const uint8_t *r, size_t skip) {
    size_t n = mtok_u16(r), from = 0;
    for (size_t c = 0; c < skip && from < n; c++)
        do
            from++;
        while (from < n && (r[2 + from] & 0xC0) == 0x80);
    return from;
}

/* The id of HF's merge result: the token left + right[skip characters:], or -1. key has room
 * for two tokens. */
static int32_t merge_result(const MtokIndex *x, const uint8_t *a, const uint8_t *b, size_t skip, uint8_t *key) {
    size_t la = mtok_u16(a), lb = mtok_u16(b), from = skipped_bytes(b, skip);
    if (la + lb - from > x->max_len)
        return -1;
    memcpy(key, a + 2, la);
    memcpy(key + la, b + 2 + from, lb - from);
    return mtok_token_id(x, key, la + lb - from);
}

/* a[0..n) == b[0..n) for a and b readable 4 bytes past n: each is a record's token or a part of
 * it up to its end, and the record's id follows. Tokens are a few bytes long, and a loop by the
 * byte mispredicts its exit at nearly every compare, so up to 8 bytes are one masked compare and
 * longer ones end with words that overlap the ones before. */
static inline int span_eq(const uint8_t *a, const uint8_t *b, size_t n) {
    static const uint64_t low_bytes[9] = {0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF, 0xFFFFFFFFFF, 0xFFFFFFFFFFFF,
                                          0xFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFFF};
    if (n <= 4)
        return !((load32(a) ^ load32(b)) & low_bytes[n]);
    if (n <= 8)
        return !((load64(a) ^ load64(b)) & low_bytes[n]);
    for (size_t i = 0; i + 8 < n; i += 8)
        if (load64(a + i) != load64(b + i))
            return 0;
    return load64(a + n - 8) == load64(b + n - 8);
}

/* The lanes where the n <= 16 bytes from a and from b differ (a lane each byte), with 16 bytes
 * readable from each. */
static inline i8x16 lanes_differ(const uint8_t *a, const uint8_t *b, size_t n) {
    return (load16(a) ^ load16(b)) & first_lanes(n);
}

/* Whether token r is a followed by b (records). Nearly all merges join tokens of at most 16
 * bytes each: those are compared in two 16-byte compares, without the branches on the lengths
 * that mispredict from one merge to the next. Their loads read at most 12 bytes past a record,
 * and the records are followed by at least one merge (12 bytes). */
static inline int is_concat(const uint8_t *r, const uint8_t *a, const uint8_t *b) {
    size_t la = mtok_u16(a), lb = mtok_u16(b);
    if (mtok_u16(r) != la + lb)
        return 0;
    if ((la > 16) | (lb > 16))
        return span_eq(r + 2, a + 2, la) && span_eq(r + 2 + la, b + 2, lb);
    return no_lanes(lanes_differ(r + 2, a + 2, la) | lanes_differ(r + 2 + la, b + 2, lb));
}

/* The merge slots' table, in locals of the loop that fills it (see merge_pass). */
typedef struct {
    uint32_t *slots;
    size_t size;
    uint32_t off_mask;
    const uint8_t *merges;
    const uint32_t *rank;
} PairSlots;

/* Merge k of the given rank into the merge slots from its pair's first slot; hash: the low bits
 * of its pair's hash, for the tag. A pair listed twice: the later merge in HF's order wins, as in
 * HF's map, in whichever order the merges come. */
static inline void insert_pair(PairSlots t, uint32_t k, uint32_t rank, uint32_t hash, size_t first) {
    uint32_t value = (hash & ~t.off_mask) | (k + 1), tag = value & ~t.off_mask;
    size_t at = near_slot(t.slots, t.size, first, tag, t.off_mask);
    if (at != SIZE_MAX) {
        t.slots[at] = value;
        return;
    }
    const uint8_t *m = t.merges + 12 * (size_t)k;
    for (size_t i = first;; i = mtok_next_slot(i, t.size)) {
        uint32_t s = t.slots[i], o = mtok_slot_ref(s, t.off_mask);
        if (!o) {
            t.slots[i] = value;
            return;
        }
        const uint8_t *other = t.merges + 12 * (size_t)(o - 1);
        if ((s & ~t.off_mask) == tag && load64(other) == load64(m)) {
            if ((t.rank ? t.rank[o - 1] : mtok_u32(other + 8)) < rank)
                t.slots[i] = value;
            return;
        }
    }
}

/* The FormatError for the first merge in the file that names an id the vocabulary lacks. */
static void missing_id_error(Tables *t) {
    const MtokIndex *x = &t->x;
    for (size_t k = 0; k < x->nmerges; k++) {
        const uint8_t *m = x->merges + 12 * k;
        uint32_t a = mtok_u32(m), b = mtok_u32(m + 4);
        if (!record_of(x, a) || !record_of(x, b)) {
            format_error("merges", t->merges_pos + 12 * k, "merge (%u, %u) names id %u, which is not in the vocabulary",
                         a, b, record_of(x, a) ? b : a);
            return;
        }
    }
}

/* Whether the first merges in the file make token rank + d for one d (*delta): then every
 * merge's result can be guessed in file order. */
static int results_follow_ranks(const MtokIndex *x, uint8_t *key, int64_t *delta) {
    size_t sample = x->nmerges < 64 ? x->nmerges : 64;
    for (size_t k = 0; k < sample; k++) {
        const uint8_t *m = x->merges + 12 * k;
        uint32_t sa = record_of(x, mtok_u32(m)), sb = record_of(x, mtok_u32(m + 4));
        if (!sa || !sb)
            return 0;
        int32_t id = merge_result(x, record(x, sa), record(x, sb), 0, key);
        int64_t d = (int64_t)id - mtok_u32(m + 8);
        if (id < 0 || (k && d != *delta))
            return 0;
        *delta = d;
    }
    return sample > 0;
}

/* How index_merges takes the merges: in HF's order (order: rank -> merge index) or, order NULL,
 * the file's; and what it met. */
typedef struct {
    const uint32_t *order;
    int64_t delta;         /* in the file's order: result - rank, as the first merges have it */
    uint8_t *key;          /* room for two tokens */
    int missing;           /* a merge names an id the vocabulary lacks */
    uint32_t unresolved;   /* the first merge (in the file) whose result was not found */
    int32_t *results;      /* the room for x->merged, which the file's order takes only if needed */
    int32_t last;          /* in HF's order: the result put last in x->steps, */
    uint32_t nspill, spill_cap; /* the blocks spilled, and the room for them */
    int nomem;
} MergePass;

/* In HF's order the results are stored as steps (Llama 3's and Gemma's: each result is the one
 * before or the next id, every merge but one): 16 bytes for 64 merges, where a table of results
 * would be 4 bytes a merge of fresh pages (Llama 3: 274 pages, Gemma 567). The result of rank q
 * after those of the ranks before it; -1 without memory. */
static int steps_put(MtokIndex *x, MergePass *pass, uint32_t q, int32_t id) {
    MtokSteps *b = &x->steps[q / 64];
    uint32_t i = q % 64;
    if (i == 0) {
        *b = (MtokSteps){id, UINT32_MAX, 0};
    } else if (b->at != UINT32_MAX) {
        x->spill[(size_t)b->at * 64 + i] = id;
    } else if ((uint64_t)((int64_t)id - pass->last) <= 1) {
        b->steps |= (uint64_t)(id - pass->last) << i;
    } else {
        if (pass->nspill == pass->spill_cap) {
            uint32_t cap = pass->spill_cap ? 2 * pass->spill_cap : 4;
            int32_t *spill = realloc(x->spill, (size_t)cap * 64 * sizeof *spill);
            if (!spill)
                return -1;
            x->spill = spill;
            pass->spill_cap = cap;
        }
        int32_t *r = x->spill + (size_t)pass->nspill * 64;
        for (uint32_t j = 0; j < i; j++)
            r[j] = b->base + (int32_t)__builtin_popcountll(b->steps & ((2ull << j) - 1));
        r[i] = id;
        b->at = pass->nspill++;
    }
    pass->last = id;
    return 0;
}

/* x->merged in the room for it, faulted in at once, for a pass in the file's order where merge k
 * is the first whose result is not its rank + delta: the ones before it are. */
static int32_t *results_from(MtokIndex *x, int32_t *room, uint32_t k, int64_t delta) {
    populate(room, x->nmerges * sizeof *room);
    for (uint32_t j = 0; j < k; j++)
        room[j] = (int32_t)(mtok_u32(x->merges + 12 * (size_t)j + 8) + delta);
    return x->merged = room;
}

/* The ids' records, in locals of merge_pass' loop: the record (offset + 1) of an id, or 0. */
typedef struct {
    const uint32_t *by_id;
    size_t nby_id;
    const uint8_t *vocab;
    const MtokIndex *x;
} IdRecords;

static inline uint32_t id_record(IdRecords r, uint32_t id) { return id < r.nby_id ? r.by_id[id] : record_of(r.x, id); }

/* Whether token id is token a followed by token b (records). */
static inline int makes(IdRecords r, int64_t id, const uint8_t *a, const uint8_t *b) {
    uint32_t s = id < 0 || id > INT32_MAX ? 0 : id_record(r, (uint32_t)id);
    return s && is_concat(r.vocab + s - 1, a, b);
}

/* A merge between the stages of merge_pass. */
typedef struct {
    const uint8_t *ra, *rb; /* the records of its tokens */
    size_t first;           /* its pair's first slot */
    uint32_t hash, k, rank; /* hash: the low bits of its pair's hash */
} PendingMerge;

/* merge_pass' stages: the blocks of merges between its first and its last one wait in a ring */
enum { STAGES = 4, RING = STAGES * MERGE_BLOCK };

/* Every merge's result found, and in the file's order its pair put in the merge slots. The loop
 * is a software pipeline, each stage a block of merges behind the previous one: fetch the merge
 * records; read them (and hash the pairs) and fetch the ids' cells (and the pairs' slots); fetch
 * the tokens' records and the guessed results'; (put the pairs in their slots and) resolve the
 * results. In HF's order the slots hold the order until the pass ends (see index_merges), and
 * insert_pairs puts the pairs in after it. by_file is a constant in each of merge_pass' two
 * copies, which then test it nowhere. */
static inline __attribute__((always_inline)) void merge_pass_in(MtokIndex *x, MergePass *pass, const int by_file) {
    /* the tables in locals: stores to the slots and results (32-bit) could otherwise alias x's
     * 32-bit fields, which the compiler would then load again at every merge */
    const uint32_t *order = pass->order;
    const PairSlots slots = {x->mslots, x->msize, x->moff_mask, x->merges, x->rank};
    const IdRecords ids = {x->by_id, x->nby_id, x->vocab, x};
    int32_t *merged = x->merged;
    const size_t n = x->nmerges;
    int64_t delta = pass->delta;
    int64_t prev = -1; /* in HF's order: the previous merge's result, */
    size_t prev_len = 0; /* and its length */
    uint32_t unresolved = pass->unresolved;
    PendingMerge ring[RING];
    /* the oldest block's stage first: a block's records and guesses are fetched right after the
     * block before it is resolved */
    for (size_t lo = 0; lo < n + (STAGES - 1) * MERGE_BLOCK; lo += MERGE_BLOCK) {
        /* each stage a loop of its own: fewer values live in each, fewer kept on the stack */
        PendingMerge *p = ring + (lo - 3 * MERGE_BLOCK) % RING, *block_end = p + block_len(lo, 3, MERGE_BLOCK, n);
        for (const PendingMerge *i = p; by_file && i < block_end; i++)
            insert_pair(slots, i->k, i->rank, i->hash, i->first);
        for (; p < block_end; p++) {
            /* in HF's order a result is the previous one or the next: not the previous one when
             * the lengths differ */
            size_t len = mtok_u16(p->ra) + mtok_u16(p->rb);
            int64_t guess = by_file ? (int64_t)p->rank + delta : prev + (prev_len != len);
            int32_t id = makes(ids, guess, p->ra, p->rb)       ? (int32_t)guess
                       : makes(ids, guess + 1, p->ra, p->rb) ? (int32_t)(guess + 1)
                                                                : merge_result(x, p->ra, p->rb, 0, pass->key);
            if (id < 0) {
                if (p->k < unresolved)
                    unresolved = p->k;
                if (by_file)
                    continue;
                /* the steps take every rank in turn: a stand-in (the build fails, or
                 * resolve_merges finds every result anew) */
                id = pass->last;
            }
            /* in the file's order results that all follow their ranks (Qwen3's, GPT-4o's) are
             * not stored: the encoder adds delta to a merge's rank, which it reads anyway, and a
             * load faults in and writes 0.6-0.8 MB less */
            if (by_file) {
                if (!merged) {
                    if (id == (int64_t)p->rank + delta)
                        continue;
                    merged = results_from(x, pass->results, p->k, delta);
                }
                merged[p->k] = id;
            } else if (steps_put(x, pass, p->rank, id) < 0) {
                pass->nomem = 1;
                return;
            }
            prev = id;
            prev_len = len;
            delta = (int64_t)id - p->rank;
        }
        p = ring + (lo - 2 * MERGE_BLOCK) % RING;
        block_end = p + block_len(lo, 2, MERGE_BLOCK, n);
        /* in HF's order results step by at most one per merge: a result is at most prev + its
         * distance from the last one resolved, and in most files it is that */
        for (int64_t most = prev + 1; p < block_end; p++, most++) {
            const uint8_t *m = slots.merges + 12 * (size_t)p->k;
            uint32_t sa = id_record(ids, mtok_u32(m)), sb = id_record(ids, mtok_u32(m + 4));
            if (!sa || !sb) {
                pass->missing = 1;
                return;
            }
            p->ra = ids.vocab + sa - 1;
            p->rb = ids.vocab + sb - 1;
            __builtin_prefetch(p->ra);
            __builtin_prefetch(p->rb);
            size_t guess = by_file ? (size_t)(p->rank + delta) : (size_t)most;
            if (guess < ids.nby_id && ids.by_id[guess])
                __builtin_prefetch(ids.vocab + ids.by_id[guess] - 1);
        }
        p = ring + (lo - MERGE_BLOCK) % RING;
        block_end = p + block_len(lo, 1, MERGE_BLOCK, n);
        for (size_t q = lo - MERGE_BLOCK; p < block_end; p++, q++) {
            uint32_t k = by_file ? (uint32_t)q : order[q];
            const uint8_t *m = slots.merges + 12 * (size_t)k;
            uint32_t a = mtok_u32(m), b = mtok_u32(m + 4), rank = slots.rank ? slots.rank[k] : mtok_u32(m + 8);
            if (by_file) {
                uint64_t h = mtok_pair_hash(a, b);
                p->first = mtok_first_slot(h, slots.size);
                p->hash = (uint32_t)h;
                __builtin_prefetch(&slots.slots[p->first], 1);
            }
            if (a < ids.nby_id && b < ids.nby_id) {
                __builtin_prefetch(&ids.by_id[a]);
                __builtin_prefetch(&ids.by_id[b]);
            }
            if (by_file && (size_t)(rank + delta) < ids.nby_id)
                __builtin_prefetch(&ids.by_id[rank + delta]);
            p->k = k;
            p->rank = rank;
        }
        if (!by_file)
            for (size_t q = lo, end = lo + block_len(lo, 0, MERGE_BLOCK, n); q < end; q++)
                __builtin_prefetch(slots.merges + 12 * (size_t)order[q]);
    }
    pass->unresolved = unresolved;
}

/* Every merge's pair into the merge slots, in the file's order: the slots of the merges AHEAD
 * on are fetched while one is put in. */
static void insert_pairs(const MtokIndex *x) {
    enum { AHEAD = 32 };
    const PairSlots slots = {x->mslots, x->msize, x->moff_mask, x->merges, x->rank};
    const size_t n = x->nmerges;
    struct {
        size_t first;
        uint32_t hash;
    } ring[AHEAD];
    for (size_t k = 0; k < n + AHEAD; k++) {
        if (k >= AHEAD) {
            size_t j = k - AHEAD;
            uint32_t rank = slots.rank ? slots.rank[j] : mtok_u32(slots.merges + 12 * j + 8);
            insert_pair(slots, (uint32_t)j, rank, ring[j % AHEAD].hash, ring[j % AHEAD].first);
        }
        if (k < n) {
            const uint8_t *m = slots.merges + 12 * k;
            uint64_t h = mtok_pair_hash(mtok_u32(m), mtok_u32(m + 4));
            size_t first = mtok_first_slot(h, slots.size);
            __builtin_prefetch(&slots.slots[first], 1);
            ring[k % AHEAD].first = first;
            ring[k % AHEAD].hash = (uint32_t)h;
        }
    }
}

static void merge_pass(MtokIndex *x, MergePass *pass) {
    if (pass->order)
        merge_pass_in(x, pass, 0);
    else
        merge_pass_in(x, pass, 1);
}

static int index_merges(Tables *t) {
    MtokIndex *x = &t->x;
    size_t n = x->nmerges;
    uint64_t *seen = calloc(n / 64 + 1, sizeof *seen);
    uint8_t *key = malloc(2 * 0xFFFF + 1);
    uint32_t *order = NULL;
    x->moff_mask = mtok_low_mask(n);
    int ok = -1;
    if (!seen || !key) {
        PyErr_NoMemory();
        goto done;
    }
    int permutation = 1;
    for (size_t k = 0; k < n; k++) {
        uint32_t rank = mtok_u32(x->merges + 12 * k + 8);
        uint64_t bit = 1ull << (rank % 64);
        if (rank >= n || seen[rank / 64] & bit) {
            permutation = 0;
            break;
        }
        seen[rank / 64] |= bit;
    }
    /* Each merge's result is found here already, as HF finds it without a continuing-subword
     * prefix (resolve_merges redoes it for a prefix). Exporters number tokens in merge order,
     * so a result is nearly always guessed with one record compare, and only a wrong guess
     * pays for hashing the pair. Where every result is rank + a fixed offset (rank + 256 in
     * Qwen3 and GPT-4o) the merges go in file order, guessing that; otherwise in HF's order,
     * where a result is nearly always the previous merge's or the next id (every merge but
     * one in Llama 3 and Gemma). */
    int64_t delta = 0;
    if (!(permutation && results_follow_ranks(x, key, &delta))) {
        /* the merge slots (5/3 as many) hold the order until the pass has resolved every merge:
         * a table of its own would be a megabyte of fresh pages a load, for Llama 3 0.3 ms */
        order = x->mslots;
        if (permutation) {
            for (uint32_t k = 0; k < n; k++)
                order[mtok_u32(x->merges + 12 * (size_t)k + 8)] = k;
        } else {
            /* unusual ranks are ordered (stable for equal ones), as the pure reader orders them */
            if (!(x->rank = malloc(n * sizeof *x->rank))) {
                PyErr_NoMemory();
                goto done;
            }
            for (uint32_t k = 0; k < n; k++)
                order[k] = k;
            sort_base = x->merges;
            qsort(order, n, sizeof *order, cmp_rank);
            for (uint32_t k = 0; k < n; k++)
                x->rank[order[k]] = k;
        }
    }
    x->merged_delta = delta;
    if (order && !(x->steps = malloc((n / 64 + 1) * sizeof *x->steps))) {
        PyErr_NoMemory();
        goto done;
    }
    MergePass pass = {order, delta, key, 0, UINT32_MAX, t->merged_room, 0, 0, 0, 0};
    merge_pass(x, &pass);
    if (pass.nomem) {
        PyErr_NoMemory();
        goto done;
    }
    if (pass.missing) {
        missing_id_error(t);
        goto done;
    }
    if (order) {
        memset(order, 0, n * sizeof *order);
        insert_pairs(x);
    }
    t->unresolved = pass.unresolved;
    ok = 0;
done:
    free(seen);
    free(key);
    return ok;
}

static void Tables_dealloc(Tables *self) {
    MtokIndex *x = &self->x;
    arena_free(&self->arena);
    free(x->sparse);
    free(x->rank);
    free(x->steps);
    free(x->spill);
    if (self->buf.obj)
        PyBuffer_Release(&self->buf);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* MtokTables(data, pos, kind, count, merge_count=0): the records from pos checked and measured;
 * build() indexes them. */
static int Tables_init(Tables *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"data", "pos", "kind", "count", "merge_count", NULL};
    Py_ssize_t pos;
    const char *kind;
    unsigned int count, nmerges = 0;
    if (self->buf.obj) {
        PyErr_SetString(PyExc_RuntimeError, "MtokTables is already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*nsI|I", kwlist, &self->buf, &pos, &kind, &count, &nmerges))
        return -1;
    if (strcmp(kind, "BPE") == 0)
        self->kind = KIND_BPE;
    else if (strcmp(kind, "WordPiece") == 0)
        self->kind = KIND_WORDPIECE;
    else {
        PyErr_Format(PyExc_ValueError, "no native tables for %s", kind);
        return -1;
    }
    if (pos < 0 || pos > self->buf.len) {
        PyErr_SetString(PyExc_ValueError, "pos lies outside the data");
        return -1;
    }
    self->x.count = count;
    self->x.tail = 4;
    self->x.max_id = -1;
    self->x.nmerges = self->kind == KIND_BPE ? nmerges : 0;
    self->vocab_pos = (size_t)pos;
    return walk_records(self, self->buf.buf, (size_t)self->buf.len);
}

/* Each merge's result, HF's vocab[left + right[skip:]] where skip is the continuing-subword
 * prefix length in characters; index_merges has found them for skip 0. */
static int resolve_merges(Tables *self, size_t skip) {
    MtokIndex *x = &self->x;
    if (skip > 0) {
        uint8_t *key = malloc(2 * 0xFFFF + 1);
        if (!key) {
            PyErr_NoMemory();
            return -1;
        }
        if (!x->merged) {
            populate(self->merged_room, x->nmerges * sizeof *x->merged);
            x->merged = self->merged_room;
            free(x->steps);
            free(x->spill);
            x->steps = NULL;
            x->spill = NULL;
        }
        self->unresolved = UINT32_MAX;
        for (uint32_t k = 0; k < x->nmerges; k++) {
            const uint8_t *m = x->merges + 12 * (size_t)k;
            const uint8_t *a = record(x, record_of(x, mtok_u32(m))), *b = record(x, record_of(x, mtok_u32(m + 4)));
            if ((x->merged[k] = merge_result(x, a, b, skip, key)) < 0) {
                self->unresolved = k;
                break;
            }
        }
        free(key);
    }
    if (self->unresolved != UINT32_MAX) {
        const uint8_t *m = x->merges + 12 * (size_t)self->unresolved;
        format_error("merges", self->merges_pos + 12 * (size_t)self->unresolved,
                     "merge (%u, %u) makes a token that is not in the vocabulary", mtok_u32(m), mtok_u32(m + 4));
        return -1;
    }
    return 0;
}

/* The tables' sizes and their places in the arena. */
static int alloc_tables(Tables *t) {
    MtokIndex *x = &t->x;
    size_t n = x->nmerges;
    int bpe = t->kind == KIND_BPE;
    x->nby_id = dense_bound(x->count);
    x->size = slots_for(x->count);
    x->msize = bpe ? slots_for(n) : 0;
    size_t slots = arena_room(x->size * sizeof *x->slots);
    size_t mslots = bpe ? arena_room(x->msize * sizeof *x->mslots) : 0;
    /* ids are nearly always 0 .. count - 1: the rest of by_id is there for gaps; after it, in
     * pages of their own, the merges' results, which only some builds store */
    size_t hot = slots + mslots + x->count * sizeof *x->by_id;
    size_t zeroed = round_up(slots + mslots + arena_room(x->nby_id * sizeof *x->by_id), PAGE);
    arena_free(&t->arena); /* a build that failed before */
    if (arena_alloc(&t->arena, hot, zeroed, zeroed + (bpe ? n * sizeof *x->merged : 0)) < 0)
        return -1;
    size_t at = 0;
    x->slots = arena_take(&t->arena, &at, x->size * sizeof *x->slots);
    if (bpe)
        x->mslots = arena_take(&t->arena, &at, x->msize * sizeof *x->mslots);
    x->by_id = arena_take(&t->arena, &at, x->nby_id * sizeof *x->by_id);
    t->merged_room = bpe ? (int32_t *)(t->arena.at + zeroed) : NULL;
    x->merged = NULL;
    free(x->steps); /* a build that failed before */
    free(x->spill);
    x->steps = NULL;
    x->spill = NULL;
    return 0;
}

/* build(skip): index the records; skip as for resolve_merges. */
static PyObject *Tables_build(Tables *self, PyObject *arg) {
    Py_ssize_t skip = PyLong_AsSsize_t(arg);
    if (skip == -1 && PyErr_Occurred())
        return NULL;
    if (self->built) {
        PyErr_SetString(PyExc_RuntimeError, "MtokTables is already built");
        return NULL;
    }
    if (skip < 0) {
        PyErr_SetString(PyExc_ValueError, "skip must not be negative");
        return NULL;
    }
    if (alloc_tables(self) < 0)
        return PyErr_NoMemory();
    if (index_vocab(self) < 0 ||
        (self->kind == KIND_BPE && (index_merges(self) < 0 || resolve_merges(self, (size_t)skip) < 0)))
        return NULL;
    if (self->kind == KIND_BPE && !self->x.merged)
        arena_drop(self->merged_room, self->x.nmerges * sizeof *self->x.merged);
    self->built = 1;
    Py_RETURN_NONE;
}

static PyObject *token_str(const uint8_t *r) {
    return PyUnicode_DecodeUTF8((const char *)r + 2, (Py_ssize_t)mtok_u16(r), "strict");
}

static Py_ssize_t Tables_len(Tables *self) { return (Py_ssize_t)self->x.count; }

/* get(token) -> int | None */
static PyObject *Tables_get(Tables *self, PyObject *token) {
    Py_ssize_t n;
    const char *s = PyUnicode_Check(token) ? PyUnicode_AsUTF8AndSize(token, &n) : NULL;
    if (!s) {
        PyErr_Clear(); /* not a str, or a lone surrogate: no token is that */
        Py_RETURN_NONE;
    }
    int32_t id = mtok_token_id(&self->x, (const uint8_t *)s, (size_t)n);
    if (id < 0)
        Py_RETURN_NONE;
    return PyLong_FromLong(id);
}

/* token(id) -> str | None */
static PyObject *Tables_token(Tables *self, PyObject *arg) {
    long long id = PyLong_AsLongLong(arg);
    if (id == -1 && PyErr_Occurred())
        return NULL;
    uint32_t s = id >= 0 && id <= INT32_MAX ? record_of(&self->x, (uint32_t)id) : 0;
    if (!s)
        Py_RETURN_NONE;
    return token_str(record(&self->x, s));
}

/* tokens() -> list[str], ids() -> list[int]: the records in file order */
static PyObject *Tables_records(Tables *self, int want_ids) {
    const MtokIndex *x = &self->x;
    PyObject *list = PyList_New((Py_ssize_t)x->count);
    size_t pos = 0;
    for (uint32_t k = 0; list && k < x->count; k++) {
        const uint8_t *r = x->vocab + pos;
        size_t len = mtok_u16(r);
        PyObject *o = want_ids ? PyLong_FromUnsignedLong(mtok_u32(r + 2 + len)) : token_str(r);
        if (!o)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)k, o);
        pos += 2 + len + x->tail;
    }
    return list;
}

static PyObject *Tables_tokens(Tables *self, PyObject *unused) {
    (void)unused;
    return Tables_records(self, 0);
}

static PyObject *Tables_ids(Tables *self, PyObject *unused) {
    (void)unused;
    return Tables_records(self, 1);
}

/* merges() -> list[tuple[int, int]]: (left id, right id) in HF's order */
static PyObject *Tables_merges(Tables *self, PyObject *unused) {
    (void)unused;
    const MtokIndex *x = &self->x;
    PyObject *list = PyList_New((Py_ssize_t)x->nmerges);
    for (uint32_t k = 0; list && k < x->nmerges; k++) {
        const uint8_t *m = x->merges + 12 * (size_t)k;
        uint32_t rank = rank_of(x, k);
        PyObject *pair = Py_BuildValue("(kk)", (unsigned long)mtok_u32(m), (unsigned long)mtok_u32(m + 4));
        if (!pair || rank >= x->nmerges || PyList_GET_ITEM(list, rank)) {
            /* ranks are a permutation of 0..n-1 or were made one (index_merges) */
            Py_XDECREF(pair);
            Py_CLEAR(list);
            PyErr_SetString(PyExc_SystemError, "merge ranks are not a permutation");
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)rank, pair);
    }
    return list;
}

/* merge_table() -> dict[(left, right), (rank, merged)]: models.BPE's MergeTable */
static PyObject *Tables_merge_table(Tables *self, PyObject *unused) {
    (void)unused;
    const MtokIndex *x = &self->x;
    if (!self->built) {
        PyErr_SetString(PyExc_RuntimeError, "build() first");
        return NULL;
    }
    /* each merge's pair as the encoder finds it: a pair listed twice answers its last merge */
    PyObject *table = PyDict_New();
    for (uint32_t k = 0; table && k < x->nmerges; k++) {
        const uint8_t *m = x->merges + 12 * (size_t)k;
        uint32_t found = mtok_pair_ref(x, mtok_u32(m), mtok_u32(m + 4));
        if (found != k + 1)
            continue;
        PyObject *key = Py_BuildValue("(kk)", (unsigned long)mtok_u32(m), (unsigned long)mtok_u32(m + 4));
        PyObject *value = Py_BuildValue("(kl)", (unsigned long)rank_of(x, k), (long)mtok_merged(x, k, rank_of(x, k)));
        if (!key || !value || PyDict_SetItem(table, key, value) < 0)
            Py_CLEAR(table);
        Py_XDECREF(key);
        Py_XDECREF(value);
    }
    return table;
}

static PyObject *Tables_get_end(Tables *self, void *closure) {
    (void)closure;
    return PyLong_FromSsize_t(self->end);
}

static PyObject *Tables_get_start(Tables *self, void *closure) {
    (void)closure;
    return PyLong_FromSize_t(self->vocab_pos);
}

static PyObject *Tables_get_max_id(Tables *self, void *closure) {
    (void)closure;
    return PyLong_FromLong(self->x.max_id);
}

static PyMethodDef Tables_methods[] = {
    {"get", (PyCFunction)Tables_get, METH_O, "get(token) -> int | None"},
    {"token", (PyCFunction)Tables_token, METH_O, "token(id) -> str | None"},
    {"tokens", (PyCFunction)Tables_tokens, METH_NOARGS, "tokens() -> list[str], in file order"},
    {"ids", (PyCFunction)Tables_ids, METH_NOARGS, "ids() -> list[int], in file order"},
    {"merges", (PyCFunction)Tables_merges, METH_NOARGS, "merges() -> list[(left id, right id)] in rank order"},
    {"merge_table", (PyCFunction)Tables_merge_table, METH_NOARGS,
     "merge_table() -> {(left, right): (rank, merged)}, models.BPE's MergeTable"},
    {"build", (PyCFunction)Tables_build, METH_O,
     "build(skip): index the records (skip: the continuing-subword prefix length merges drop from the right side)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Tables_getset[] = {
    {"start", (getter)Tables_get_start, NULL, "the offset of the model's first record", NULL},
    {"end", (getter)Tables_get_end, NULL, "the offset after the model's records", NULL},
    {"max_id", (getter)Tables_get_max_id, NULL, "the largest vocabulary id (-1 when empty)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods Tables_as_sequence = {.sq_length = (lenfunc)Tables_len};

static PyTypeObject TablesType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pymtok._native.MtokTables",
    .tp_basicsize = sizeof(Tables),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Tables_init,
    .tp_dealloc = (destructor)Tables_dealloc,
    .tp_methods = Tables_methods,
    .tp_getset = Tables_getset,
    .tp_as_sequence = &Tables_as_sequence,
    .tp_doc = "MtokTables(data, pos, kind, count, merge_count=0): a .mtok model section, indexed in place by build().",
};

/* scan_norm_table(data, pos, count) -> end: validate the `count` entries of a normalizer
 * code-point table (FORMAT.md §3.1) from pos, as mtok.py's _read_table does, without building
 * them: a file with the extension never uses MNN's table, but must still be sound. */
static PyObject *scan_norm_table(PyObject *module, PyObject *args) {
    (void)module;
    Py_buffer buf;
    Py_ssize_t pos;
    unsigned int count;
    if (!PyArg_ParseTuple(args, "y*nI", &buf, &pos, &count))
        return NULL;
    const char *section = "normalizer";
    const uint8_t *base = buf.buf;
    size_t size = (size_t)buf.len, at = pos < 0 ? size + 1 : (size_t)pos;
    int64_t last = -1;
    for (uint32_t k = 0; k < count && at <= size; k++) {
        size_t entry = at;
        if (size - at < 4) {
            format_error(section, at, "table code point needs 4 bytes but only %zu remain (truncated?)", size - at);
            goto fail;
        }
        uint32_t cp = mtok_u32(base + at);
        if (cp > 0x10FFFF || (int64_t)cp <= last) {
            format_error(section, entry, "table code point %#x is out of range or not ascending", cp);
            goto fail;
        }
        last = cp;
        at += 4;
        if (size - at < 2) {
            format_error(section, at, "table replacement needs 2 bytes but only %zu remain (truncated?)", size - at);
            goto fail;
        }
        size_t len = mtok_u16(base + at);
        at += 2;
        if (size - at < len) {
            format_error(section, at, "table replacement needs %zu bytes but only %zu remain (truncated?)", len, size - at);
            goto fail;
        }
        size_t bad = utf8_invalid_at(base + at, len);
        if (bad < len) {
            format_error(section, at + bad, "table replacement is not valid UTF-8");
            goto fail;
        }
        at += len;
    }
    PyBuffer_Release(&buf);
    if (at > size) {
        PyErr_SetString(PyExc_ValueError, "pos lies outside the data");
        return NULL;
    }
    return PyLong_FromSize_t(at);
fail:
    PyBuffer_Release(&buf);
    return NULL;
}

/* read_whole(fd, size) -> bytes: up to size bytes read from fd, into pages faulted in at once
 * (see arena_alloc): a 5 MB file took 2.1 ms to read into pages faulted one by one, 1.7 ms so. */
static PyObject *read_whole(PyObject *module, PyObject *args) {
    (void)module;
    int fd;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "in:read_whole", &fd, &size))
        return NULL;
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "size must not be negative");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    if (!out)
        return NULL;
    char *p = PyBytes_AS_STRING(out);
    Py_ssize_t got = 0, n = 0;
    Py_BEGIN_ALLOW_THREADS
    populate(p, (size_t)size);
    while (got < size) {
        n = read(fd, p + got, (size_t)(size - got < (1 << 30) ? size - got : (1 << 30)));
        if (n > 0)
            got += n;
        else if (n == 0 || errno != EINTR)
            break;
    }
    Py_END_ALLOW_THREADS
    if (n < 0 && got < size) {
        Py_DECREF(out);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    if (got < size && _PyBytes_Resize(&out, got) < 0)
        return NULL;
    return out;
}

static PyMethodDef tables_functions[] = {
    {"read_whole", read_whole, METH_VARARGS,
     "read_whole(fd, size) -> bytes: up to size bytes of fd, read into pages faulted in at once"},
    {"scan_norm_table", scan_norm_table, METH_VARARGS,
     "scan_norm_table(data, pos, count) -> end: a normalizer code-point table validated, not built"},
    {NULL, NULL, 0, NULL},
};

int mtok_tables_register(PyObject *module) {
    utf8_dfa_init();
    if (PyType_Ready(&TablesType) < 0 || PyModule_AddFunctions(module, tables_functions) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "MtokTables", (PyObject *)&TablesType);
}

/* ---- what the native encoder takes from the tables -------------------------------------- */

/* GPT-2's byte -> character map (pymtok.byte_level), as the UTF-8 of each byte's character:
 * byte-level vocabularies hold tokens in those characters. */
static uint8_t gpt2_utf8[256][2], gpt2_len[256];
/* the inverse: the byte of each character up to U+0143 (GPT-2's last), -1 for one that is none */
#define GPT2_CHARS 0x144
static int16_t gpt2_raw[GPT2_CHARS];

static void init_gpt2(void) {
    for (uint32_t c = 0; c < GPT2_CHARS; c++)
        gpt2_raw[c] = (int16_t)gpt2_byte(c);
    for (int b = 0; b < 256; b++) {
        uint32_t c = gpt2_char((uint8_t)b);
        if (c < 0x80) {
            gpt2_utf8[b][0] = (uint8_t)c;
            gpt2_len[b] = 1;
        } else {
            gpt2_utf8[b][0] = (uint8_t)(0xC0 | c >> 6);
            gpt2_utf8[b][1] = (uint8_t)(0x80 | (c & 0x3F));
            gpt2_len[b] = 2;
        }
    }
}

int32_t mtok_byte_level_id(const MtokIndex *x, const uint8_t *b, size_t n) {
    if (n > x->max_len)
        return -1; /* each byte is at least one byte of the token */
    uint8_t stack[512], *key = n <= sizeof stack / 2 ? stack : malloc(2 * n);
    if (!key)
        return -1;
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(key + w, gpt2_utf8[b[i]], gpt2_len[b[i]]);
        w += gpt2_len[b[i]];
    }
    int32_t id = mtok_token_id(x, key, w);
    if (key != stack)
        free(key);
    return id;
}

/* Whether the 17 bytes at s, of which the first len (below 16) are a record's, may hold a GPT-2
 * character of a byte from 0x80 on: C2, C3 or C5 leads, or C4 before A1 and above (U+0121 on;
 * U+0100-U+0120, C4 80-A0, are bytes below 0x80, Ġ among them). Most records hold none. */
static inline int gpt2_high16(const uint8_t *s, size_t len) {
#ifdef __SSE2__
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)s),
            next = _mm_loadu_si128((const __m128i *)(const void *)(s + 1)),
            lead = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8((char)0xC2)),
                                             _mm_cmpeq_epi8(v, _mm_set1_epi8((char)0xC3))),
                                _mm_cmpeq_epi8(v, _mm_set1_epi8((char)0xC5))),
            c4 = _mm_andnot_si128(_mm_cmpeq_epi8(_mm_subs_epu8(next, _mm_set1_epi8((char)0xA0)), _mm_setzero_si128()),
                                  _mm_cmpeq_epi8(v, _mm_set1_epi8((char)0xC4)));
    unsigned mask = (unsigned)_mm_movemask_epi8(_mm_or_si128(lead, c4));
    return (mask & ((1u << len) - 1)) != 0;
#else
    (void)s;
    (void)len;
    return 1;
#endif
}

int mtok_byte_joins(const MtokIndex *x, uint64_t *bits) {
    uint8_t *raw = malloc(x->max_len + 1);
    if (!raw)
        return -1;
    size_t pos = 0;
    for (uint32_t k = 0; k < x->count; k++) {
        MtokRecord r = mtok_record_next(x, &pos);
        const uint8_t *s = r.token;
        size_t len = r.len, i = 0, n = 0;
        /* 17 bytes read from the record's (its id and the next records follow it) */
        if (len < 16 && (size_t)(s - x->vocab) + 17 <= x->vocab_len && !gpt2_high16(s, len))
            continue;
        /* the record's GPT-2 characters back to bytes, each one or two bytes of UTF-8 (a record
         * is valid UTF-8, checked at load), inline: a record of other characters is no merge's
         * result nor any byte's token, never a symbol of a piece; one of bytes below 0x80 only
         * holds nothing bpe_byte_joins_add looks at */
        unsigned high = 0;
        while (i < len) {
            uint32_t c = s[i];
            if (c >= 0x80) {
                if (c < 0xC2 || c > 0xC5 || i + 1 == len || (s[i + 1] & 0xC0) != 0x80)
                    break;
                c = (c & 0x1F) << 6 | (s[i + 1] & 0x3F);
                i += 2;
            } else {
                i++;
            }
            /* two bytes spell up to U+07FF: a character past GPT-2's last is none of its */
            int b = c < GPT2_CHARS ? gpt2_raw[c] : -1;
            if (b < 0)
                break;
            raw[n++] = (uint8_t)b;
            high |= (unsigned)b;
        }
        if (i == len && high >= 0x80)
            bpe_byte_joins_add(bits, raw, n);
    }
    free(raw);
    return 0;
}

/* A char-level BPE's per-character tables from the records (bpe_chars_add); returns whether
 * some token has U+2581 right after another character. */
static int char_tables(const MtokIndex *x, BPE *m) {
    int metaspace_inside = 0;
    size_t pos = 0;
    for (uint32_t k = 0; k < x->count; k++) {
        MtokRecord r = mtok_record_next(x, &pos);
        metaspace_inside |= bpe_chars_add(m, r.token, r.len, (int32_t)r.id);
    }
    return metaspace_inside;
}

static Tables *ready_tables(PyObject *tables) {
    Tables *t = (Tables *)tables;
    if (!t->built) {
        PyErr_SetString(PyExc_ValueError, "MtokTables.build() must run before encoding");
        return NULL;
    }
    return t;
}

const MtokIndex *mtok_index(PyObject *tables) {
    if (!mtok_tables_check(tables)) {
        PyErr_SetString(PyExc_TypeError, "records must be MtokTables");
        return NULL;
    }
    Tables *t = ready_tables(tables);
    return t ? &t->x : NULL;
}

int mtok_build_bpe(BPE *m, PyObject *tables, int32_t *max_id) {
    Tables *t = ready_tables(tables);
    if (!t)
        return -1;
    const MtokIndex *x = &t->x;
    if (t->kind != KIND_BPE) {
        PyErr_SetString(PyExc_ValueError, "BPE needs BPE tables");
        return -1;
    }
    m->mtok = x;
    if (x->max_id > *max_id)
        *max_id = x->max_id;
    if (!gpt2_len[0])
        init_gpt2();
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        m->fallback[b] = mtok_token_id(x, (const uint8_t *)name, 6);
        m->byte_unit[b] = m->byte_level ? mtok_token_id(x, gpt2_utf8[b], gpt2_len[b]) : -1;
    }
    if (m->byte_level) {
        /* due never 0, which bpe_byte_joins_init takes for a filter the caller fills */
        if (bpe_byte_joins_init(m, (size_t)x->count / 16 + 1) < 0) {
            PyErr_NoMemory();
            return -1;
        }
        return 0;
    }
    if (bpe_chars_init(m) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    int metaspace_inside = char_tables(x, m);
    m->split_metaspace = !m->ignore_merges && !metaspace_inside && m->bmp[0x2581] >= 0;
    return 0;
}

/* The vocabulary record at offset pos put in a WordPiece's maps: 0, or -1 out of memory */
static int wordpiece_record(WordPiece *m, const MtokIndex *x, size_t pos, const uint8_t *prefix, size_t plen) {
    MtokRecord r = mtok_record_next(x, &pos);
    return wordpiece_put(m, r.token, r.len, (int32_t)r.id, prefix, plen) < 0 ? -1 : 0;
}

int mtok_build_wordpiece(WordPiece *m, PyObject *tables, PyObject *prefix, int32_t *max_id) {
    Tables *t = ready_tables(tables);
    Py_ssize_t plen;
    const char *p = t ? PyUnicode_AsUTF8AndSize(prefix, &plen) : NULL;
    if (!p)
        return -1;
    const MtokIndex *x = &t->x;
    if (x->max_id > *max_id)
        *max_id = x->max_id;
    if (strmap_init(&m->vocab, x->count) < 0 || strmap_init(&m->cont, x->count) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    /* in id order, as a tokenizer.json's vocabulary comes (the file's is by bytes): a WordPiece
     * vocabulary's ids follow its words' frequency, so that the common words' keys lie together
     * in the maps' pools and take their home slots (put in by bytes, English encoded 10% slower).
     * The dense ids' records, then the others' (ascending in sparse). */
    size_t put = 0;
    int err = 0;
    for (size_t id = 0; !err && id < x->nby_id; id++)
        if (x->by_id[id]) {
            err = wordpiece_record(m, x, x->by_id[id] - 1, (const uint8_t *)p, (size_t)plen);
            put++;
        }
    for (size_t k = 0; !err && put + k < x->count; k++)
        err = wordpiece_record(m, x, (uint32_t)x->sparse[k], (const uint8_t *)p, (size_t)plen);
    if (err)
        PyErr_NoMemory();
    return err;
}
