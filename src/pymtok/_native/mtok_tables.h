/* A .mtok model's tables, indexed where they lie in the file (FORMAT.md §3.3).
 *
 * Loading copies nothing: the vocabulary records and merge triples stay in the caller's buffer
 * (the file's bytes, which the tokenizer owns), and the index holds only what the file does not: a hash from token
 * bytes to record, id -> record, and for BPE a hash from (left, right) to the merge record with
 * each merge's result token. mtok_tables.c builds and validates it; the BPE encoder
 * (models.c) reads it directly, without the GIL.
 */
#ifndef PYMTOK_MTOK_TABLES_H
#define PYMTOK_MTOK_TABLES_H

#include "native.h"

/* The results of 64 merges of consecutive ranks where each is the one before or the next id:
 * the first one, and a bit set for each step of one. Spilled: the block's results are spill[at *
 * 64 ..] instead. */
typedef struct {
    int32_t base;
    uint32_t at;      /* UINT32_MAX: not spilled */
    uint64_t steps;   /* bit i: result i is result i - 1 + 1 */
} MtokSteps;

typedef struct MtokIndex {
    const uint8_t *vocab; /* the first vocabulary record: u16 length, bytes, u32 id (+ f64 score) */
    size_t vocab_len;
    uint32_t count;
    size_t tail;          /* bytes after a record's token: 4 (id), 12 for Unigram (id, score) */
    size_t max_len;       /* longest token in bytes */
    int32_t max_id;
    /* Slots are tagged: the low bits hold record offset + 1 (merge index + 1 in mslots), the
     * bits above them some bits of the key's hash, so that a probe only reads the record (a
     * cache miss far away) when the tags agree. Offset bits 0 is an empty slot (mtok_slot_ref). */
    uint32_t *slots;      /* token hash -> tag | record offset + 1 */
    size_t size;          /* slots */
    uint32_t off_mask;    /* the offset bits of a slot */
    uint32_t *by_id;      /* dense ids: id -> record offset + 1 */
    size_t nby_id;
    uint64_t *sparse;     /* sparse ids: id << 32 | record offset, ascending */
    const uint8_t *merges; /* BPE: merge_count × (u32 left, u32 right, u32 rank) */
    uint32_t nmerges;
    uint32_t *mslots;     /* (left, right) hash -> tag | merge index + 1 */
    size_t msize;
    uint32_t moff_mask;   /* the merge-index bits of an mslot */
    /* the token each merge makes: merged (per merge), else steps (by rank), else rank + merged_delta */
    int32_t *merged;
    MtokSteps *steps;
    int32_t *spill;
    int64_t merged_delta;
    uint32_t *rank;       /* per merge: its rank in HF's order, NULL when the file's ranks are */
} MtokIndex;

static inline uint32_t mtok_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline size_t mtok_u16(const uint8_t *p) { return (size_t)p[0] | (size_t)p[1] << 8; }

/* One vocabulary record: its token's bytes and id. */
typedef struct {
    const uint8_t *token;
    size_t len;
    uint32_t id;
} MtokRecord;

/* The record at *pos of checked records (walk_records measured them all), *pos moved past it. */
static inline MtokRecord mtok_record_next(const MtokIndex *x, size_t *pos) {
    const uint8_t *r = x->vocab + *pos;
    size_t len = mtok_u16(r);
    *pos += 2 + len + x->tail;
    return (MtokRecord){r + 2, len, mtok_u32(r + 2 + len)};
}

/* The mask of the low bits that hold values up to top: the rest of a 32-bit slot is tag. */
static inline uint32_t mtok_low_mask(uint64_t top) {
    uint32_t m = 0;
    while (m < top && m != UINT32_MAX)
        m = m << 1 | 1;
    return m;
}

/* A key's first slot in a table of size slots, from the 32 bits above its tag: a multiply, not
 * a mask, so that a table need not be a power of two (mtok_tables.c sizes them to 5/3 of their
 * keys: fewer pages to fault in and keep than the next power of two). */
static inline size_t mtok_first_slot(uint64_t h, size_t size) { return (size_t)((h >> 32) * (uint64_t)size >> 32); }

/* The slot a probe reads after slot i of a table of size slots: probes wrap. */
static inline size_t mtok_next_slot(size_t i, size_t size) { return i + 1 == size ? 0 : i + 1; }

/* A slot's offset bits: the record offset + 1 (merge index + 1), 0 for an empty slot. The one
 * definition of empty and used, shared by the lookups and the builders (mtok_tables.c): a slot
 * holding only tag bits is empty everywhere. */
static inline uint32_t mtok_slot_ref(uint32_t s, uint32_t off_mask) { return s & off_mask; }

/* The record (offset + 1) of the token key with hash h, or 0. The probe ends at an empty slot
 * and in any case after one pass over the table, and reads a record only where one would fit
 * in the vocabulary section: bounds that hold whatever the table holds. */
