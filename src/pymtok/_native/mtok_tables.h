/* A .mtok model's tables, indexed where they lie in the file (FORMAT.md §3.3).
 *
 * Loading copies nothing: the vocabulary records and merge triples stay in the caller's buffer
 * (the memory-mapped file), and the index holds only what the file does not: a hash from token
 * bytes to record, id -> record, and for BPE a hash from (left, right) to the merge record with
 * each merge's result token. mtok_tables.c builds and validates it; the BPE encoder
 * (models.c) reads it directly, without the GIL.
 */
#ifndef PYMTOK_MTOK_TABLES_H
#define PYMTOK_MTOK_TABLES_H

#include "native.h"

typedef struct MtokIndex {
    const uint8_t *vocab; /* the first vocabulary record: u16 length, bytes, u32 id (+ f64 score) */
    size_t vocab_len;
    uint32_t count;
    size_t tail;          /* bytes after a record's token: 4 (id), 12 for Unigram (id, score) */
    size_t max_len;       /* longest token in bytes */
    int32_t max_id;
    uint32_t *slots;      /* token hash -> record offset + 1 (0: empty) */
    size_t mask;
    uint32_t *by_id;      /* dense ids: id -> record offset + 1 */
    size_t nby_id;
    uint64_t *sparse;     /* sparse ids: id << 32 | record offset, ascending */
    const uint8_t *merges; /* BPE: merge_count × (u32 left, u32 right, u32 rank) */
    uint32_t nmerges;
    uint32_t *mslots;     /* (left, right) hash -> merge index + 1 */
    size_t mmask;
    int32_t *merged;      /* per merge: the token it makes (after mtok_resolve_merges) */
    uint32_t *rank;       /* per merge: its rank in HF's order, NULL when the file's ranks are */
} MtokIndex;

static inline uint32_t mtok_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline size_t mtok_u16(const uint8_t *p) { return (size_t)p[0] | (size_t)p[1] << 8; }

/* The id of a token given by its bytes as the file holds them, or -1. */
static inline int32_t mtok_token_id(const MtokIndex *x, const uint8_t *key, size_t len) {
    if (len > x->max_len)
        return -1;
    uint64_t h = hash_bytes(key, len);
    for (size_t i = (size_t)(h >> 32) & x->mask;; i = (i + 1) & x->mask) {
        uint32_t s = x->slots[i];
        if (!s)
            return -1;
        const uint8_t *r = x->vocab + s - 1;
        if (mtok_u16(r) == len && bytes_eq(r + 2, key, len))
            return (int32_t)mtok_u32(r + 2 + len);
    }
}

static inline size_t mtok_pair_hash(uint32_t left, uint32_t right) {
    uint64_t key = (uint64_t)left << 32 | right;
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 24);
}

/* The merge of (left, right): 1 with its rank and result, or 0 when there is none. */
static inline int mtok_pair(const MtokIndex *x, uint32_t left, uint32_t right, uint32_t *rank, int32_t *id) {
    for (size_t i = mtok_pair_hash(left, right) & x->mmask;; i = (i + 1) & x->mmask) {
        uint32_t s = x->mslots[i];
        if (!s)
            return 0;
        const uint8_t *t = x->merges + 12 * (size_t)(s - 1);
        if (mtok_u32(t) == left && mtok_u32(t + 4) == right) {
            *rank = x->rank ? x->rank[s - 1] : mtok_u32(t + 8);
            *id = x->merged[s - 1];
            return 1;
        }
    }
}

/* The id of a byte-level vocabulary's token for raw bytes b (mapped to GPT-2 characters), or -1. */
int32_t mtok_byte_level_id(const MtokIndex *x, const uint8_t *b, size_t n);

#ifdef Py_PYTHON_H
/* The Python side (mtok_tables.c): the MtokTables type and the encoder builders taking it. */
int mtok_tables_register(PyObject *module);
int mtok_tables_check(PyObject *o);
int mtok_build_bpe(BPE *m, PyObject *tables, int32_t *max_id);
int mtok_build_wordpiece(WordPiece *m, PyObject *tables, PyObject *prefix, int32_t *max_id);
#endif

#endif