static inline uint32_t mtok_token_ref(const MtokIndex *x, const uint8_t *key, size_t len, uint64_t h) {
    uint32_t tag = (uint32_t)h & ~x->off_mask;
    size_t i = mtok_first_slot(h, x->size);
    for (size_t probes = 0; probes < x->size; probes++, i = mtok_next_slot(i, x->size)) {
        uint32_t s = x->slots[i], o = mtok_slot_ref(s, x->off_mask);
        if (!o)
            return 0;
        if ((s & ~x->off_mask) != tag)
            continue;
        const uint8_t *r = x->vocab + o - 1;
        if ((size_t)o - 1 + 2 + len + 4 <= x->vocab_len && mtok_u16(r) == len && bytes_eq(r + 2, key, len))
            return o;
    }
    return 0;
}

/* mtok_token_id with the key's hash_bytes already known. */
static inline int32_t mtok_token_id_h(const MtokIndex *x, const uint8_t *key, size_t len, uint64_t h) {
    uint32_t o = mtok_token_ref(x, key, len, h);
    return o ? (int32_t)mtok_u32(x->vocab + o - 1 + 2 + len) : -1;
}

/* The id of a token given by its bytes as the file holds them, or -1. */
static inline int32_t mtok_token_id(const MtokIndex *x, const uint8_t *key, size_t len) {
    return len > x->max_len ? -1 : mtok_token_id_h(x, key, len, hash_bytes(key, len));
}

/* A (left, right) pair's slot index (high bits) and tag (low 32 bits). */
static inline uint64_t mtok_pair_hash(uint32_t left, uint32_t right) {
    uint64_t key = (uint64_t)left << 32 | right;
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return (h >> 24) << 32 | (uint32_t)((key ^ (key >> 29)) * 0xBF58476D1CE4E5B9ull >> 32);
}

/* The merge of (left, right) as its index + 1, or 0; bounded as mtok_token_ref. */
static inline uint32_t mtok_pair_ref(const MtokIndex *x, uint32_t left, uint32_t right) {
    uint64_t h = mtok_pair_hash(left, right);
    uint32_t tag = (uint32_t)h & ~x->moff_mask;
    size_t i = mtok_first_slot(h, x->msize);
    for (size_t probes = 0; probes < x->msize; probes++, i = mtok_next_slot(i, x->msize)) {
        uint32_t s = x->mslots[i], k = mtok_slot_ref(s, x->moff_mask);
        if (!k)
            return 0;
        if ((s & ~x->moff_mask) != tag || k > x->nmerges)
            continue;
        const uint8_t *t = x->merges + 12 * (size_t)(k - 1);
        if (mtok_u32(t) == left && mtok_u32(t + 4) == right)
            return k;
    }
    return 0;
}

/* The token merge k (index) of the given rank makes. */
static inline int32_t mtok_merged(const MtokIndex *x, uint32_t k, uint32_t rank) {
    if (x->merged)
        return x->merged[k];
    if (!x->steps)
        return (int32_t)(rank + x->merged_delta);
    const MtokSteps *b = &x->steps[rank / 64];
    if (b->at != UINT32_MAX)
        return x->spill[(size_t)b->at * 64 + rank % 64];
    return b->base + (int32_t)__builtin_popcountll(b->steps & ((2ull << (rank % 64)) - 1));
}

/* The merge of (left, right): 1 with its rank and result, or 0 when there is none. */
static inline int mtok_pair(const MtokIndex *x, uint32_t left, uint32_t right, uint32_t *rank, int32_t *id) {
    uint32_t k = mtok_pair_ref(x, left, right);
    if (!k)
        return 0;
    *rank = x->rank ? x->rank[k - 1] : mtok_u32(x->merges + 12 * (size_t)(k - 1) + 8);
    *id = mtok_merged(x, k - 1, *rank);
    return 1;
}

/* Every record's share of a byte-level BPE's joins (bpe_byte_joins_add), from its raw bytes; -1
 * without memory. */
int mtok_byte_joins(const MtokIndex *x, uint64_t *bits);

/* The id of a byte-level vocabulary's token for raw bytes b (mapped to GPT-2 characters), or -1. */
int32_t mtok_byte_level_id(const MtokIndex *x, const uint8_t *b, size_t n);

#ifdef Py_PYTHON_H
/* The Python side (mtok_tables.c): the MtokTables type and the encoder builders taking it. */
int mtok_tables_register(PyObject *module);
int mtok_tables_check(PyObject *o);
/* The index of built tables, or NULL with an error (a TypeError for another object). */
const MtokIndex *mtok_index(PyObject *tables);
int mtok_build_bpe(BPE *m, PyObject *tables, int32_t *max_id);
int mtok_build_wordpiece(WordPiece *m, PyObject *tables, PyObject *prefix, int32_t *max_id);
#endif

#endif
