/* Shared declarations of pymtok's native core.
 *
 * The core encodes one normalized text segment (what Tokenizer._encode_segment receives) to
 * token ids without returning to Python: pre-tokenization scan, then the model on each piece.
 * Everything here is plain C11 without Python objects so that the work runs with the GIL
 * released; module.c is the only file that talks to the interpreter.
 */
#ifndef PYMTOK_NATIVE_H
#define PYMTOK_NATIVE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- growable id list ------------------------------------------------------------------- */

typedef struct {
    int32_t *v;
    size_t n, cap;
} IdBuf;

int ids_grow(IdBuf *b, size_t extra);
/* Room for n code points in *v (of *cap), grown by doubling from 256; -1 when out of memory. */
int cps_room(uint32_t **v, size_t *cap, size_t n);

static inline int ids_push(IdBuf *b, int32_t id) {
    if (b->n == b->cap && ids_grow(b, 1) < 0)
        return -1;
    b->v[b->n++] = id;
    return 0;
}

static inline int ids_extend(IdBuf *b, const int32_t *ids, size_t n) {
    if (!n)
        return 0; /* ids may be NULL then (an empty buffer, no affixes), which memcpy does not allow */
    if (b->cap - b->n < n && ids_grow(b, n) < 0)
        return -1;
    memcpy(b->v + b->n, ids, n * sizeof *ids);
    b->n += n;
    return 0;
}

/* Four code points to an instruction (GCC and Clang vector extensions: SSE2, NEON) */
typedef uint32_t u32x4 __attribute__((vector_size(16)));

static inline u32x4 u32x4_of(uint32_t c) { return (u32x4){c, c, c, c}; }

/* How many of s[0..n)'s first characters are ASCII, counted 16 at a time: a multiple of 16 at
 * most the true count, which the caller's own loop finishes. */
static inline size_t ascii_blocks(const uint32_t *s, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        u32x4 any = u32x4_of(0);
        for (size_t j = 0; j < 16; j += 4) {
            u32x4 v;
            memcpy(&v, s + i + j, sizeof v);
            any |= v;
        }
        if ((any[0] | any[1] | any[2] | any[3]) >= 0x80)
            break;
    }
    return i;
}

#ifdef __SSE2__
#include <emmintrin.h>

/* 16 code points as bytes: saturating packs keep ASCII and turn every other code point into a
 * byte of 0x80 or more */
static inline __m128i ascii16(const uint32_t *s) {
    const __m128i *p = (const __m128i *)(const void *)s;
    __m128i lo = _mm_packs_epi32(_mm_loadu_si128(p), _mm_loadu_si128(p + 1));
    __m128i hi = _mm_packs_epi32(_mm_loadu_si128(p + 2), _mm_loadu_si128(p + 3));
    return _mm_packus_epi16(lo, hi);
}
#endif

/* An ASCII letter or digit */
static inline int is_ascii_alnum(uint32_t c) { return (c | 0x20) - 'a' < 26 || c - '0' < 10; }

/* ---- hashing ---------------------------------------------------------------------------- */

/* A fast non-cryptographic hash of a byte string (word-at-a-time multiply/xorshift mixing).
 * Token strings are short, so per-word mixing beats byte-wise FNV by a wide margin. */
static inline uint64_t hash_start(size_t n) { return 0x9E3779B97F4A7C15ull ^ ((uint64_t)n * 0xFF51AFD7ED558CCDull); }

static inline uint64_t hash_step(uint64_t h, uint64_t w) {
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
    return h ^ h >> 31;
}

/* w: the last n % 8 bytes as one little-endian word */
static inline uint64_t hash_finish(uint64_t h, uint64_t w) {
    h = (h ^ w) * 0x94D049BB133111EBull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return h;
}

static inline uint64_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = hash_start(n);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = hash_step(h, w);
        p += 8;
        n -= 8;
    }
    /* the last n < 8 bytes as one little-endian word, without a variable-length copy: two
     * overlapping loads put each shared byte in the same place twice */
    uint64_t w = 0;
    if (n >= 4) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + n - 4, 4);
        w = lo | (uint64_t)hi << (8 * (n - 4));
    } else if (n) {
        w = p[0] | (uint64_t)p[n / 2] << (8 * (n / 2)) | (uint64_t)p[n - 1] << (8 * (n - 1));
    }
    return hash_finish(h, w);
}

/* A Scratch's bytes (scratch_bytes) and the cache's arena (cache_init) may be read KEY_PAD bytes
 * past any key they hold: a key shorter than that is then hashed and compared as two words,
 * without the branches on its length that mispredict from one piece to the next. */
#define KEY_PAD 16

static inline uint64_t low_bytes_mask(size_t n) { return n >= 8 ? ~0ull : (1ull << (8 * n)) - 1; }

/* hash_bytes(p, n) for a p readable KEY_PAD bytes on */
static inline uint64_t hash_padded(const uint8_t *p, size_t n) {
    if (n >= KEY_PAD)
        return hash_bytes(p, n);
    uint64_t w0, w1;
    memcpy(&w0, p, 8);
    memcpy(&w1, p + 8, 8);
    uint64_t h = hash_start(n), one = hash_step(h, w0);
    int two = n >= 8;
    return hash_finish(two ? one : h, (two ? w1 : w0) & low_bytes_mask(n & 7));
}

/* a[0..n) == b[0..n) for a and b readable KEY_PAD bytes on */
static inline int key_eq_padded(const uint8_t *a, const uint8_t *b, size_t n) {
    if (n > KEY_PAD)
        return memcmp(a, b, n) == 0;
    uint64_t a0, a1, b0, b1;
    memcpy(&a0, a, 8);
    memcpy(&a1, a + 8, 8);
    memcpy(&b0, b, 8);
    memcpy(&b1, b + 8, 8);
    uint64_t m1 = n <= 8 ? 0 : low_bytes_mask(n - 8);
    return !(((a0 ^ b0) & low_bytes_mask(n)) | ((a1 ^ b1) & m1));
}

/* Start fetching p's cache line. A function of nothing but reads and prefetches GCC takes for
 * pure, and drops its calls (their result, none, goes unused): the empty asm is a side effect. */
static inline void fetch_line(const void *p) {
    __builtin_prefetch(p);
    __asm__ __volatile__("" : : "r"(p));
}

/* ---- byte string -> id ------------------------------------------------------------------ */

/* Open addressing with the entry inline in its slot: a lookup touches the slot and, on a hash
 * match, the key bytes; nothing else. Vocabularies are far larger than the L2 cache, so each
 * dependent memory access counts. */
typedef struct {
    uint32_t hash;     /* low bits of the key's hash */
    int32_t id;        /* -1 marks an empty slot */
    uint32_t off, len; /* key bytes in pool */
} StrSlot;

typedef struct {
    StrSlot *slots;
    size_t mask;
    size_t n, max_n;
    uint8_t *pool;
    size_t pool_n, pool_cap;
    size_t max_len;    /* longest key in bytes: bounds greedy searches */
} StrMap;

int strmap_init(StrMap *m, size_t expected);
int strmap_put(StrMap *m, const uint8_t *key, size_t len, int32_t id); /* last put wins */
void strmap_free(StrMap *m);

static inline int bytes_eq(const uint8_t *a, const uint8_t *b, size_t n) {
    while (n >= 8) {
        uint64_t x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (x != y)
            return 0;
        a += 8;
        b += 8;
        n -= 8;
    }
    while (n--)
        if (*a++ != *b++)
            return 0;
    return 1;
}

static inline int32_t strmap_get_h(const StrMap *m, const uint8_t *key, size_t len, uint64_t h) {
    size_t i = (size_t)(h >> 32) & m->mask;
    for (;;) {
        const StrSlot *s = &m->slots[i];
        if (s->id < 0)
            return -1;
        if (s->hash == (uint32_t)h && s->len == len && bytes_eq(m->pool + s->off, key, len))
            return s->id;
        i = (i + 1) & m->mask;
    }
}

static inline void strmap_prefetch(const StrMap *m, uint64_t h) {
    fetch_line(&m->slots[(size_t)(h >> 32) & m->mask]);
}

/* The key bytes of the entry in h's home slot, where its hash matches: a lookup's second miss */
static inline void strmap_prefetch_key(const StrMap *m, uint64_t h) {
    const StrSlot *s = &m->slots[(size_t)(h >> 32) & m->mask];
    if (s->id >= 0 && s->hash == (uint32_t)h)
        fetch_line(m->pool + s->off);
}

static inline int32_t strmap_get(const StrMap *m, const uint8_t *key, size_t len) {
    return strmap_get_h(m, key, len, hash_bytes(key, len));
}

/* ---- (left id, right id) -> (rank, merged id) --------------------------------------------- */

typedef struct {
    uint64_t key; /* left << 32 | right; PAIR_EMPTY marks an empty slot */
    uint32_t rank;
    int32_t id;
} PairSlot;

#define PAIR_EMPTY UINT64_MAX

typedef struct {
    PairSlot *slots;
    size_t mask;
} PairMap;

int pairmap_init(PairMap *m, size_t expected);
void pairmap_put(PairMap *m, uint32_t left, uint32_t right, uint32_t rank, int32_t id);
void pairmap_free(PairMap *m);

static inline size_t pairmap_slot(const PairMap *m, uint64_t key) {
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & m->mask;
}

static inline const PairSlot *pairmap_get(const PairMap *m, uint32_t left, uint32_t right) {
    uint64_t key = (uint64_t)left << 32 | right;
    size_t i = pairmap_slot(m, key);
    for (;;) {
        const PairSlot *s = &m->slots[i];
        if (s->key == key)
            return s;
        if (s->key == PAIR_EMPTY)
            return NULL;
        i = (i + 1) & m->mask;
    }
}

/* ---- piece -> ids cache, shared by threads without locks ---------------------------------- */

/* Entries live in one arena, allocated by bumping an offset, and are immutable once published
 * with a compare-and-swap into an empty slot; readers load slots with acquire ordering. A full
 * cache (too many entries for short probes, or its arena used up) is emptied at once, when the
 * last encoder using it leaves (cache_leave): never while another thread reads it, so no
 * reader can meet freed memory, and text that keeps changing keeps being cached. Memory stays
 * bounded by the slot table and the arena, whatever the stream. */
typedef struct {
    uint64_t hash;
    uint32_t len, nids;
    uint8_t data[];    /* ids (int32), then key bytes */
} CacheEntry;

static inline const int32_t *cache_ids(const CacheEntry *e) { return (const int32_t *)(const void *)e->data; }

/* An entry's data (ids, then key) is at least this many bytes (entry_bytes): the ids of a piece
 * of up to four tokens, most pieces one or two, are copied as one block, without a loop whose
 * length mispredicts from one piece to the next. */
#define CACHE_DATA_MIN 16

/* An entry's ids onto out */
static inline int cache_ids_extend(IdBuf *out, const CacheEntry *e) {
    size_t n = e->nids, room = n > 4 ? n : 4;
    if (out->cap - out->n < room && ids_grow(out, room) < 0)
        return -1;
    if (n <= 4)
        memcpy(out->v + out->n, cache_ids(e), CACHE_DATA_MIN);
    else
        memcpy(out->v + out->n, cache_ids(e), n * sizeof(int32_t));
    out->n += n;
    return 0;
}

typedef struct {
    _Atomic uint32_t *slots; /* entry offset in the arena + 1; 0 is an empty slot */
    size_t mask;             /* of the slots in use, the first of the slots_cap mapped */
    size_t slots_cap;
    uint8_t *arena;
    size_t arena_bytes;
    atomic_size_t used;      /* arena bytes handed out */
    atomic_size_t count;     /* entries published */
    size_t max_entries;
    atomic_int full;         /* a put found no room: empty the cache at the next chance */
    atomic_int grow;         /* a put asked for more slots: none enter until they are doubled */
    atomic_uint users;       /* encoders inside (cache_enter), CACHE_RESETTING while one empties or doubles */
    atomic_size_t resets;    /* how often it was emptied (Encoder.cache_stats) */
    /* each entry's token spans (cache_spans_get), or NULL: beside the arena, an entry's at its own
     * offset, a mark of the emptying they were made after where the entry's hash is */
    _Atomic uint32_t *side;
} Cache;

#define CACHE_MAX_PIECE 256 /* bytes; longer pieces are rare and would bloat the cache */
#define CACHE_PROBES 8
#define CACHE_RESETTING (1u << 31)

/* n zeroed bytes in pages of their own, untouched until written, given back by pages_free: a
 * table that fills as it is used (a cache, one cell an id) then costs nothing before. Large
 * callocs are such mappings only until the process frees a block as large, after which malloc
 * takes them from the heap: calloc then zeroes them page by page, and freeing them trims the
 * heap top, and with it the file read next (GPT-4o's 5.6 MB were faulted in anew every load). */
void *pages_alloc(size_t n);
void pages_free(void *p, size_t n);

/* The slots in use start few and double as entries come, while no other thread reads them: a
 * text's pieces then probe a table of about their number, which stays in the nearer caches
 * where the whole table (1 MB) missed them on every piece (2-10% of warm English, up to 6% of
 * mixed text, in-process A/B), and a fresh process touches a few pages of it, not one a piece. */
#define CACHE_FIRST_SLOTS 4096u

int cache_init(Cache *c, size_t slots, size_t arena_bytes);
/* An encoder's use of the cache: the cache to read and fill, or NULL while another thread
 * empties it or doubles its slots (the encoder then runs without it); cache_leave with what
 * cache_enter returned. */
Cache *cache_enter(Cache *c);
void cache_leave(Cache *c, Cache *entered);
/* Both take the NULL of a cache in use elsewhere: a miss, and nothing stored. */
const CacheEntry *cache_get(const Cache *c, const uint8_t *key, size_t len, uint64_t h);
void cache_put(Cache *c, const uint8_t *key, size_t len, uint64_t h, const int32_t *ids, size_t n);

static inline const CacheEntry *cache_at(const Cache *c, uint32_t ref) {
    return (const CacheEntry *)(const void *)(c->arena + ref - 1);
}

/* A piece's lookups run ahead of its use: first its slot is fetched, a few pieces later the
 * entry the slot points to, so that the two dependent misses of a hit overlap other work. */
static inline void cache_prefetch_slot(const Cache *c, uint64_t h) {
    if (c)
        fetch_line(&c->slots[h & c->mask]);
}

/* Whether the cache may hold the piece of hash h: its entry is fetched where its home slot has
 * one, and a slot left empty (probes stop there) says it does not. */
static inline int cache_prefetch_entry(const Cache *c, uint64_t h) {
    if (!c)
        return 0;
    uint32_t ref = atomic_load_explicit(&c->slots[h & c->mask], memory_order_acquire);
    if (ref)
        fetch_line(cache_at(c, ref));
    return ref != 0;
}
/* Whether the cache surely lacks the piece of hash h (its home slot is empty: probes stop
 * there), and a put would store it now */
static inline int cache_lacks(const Cache *c, uint64_t h) {
    return !atomic_load_explicit(&c->slots[h & c->mask], memory_order_relaxed) &&
           !atomic_load_explicit(&c->full, memory_order_relaxed) && !atomic_load_explicit(&c->grow, memory_order_relaxed);
}
void cache_free(Cache *c);

/* The arena's companion for entries' token spans, made (untouched pages) on first call; -1
 * out of memory. Called before any encoder enters the cache with spans. */
int cache_side_init(Cache *c);
/* An entry's place in the arena's companion, in its words: the mark of the emptying its spans
 * followed where the entry's hash is, a span (start | end << 16, of the piece's characters) an
 * id where its ids are. */
static inline size_t cache_side_at(const Cache *c, const CacheEntry *e) {
    return (size_t)((const uint8_t *)e - c->arena) / sizeof(uint32_t);
}
#define CACHE_SIDE_SPANS (offsetof(CacheEntry, data) / sizeof(uint32_t))
static inline uint32_t cache_side_mark(const Cache *c) {
    return (uint32_t)atomic_load_explicit(&c->resets, memory_order_relaxed) + 1;
}
/* The spans kept beside an entry, each id's first character and end from the piece's first
 * character `first` on, into to[0..2 * e->nids): 1, or 0 where none were kept since the cache
 * was last emptied. Only inside the cache (cache_enter): it is emptied when no encoder is. */
static inline int cache_spans_get(const Cache *c, const CacheEntry *e, int32_t first, int32_t *to) {
    if (!c || !c->side)
        return 0;
    size_t at = cache_side_at(c, e);
    if (atomic_load_explicit(&c->side[at], memory_order_acquire) != cache_side_mark(c))
        return 0;
    for (size_t j = 0; j < e->nids; j++) {
        uint32_t span = atomic_load_explicit(&c->side[at + CACHE_SIDE_SPANS + j], memory_order_relaxed);
        to[2 * j] = first + (int32_t)(span & 0xFFFF);
        to[2 * j + 1] = first + (int32_t)(span >> 16);
    }
    return 1;
}
/* Keep an entry's spans, rel[0..2 * e->nids) from the piece's first character `first` on (a
 * cached piece is at most CACHE_MAX_PIECE bytes: each fits its half word); threads keeping one
 * entry's write the same values. */
void cache_spans_put(Cache *c, const CacheEntry *e, int32_t first, const int32_t *rel);

/* cache_get's probe; `padded`: the key is readable KEY_PAD bytes on (in a Scratch's bytes) */
static inline const CacheEntry *cache_probe(const Cache *c, const uint8_t *key, size_t len, uint64_t h, int padded) {
    if (!c)
        return NULL;
    size_t i = (size_t)h & c->mask;
    for (int probe = 0; probe < CACHE_PROBES; probe++) {
        uint32_t ref = atomic_load_explicit(&c->slots[i], memory_order_acquire);
        if (!ref)
            return NULL;
        const CacheEntry *e = cache_at(c, ref);
        const uint8_t *k = e->data + e->nids * sizeof(int32_t);
        if (e->hash == h && e->len == len && (padded ? key_eq_padded(k, key, len) : memcmp(k, key, len) == 0))
            return e;
        i = (i + 1) & c->mask;
    }
    return NULL;
}

static inline const CacheEntry *cache_get_padded(const Cache *c, const uint8_t *key, size_t len, uint64_t h) {
    return cache_probe(c, key, len, h, 1);
}

/* ---- pre-tokenization ------------------------------------------------------------------- */

typedef struct {
    size_t start, end; /* code point range in the current buffer */
    int64_t off;       /* offset of the first character in the caller's text (HF PreToken) */
} Span;

typedef struct {
    Span *v;
    size_t n, cap;
} Spans;

enum StepKind { ST_SPLIT, ST_BYTE_LEVEL, ST_BERT, ST_WHITESPACE_SPLIT, ST_METASPACE, ST_SCRIPTS };
/* What a split cuts at: the patterns real tokenizers ship (the first eight), the character
 * classes of HF's Punctuation, Digits, Whitespace, any other pattern the regex engine takes
 * (regex.c), and CharDelimiterSplit's character, which are splits too. A "split" step names one
 * up to SC_REGEX; SC_DELIMITER comes from a "delimiter" step. */
enum Scanner {
    SC_GPT2, SC_CL100K, SC_QWEN2, SC_O200K, SC_DS_DIGITS, SC_DS_CJK, SC_DS_MAIN, SC_CLIP,
    SC_PUNCTUATION, SC_NUMERIC, SC_WORDS, SC_REGEX, SC_DELIMITER
};
/* HF's SplitDelimiterBehavior */
enum Behavior { BH_ISOLATED, BH_REMOVED, BH_MERGED_WITH_PREVIOUS, BH_MERGED_WITH_NEXT, BH_CONTIGUOUS };
typedef struct Regex Regex;
enum Prepend { PS_ALWAYS, PS_FIRST, PS_NEVER };

typedef struct {
    int kind;
    int scanner, behavior, invert;    /* ST_SPLIT */
    uint32_t delimiter;               /* ST_SPLIT with SC_DELIMITER */
    Regex *regex;                     /* ST_SPLIT with SC_REGEX: its program, the Encoder's */
    int add_prefix_space, use_regex;  /* ST_BYTE_LEVEL */
    int to_chars;                     /* ST_BYTE_LEVEL not last: later steps see GPT-2 characters */
    uint32_t replacement;             /* ST_METASPACE */
    int prepend, split;
} Step;

/* A text being cut into pieces: the code points and the spans of the pieces. With track set,
 * a step that rebuilds the buffer keeps in `at` each character's index in the buffer it was
 * given first (at NULL: no step rebuilt it, each is its own); the caller frees at. A step that
 * rebuilds the buffer writes into spare and swaps the two, so that a call allocates nothing
 * once they have grown. */
typedef struct {
    uint32_t *buf, *spare;
    size_t len, cap, spare_cap; /* caps: the buffers' room in code points */
    Spans spans, tmp;
    int track;
    uint32_t *at;
} Pieces;

int pretokenize(const Step *steps, size_t nsteps, Pieces *p);
/* ascii_split's cut for a pre-tokenizer of these steps (a Scanner or one of these), or -1; and
 * the character a later step prepends to each of its pieces, or -1 */
enum { ASCII_BERT = SC_DELIMITER + 1, ASCII_WHITESPACE };
int ascii_scanner(const Step *steps, size_t nsteps, int64_t *prefix);
/* The pre-tokenizer of ascii_scanner's steps on ASCII text s[0..n), n at most INT32_MAX: each
 * piece's start and end, in order, into pieces (pieces->n / 2 of them); -1 out of memory. */
int ascii_split(int scanner, const uint8_t *s, size_t n, IdBuf *pieces);

/* Its class bits (unicode_data.h), for code outside pretok.c. */
uint32_t unicode_class(uint32_t c);

/* The regex engine (regex.c) for Split patterns without a hand-written scanner. */
typedef struct RegexFrame RegexFrame;
typedef struct {
    RegexFrame *v;
    size_t n, cap;
} RegexStack; /* a matcher's backtracking frames, kept by its caller between matches */

#define REGEX_NONE SIZE_MAX
#define REGEX_NOMEM (SIZE_MAX - 1)

/* NULL when the pattern (code points) is refused, with *why saying why. */
Regex *regex_compile(const uint32_t *pattern, size_t n, const char **why);
void regex_free(Regex *re);
/* The end of the match starting exactly at i, REGEX_NONE, or REGEX_NOMEM. */
size_t regex_match(const Regex *re, const uint32_t *s, size_t n, size_t i, RegexStack *st);

/* The length of a code point's UTF-8, without branches (a piece's byte count is a vector loop). */
static inline size_t utf8_width(uint32_t c) {
    return 1 + (size_t)(c >= 0x80) + (size_t)(c >= 0x800) + (size_t)(c >= 0x10000);
}

/* The length of the UTF-8 of cps[0..n). */
static inline size_t utf8_size(const uint32_t *cps, size_t n) {
    size_t nb = 0;
    for (size_t i = 0; i < n; i++)
        nb += utf8_width(cps[i]);
    return nb;
}

/* GPT-2's character for byte b (pymtok.byte_level): the printable bytes stand for themselves,
 * the others, in order, for U+0100 on. */
static inline uint32_t gpt2_char(uint8_t b) {
    if (b <= 0x20)
        return 0x100u + b;
    if (b >= 0x7F && b <= 0xA0)
        return 0x100u + 33 + (b - 0x7Fu);
    return b == 0xAD ? 0x143u : b;
}

/* The byte of GPT-2 character c (gpt2_char's inverse), or -1 when c is none's. */
static inline int gpt2_byte(uint32_t c) {
    if (c >= 0x100 && c <= 0x143)
        return c <= 0x120 ? (int)(c - 0x100) : c <= 0x142 ? (int)(0x7F + c - 0x121) : 0xAD;
    return c <= 0xFF && gpt2_char((uint8_t)c) == c ? (int)c : -1;
}

/* One code point's UTF-8 at o; returns its length. */
static inline size_t utf8_put(uint32_t c, uint8_t *o) {
    if (c < 0x80) {
        o[0] = (uint8_t)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (uint8_t)(0xC0 | c >> 6);
        o[1] = (uint8_t)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (uint8_t)(0xE0 | c >> 12);
        o[1] = (uint8_t)(0x80 | (c >> 6 & 0x3F));
        o[2] = (uint8_t)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | c >> 18);
    o[1] = (uint8_t)(0x80 | (c >> 12 & 0x3F));
    o[2] = (uint8_t)(0x80 | (c >> 6 & 0x3F));
    o[3] = (uint8_t)(0x80 | (c & 0x3F));
    return 4;
}

/* The length of the UTF-8 sequence a lead byte starts. */
static inline size_t utf8_len(uint8_t lead) {
    return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

/* The code point at s (n >= 1 bytes there) into *cp; returns its length, never past n, so bytes
 * that were not checked as UTF-8 are still read within bounds. */
static inline size_t utf8_get(const uint8_t *s, size_t n, uint32_t *cp) {
    size_t len = utf8_len(s[0]);
    if (len > n)
        len = n;
    uint32_t c = len == 1 ? s[0] : s[0] & (0x7Fu >> len);
    for (size_t i = 1; i < len; i++)
        c = c << 6 | (s[i] & 0x3Fu);
    *cp = c;
    return len;
}

size_t utf8_encode(const uint32_t *s, size_t n, uint8_t *out);

/* The length of the well-formed UTF-8 sequence at s[0, n), or 0 when it is not one; *sub gets
 * the length of its maximal subpart (what Rust's from_utf8_lossy and Python's "replace" turn
 * into one U+FFFD, at least one byte). */
static inline size_t utf8_sequence(const uint8_t *s, size_t n, size_t *sub) {
    uint8_t c = s[0], lo = 0x80, hi = 0xBF;
    size_t need;
    *sub = 1;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        need = 1;
    else if (c == 0xE0)
        need = 2, lo = 0xA0;
    else if (c == 0xED)
        need = 2, hi = 0x9F;
    else if (c >= 0xE1 && c <= 0xEF)
        need = 2;
    else if (c == 0xF0)
        need = 3, lo = 0x90;
    else if (c == 0xF4)
        need = 3, hi = 0x8F;
    else if (c >= 0xF1 && c <= 0xF3)
        need = 3;
    else
        return 0;
    size_t k = 1;
    for (; k <= need && k < n; k++) {
        uint8_t b = s[k];
        if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF))
            break;
    }
    *sub = k;
    return k == need + 1 ? k : 0;
}

/* ---- models ----------------------------------------------------------------------------- */

/* The longest end_of_word_suffix in UTF-8 bytes the native BPE takes (native.py leaves a longer
 * one to the pure path): a key of a character and the suffix fits on the stack. */
#define BPE_SUFFIX_MAX 32

#define JOIN_BITS 20 /* 128 KB: a few percent of collisions for the largest vocabularies */

static inline size_t join_bit(uint32_t a, uint32_t b) {
    return (size_t)((((uint64_t)a << 32 | b) * 0x9E3779B97F4A7C15ull) >> (64 - JOIN_BITS));
}

/* A byte-level BPE's joins filter. From a tokenizer.json it is filled as the vocabulary is read.
 * A .mtok's is built by the first thread that needs it while the others go on without it (cuts
 * only save work): building it reads every record, 1-3 ms for 130-200k tokens, so it waits until
 * `due` bytes (a sixteenth of the vocabulary's size in tokens) have been merged without it: a load
 * or a little text never pays for it. Uncut, a piece's parts are not cached apart, which costs
 * far more than those bytes' merging: due at half the vocabulary's size, the benchmark's mixed
 * documents (new text after a warm-up on the others) still ran uncut at 0.53-0.78x a
 * tokenizer.json's rate, and at a quarter Qwen3's other scripts at 0.70x; at a sixteenth,
 * 0.98-1.12x. */
enum { JOINS_UNBUILT, JOINS_BUILDING, JOINS_READY, JOINS_FAILED };
typedef struct ByteJoins {
    atomic_int state;
    atomic_size_t owed; /* bytes merged without the filter */
    size_t due;
    uint64_t *bits;
} ByteJoins;

typedef struct {
    StrMap vocab;         /* token bytes -> id; raw bytes for byte-level vocabularies */
    PairMap merges;
    int byte_level, ignore_merges, byte_fallback, fuse_unk;
    int split_metaspace;  /* see build_bpe: pieces may be cut before U+2581 losslessly */
    int32_t unk_id;       /* -1: none */
    int32_t byte_unit[256]; /* byte-level: the token of each single byte */
    int32_t fallback[256];  /* the <0xXX> tokens */
    int32_t *bmp;         /* char-level: the token of each single BMP code point */
    /* char-level: a filter of the character pairs side by side in some token, bit join_bit(a, b)
     * set for each (build_bpe); NULL when not built. No merge can join two characters whose bit
     * is clear, so pieces are cut there (models.c part_end); a collision only loses a cut. */
    uint64_t *joins;
    /* end_of_word_suffix: a piece's last unit is the token of that unit + the suffix. No
     * shortcut that takes a unit's own token (one-character pieces, parts, cuts before U+2581)
     * runs with one. */
    uint8_t suffix[BPE_SUFFIX_MAX]; /* UTF-8 */
    size_t suffix_len;              /* 0: none */
    int32_t end_unit[256];          /* byte-level: the token of each single byte + the suffix */
    /* byte-level: joins over the characters of the tokens' bytes (bpe_byte_joins_add); NULL
     * with a suffix */
    struct ByteJoins *byte_joins;
    const struct MtokIndex *mtok; /* when set, vocab and merges are a .mtok's tables (mtok_tables.h) */
    uint64_t serial;      /* this model among all made in the process: whose pairs a PairMemo holds */
} BPE;

typedef struct {
    StrMap vocab;
    StrMap cont;          /* tokens starting with the continuing-subword prefix, prefix removed */
    int32_t unk_id;
    size_t max_chars;
    /* each BMP character's token + 1 (0: none), NULL where no token is one: a piece of one
     * character, each CJK character behind BERT's pre-tokenizer and each punctuation mark, is
     * that token or the unknown one, without the hashing and the probe of its bytes */
    int32_t *bmp;
    /* the longest token's bytes among those starting with each BMP character, of the vocabulary
     * then of the continuations (NULL before the first token is put): greedy matching starts
     * there, not at the longest token of all, which in scripts the vocabulary holds few tokens
     * of was a dozen lookups bound to fail a piece */
    uint8_t *longest;
} WordPiece;

/* An edge of the Unigram trie, with the id of the piece ending where it leads: Viterbi reads
 * that id right after finding the edge, in the same cache line (a table of ids by node was a
 * second cache miss a byte). */
typedef struct {
    uint64_t key;         /* node << 8 | byte; PAIR_EMPTY when empty */
    uint32_t child;
    int32_t id;           /* the piece ending at child, or -1 */
} TrieSlot;

typedef struct {
    StrMap vocab;
    TrieSlot *trie;       /* byte trie of the pieces for Viterbi's common-prefix search */
    size_t trie_mask;
    uint32_t root[256];   /* children of the root, 0 = none */
    int32_t root_id[256]; /* the pieces of one byte, or -1 */
    uint32_t nnodes;
    size_t nedges;        /* the edges in trie */
    double *scores;
    size_t nscores;
    int32_t unk_id;
    double unk_score;
    int byte_fallback;
    int32_t fallback[256];
} Unigram;

/* One piece of a segment for bpe_spans: its code points in the segment, its UTF-8 in
 * Scratch.bytes, that key's hash, and how many ids the model gave it. */
typedef struct {
    size_t c, nc, b, nb;
    uint64_t h;
    size_t nids;
    /* wordpiece_spans and unigram_spans with spans_out: whether its spans were given (a piece of
     * one WordPiece token, or spans kept beside its cache entry), and that entry where its ids
     * came from one (NULL after a miss: the next call finds it) */
    int spanned;
    const CacheEntry *entry;
} Word;

/* A thread's memo of the merge pairs it looked up last, one model's at a time: the pairs of
 * text keep recurring (the bytes of a script's characters, common letter pairs), and the
 * memo answers them from the core's own cache instead of the model's tables, which are far
 * larger than the caches. Direct-mapped, with the whole key: a hit is always the pair's. */
typedef struct {
    uint32_t left, right; /* UINT32_MAX, UINT32_MAX: empty (ids are at most INT32_MAX) */
    uint32_t rank;
    int32_t id;           /* -1: the pair has no merge */
} PairMemo;

#define PAIR_MEMO_BITS 14

/* Per-thread scratch memory (module.c Work), reused across pieces, segments and calls. */
typedef struct {
    PairMemo *pairs;      /* 2^PAIR_MEMO_BITS entries, or NULL */
    uint64_t pairs_of;    /* the BPE.serial they belong to */
    uint8_t *bytes;
    size_t bytes_cap;
    void *work;
    size_t work_cap;
    Word *words;
    size_t words_cap;
    size_t nwords;        /* the words of the last bpe_spans call, which spans_offsets reads */
} Scratch;

int scratch_bytes(Scratch *s, size_t n);
int scratch_work(Scratch *s, size_t n);

/* BPE on each piece of a segment, the pieces cut before U+2581 with split_metaspace; they are
 * left in sc->words[0..sc->nwords), each with the count of its ids. */
int bpe_spans(const BPE *m, Cache *cache, const uint32_t *buf, const Span *spans, size_t nspans, Scratch *sc,
              IdBuf *out);
/* The ASCII characters that start s[0..n) (pretok.c) as sc->bytes, followed by a 0: their count
 * (n when s is all ASCII), -1 out of memory. */
ptrdiff_t ascii_bytes(Scratch *sc, const uint32_t *s, size_t n);
/* bpe_spans on the pieces of ASCII text buf[0..) that ascii_split gave (a start and an end each
 * in pieces[0..2 * npieces)), its bytes in sc->bytes (ascii_bytes) */
int bpe_ascii(const BPE *m, Cache *cache, const uint32_t *buf, const int32_t *pieces, size_t npieces, Scratch *sc,
              IdBuf *out);
/* WordPiece on each piece of a segment, as bpe_spans: their UTF-8 and hashes first, so that the
 * vocabulary lookups overlap; the pieces are left in sc->words[0..sc->nwords), each with the
 * count of its ids. With spans_out, two values an id are appended to it: each token's first
 * character and end in buf where they are known (the piece is `spanned`): a piece of one token
 * (most) spans itself, another's spans are those kept beside its cache entry (cache_spans_get); else
 * -1, -1. */
int wordpiece_spans(const WordPiece *m, Cache *cache, const uint32_t *buf, const Span *spans, size_t nspans,
                    Scratch *sc, IdBuf *out, IdBuf *spans_out);
/* A token of a WordPiece vocabulary, into vocab, cont when it starts with the prefix, and bmp
 * when it is one character; -1 out of memory */
int wordpiece_put(WordPiece *m, const uint8_t *key, size_t len, int32_t id, const uint8_t *prefix, size_t plen);
/* wordpiece_spans on the pieces of ASCII text that ascii_split gave, its bytes in sc->bytes
 * (ascii_bytes) */
int wordpiece_ascii(const WordPiece *m, Cache *cache, const int32_t *pieces, size_t npieces, Scratch *sc,
                    IdBuf *out, IdBuf *spans_out);
/* Unigram on each piece of a segment, as wordpiece_spans, so that the cache lookups overlap;
 * spans_out as wordpiece_spans' (those kept beside a piece's cache entry). */
int unigram_spans(const Unigram *m, Cache *cache, const uint32_t *buf, const Span *spans, size_t nspans, Scratch *sc,
                  IdBuf *out, IdBuf *spans_out);
/* unigram_spans on the pieces of ASCII text that ascii_split gave, as bpe_ascii, its n bytes in
 * sc->bytes; each piece's key the character `prefix` (-1 none, else outside ASCII) and the
 * piece. With a prefix a Word's characters c.. are the key's: c + 0 the prefix, c + i the
 * piece's character i - 1, which spans_out's spans count in as its cache entry keeps them
 * (the code points' way, where the prefix is a character of the buffer, keeps the same). */
int unigram_ascii(const Unigram *m, Cache *cache, size_t n, const int32_t *pieces, size_t npieces, int64_t prefix,
                  Scratch *sc, IdBuf *out, IdBuf *spans_out);
/* Unigram on one piece's UTF-8 b[0..nb), the model run (its ids entry holds no ranges), each
 * id's byte range of it appended to ranges (start, end pairs), as HF's Unigram::tokenize gives
 * its offsets. b may be a Scratch's bytes: the run leaves them alone. */
int unigram_piece_ranges(const Unigram *m, const uint8_t *b, size_t nb, Scratch *sc, IdBuf *out, IdBuf *ranges);
int trie_insert(Unigram *m, const uint8_t *key, size_t len, int32_t id);

void bpe_free(BPE *m);

/* A char-level BPE's per-character tables (BPE.bmp, BPE.joins), filled token by token: sizes in
 * bytes (the .mtok index stores them as they are), allocation with no token noted yet, and one
 * token's share from its UTF-8 s[0..len), which returns whether the token has U+2581 right after
 * another character (then pieces may not be cut before U+2581: see bpe_spans). */
enum { BPE_BMP_BYTES = 0x10000 * 4, BPE_JOINS_BYTES = (1u << JOIN_BITS) / 8 };
int bpe_chars_init(BPE *m);
int bpe_chars_add(BPE *m, const uint8_t *s, size_t len, int32_t id);
/* A byte-level BPE's joins (BPE.byte_joins): allocated to be built once `due` bytes were merged
 * without it, or with due 0 ready at once for the caller to fill (before any encode); released;
 * one token's share from its raw bytes t[0..n). */
int bpe_byte_joins_init(BPE *m, size_t due);
void bpe_byte_joins_free(BPE *m);
void bpe_byte_joins_add(uint64_t *bits, const uint8_t *t, size_t n);
void wordpiece_free(WordPiece *m);
void unigram_free(Unigram *m);

/* ---- normalizers (normalize.c) ------------------------------------------------------------- */

typedef struct {
    uint32_t *v;
    size_t n, cap;
} CpBuf;

enum { BERT_CLEAN = 1, BERT_CHINESE = 2, BERT_STRIP = 4, BERT_LOWER = 8 };

/* BertNormalizer with the given BERT_* flags into out (tmp is scratch). Returns -1 when out of
 * memory. With align (two buffers, else NULL), align[1] gets the input character each output
 * character comes from; -2 when that alignment is not kept (see normalize.c). */
int bert_normalize(int flags, const uint32_t *in, size_t n, CpBuf *tmp, CpBuf *out, CpBuf *align);

/* NFC into out (tmp is scratch). Returns 1 when the text stays as it is (out left empty), 0,
 * -1 when out of memory. */
int nfc_normalize(const uint32_t *in, size_t n, CpBuf *tmp, CpBuf *out);

/* The end of the extended grapheme cluster starting at s[i], as the `regex` module's \X. */
size_t grapheme_end(const uint32_t *s, size_t n, size_t i);

/* A precompiled_charsmap: the darts-clone trie units and the replacement strings. */
typedef struct {
    const uint32_t *units;
    size_t nunits;
    const uint8_t *repl;
    size_t nrepl;
    int64_t ascii[0x80]; /* each ASCII character's lookup (charsmap_init) */
    /* per BMP code point: its lookup + 2, 0 until first needed; NULL when out of memory. Threads
     * fill it in concurrently, each storing the same value. */
    _Atomic(int32_t) *memo;
} Charsmap;

/* Fill in the derived fields once units and repl are set; charsmap_free releases them. */
void charsmap_init(Charsmap *m);
void charsmap_free(Charsmap *m);

/* Precompiled into out. Returns -1 when out of memory, -2 when a replacement starts inside a
 * UTF-8 character (the pure path raises FormatError for it). */
int precompiled_normalize(const Charsmap *m, const uint32_t *in, size_t n, CpBuf *out);

/* One native normalizer step; a Sequence is a list of them. Pointers stay owned by the
 * pymtok._native.Normalizer objects the steps come from. */
enum { NORM_BERT, NORM_NFC, NORM_PRECOMPILED, NORM_REPLACE, NORM_PREPEND, NORM_NFKD, NORM_STRIP_ACCENTS,
       NORM_LOWERCASE, NORM_RUNS };

typedef struct {
    int kind;
    int flags;                /* NORM_BERT: BERT_*; NORM_RUNS: the shortest run replaced */
    const Charsmap *map;      /* NORM_PRECOMPILED */
    const uint32_t *pat, *rep; /* NORM_REPLACE: literal pattern (non-empty) -> content; NORM_PREPEND: rep;
                                * NORM_RUNS: each run of pat[0] -> rep */
    size_t npat, nrep;
} NormOp;

/* The steps in order on in[0..n); the result is in *res[0..*res_n), which points into in or
 * one of bufs. Returns -1 when out of memory, -2 when a step needs the pure path (see
 * precompiled_normalize). Runs without the GIL. */
int normalize_ops(const NormOp *ops, size_t nops, const uint32_t *in, size_t n, CpBuf bufs[3],
                  const uint32_t **res, size_t *res_n);

/* Whether a text cut before t[margin], t holding the 2 * margin + 1 characters around the cut,
 * normalizes by the steps to its parts' normalizations joined (a Prepend applied to the first
 * part only), the characters either side of the cut then t[margin - 1], t[margin] and
 * t[margin + 1]. Needs margin above the number of NFC and Precompiled steps, each of which
 * leaves the image of one character less known on each side. */
int normalize_cut(const NormOp *ops, size_t nops, uint32_t *t, size_t margin);

/* NFC with each output character's input character, as HF aligns it (normalize.c). Returns 1
 * when the text stays as it is, 0, -1 when out of memory, -2 for the pure path. */
int nfc_aligned(const uint32_t *in, size_t n, CpBuf *tmp, CpBuf *out, CpBuf *align);

/* normalize_ops for steps whose every output character HF aligns to one input character
 * (all but BertNormalizer, which has its own; NFC as nfc_aligned; Replace by one or more
 * characters), with *res_align the input character of each output character (NULL when no step
 * ran). Returns -1 when out of memory, -2 where HF's alignment is not an input character, -3 when
 * a step is none of those. Runs without the GIL. */
int normalize_aligned(const NormOp *ops, size_t nops, const uint32_t *in, size_t n, CpBuf bufs[3], CpBuf aligns[2],
                      const uint32_t **res, size_t *res_n, const uint32_t **res_align);

/* normalize_ops for steps that are Prepends and Replaces of one character by one (SentencePiece's
 * "▁"), whose alignment needs no array: output character i is input character i - *shift, the
 * *shift prepended ones (and the one after them) input character 0. -3 for other steps. */
int normalize_shifted(const NormOp *ops, size_t nops, const uint32_t *in, size_t n, CpBuf bufs[3],
                      const uint32_t **res, size_t *res_n, size_t *shift);

/* ---- added tokens (added.c) ----------------------------------------------------------------- */

enum { ADDED_LSTRIP = 1, ADDED_RSTRIP = 2, ADDED_SINGLE_WORD = 4 };
#define ADDED_FEW_FIRSTS 4

typedef struct {
    PairMap edges;   /* (node, code point) -> child node (in .id); node 0 is the root */
    int32_t *ids;    /* per node: the token ending there, or -1 */
    uint8_t *strip;  /* per node: that token's ADDED_* flags */
    size_t nnodes, ntokens;
    uint8_t first[0x10000 / 8]; /* BMP characters some token starts with: most positions skip the map */
    uint32_t firsts[ADDED_FEW_FIRSTS]; /* every token's first character, when that few: nfirsts */
    size_t nfirsts;                    /* SIZE_MAX when more */
} AddedTrie;

typedef struct {
    size_t start, stop; /* code points of the text */
    int32_t id;         /* the added token, or -1 for text between tokens */
} AddedCut;

typedef struct {
    AddedCut *v;
    size_t n, cap;
} AddedCuts;

int added_trie_init(AddedTrie *t, size_t total_chars);
int added_trie_insert(AddedTrie *t, const uint32_t *s, size_t n, int32_t id, int strip);
void added_trie_free(AddedTrie *t);
/* Cut s into added tokens and the text between them (leftmost-longest, single_word, lstrip,
 * rstrip). */
int added_split(const AddedTrie *t, const uint32_t *s, size_t n, AddedCuts *out);
/* Rust's char::is_whitespace (the White_Space property), from unicode_data.h. */
int rust_white_space(uint32_t c);
/* The Rust regex crate's \w (Unicode 16), which HF's single_word tests, from unicode_data.h. */
int rust_word(uint32_t c);
/* The regex \s of the pure pre-tokenizers and normalizers, from unicode_data.h. */
int regex_white_space(uint32_t c);

/* ---- SentencePiece's own models (sentencepiece.c) ------------------------------------------- */

enum { SP_KIND_BPE, SP_KIND_UNIGRAM };

typedef struct {
    int kind;
    StrMap ids;           /* piece -> id as the model's vocabulary answers it */
    StrMap matchable;     /* the pieces matched (Unigram) or merged (BPE) in text -> first id */
    StrMap user;          /* user-defined pieces: BPE's unmergeable symbols */
    /* Unigram: the matchable pieces' bytes as a trie, (node, byte) -> child (in .id), node 0
     * the root; a node's value is id + 1 where its bytes are a piece, else 0 */
    PairMap trie;
    int32_t *trie_value;
    uint32_t trie_root[256]; /* the root's edges, where every search starts: child, or 0 for none */
    uint8_t *types;       /* SentencePiece piece types, one per id */
    float *scores;        /* Unigram: as its lattice scores them (user-defined pieces by length) */
    size_t *user_lengths; /* distinct byte lengths of the user-defined pieces, longest first */
    size_t nuser_lengths;
    float unk_score;
    int32_t unk_id;
    int byte_fallback;
    int word_split;       /* BPE: texts may be cut before each U+2581 (sp_model_init) */
    int32_t fallback[256];
    Cache cache;          /* BPE with word_split: word -> ids */
} SpModel;

int sp_model_init(SpModel *m, int kind, const uint8_t *const *pieces, const size_t *lens, const uint8_t *types,
                  const float *scores, size_t n, int32_t unk_id, int byte_fallback);
/* The ids of a whole normalized text (UTF-8); -1 when out of memory. Runs without the GIL. */
int sp_model_encode(SpModel *m, const uint8_t *text, size_t n, IdBuf *out);
/* A normalized text given to sp_model_encode_part a part at a time: what carries from one call
 * to the next (zeroed before the first, sp_run_free after the last). */
typedef struct {
    int previous_unk;    /* the last id was an unknown piece's (a run of them is one) */
    size_t reach;        /* Unigram: the farthest a piece from the starts processed ends; BPE: the
                          * bytes searched for a cut */
    size_t done;         /* Unigram: the starts processed */
    float *best;         /* Unigram: per position of the pending text, its best path */
    int64_t *start_of;
    int32_t *node;
    size_t cap;
} SpRun;

/* The ids of text[0, n), the normalized text so far (all of it when `last`): those of the start
 * of it that what follows cannot change, appended to out, its length in *used. The caller drops
 * those bytes and gives the rest again with the next ones. -1 when out of memory. */
int sp_model_encode_part(SpModel *m, SpRun *run, const uint8_t *text, size_t n, int last, size_t *used, IdBuf *out);
void sp_run_free(SpRun *run);
void sp_model_free(SpModel *m);

/* sentencepiece's normalizer (pymtok.normalizers.SentencePiece); units and repl are a
 * precompiled_charsmap's (nunits 0: none), owned by the caller. */
typedef struct {
    const uint32_t *units;
    size_t nunits;
    const uint8_t *repl;
    size_t nrepl;
    StrMap user;          /* user-defined pieces, passed through unchanged */
    size_t *user_lengths; /* their distinct byte lengths, longest first */
    size_t nuser_lengths;
    int add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces, treat_whitespace_as_suffix;
    /* each ASCII byte's SP_PLAIN_* class: a unit of its own mapped to itself, whatever follows
     * (no charsmap key or user piece starts with it) or before an ASCII byte (its keys go on
     * with other bytes only: NFKC's letter and accent), is copied with the others of its run,
     * a space of the first kind written at once, where each would be a walk of the charsmap */
    uint8_t plain[128];
} SpNormalizer;

enum { SP_PLAIN_NO, SP_PLAIN_COPY, SP_PLAIN_SPACE, SP_PLAIN_BEFORE_ASCII };
int sp_normalizer_init(SpNormalizer *m, const uint8_t *const *user, const size_t *lens, size_t nuser);
void sp_normalizer_free(SpNormalizer *m);
/* The normalized UTF-8 of in[0..n) (valid UTF-8) into a malloc'd *out; -1 when out of memory,
 * -2 for a charsmap value outside its replacements or one that is not UTF-8 (the pure normalizer
 * raises FormatError). */
int sp_normalize(const SpNormalizer *m, const uint8_t *in, size_t n, uint8_t **out, size_t *out_n);

typedef struct {
    uint8_t *v;
    size_t n, cap;
} SpBytes;

typedef struct {
    int begun;          /* the leading whitespace is behind, the dummy prefix written */
    int previous_space;
} SpNormState;

/* sp_normalize of a text given a part at a time (st zeroed before the first): in[0, n) is the
 * text so far, `last` when it reaches the end. Appends to *out what the whole text's
 * normalization has there and sets *used to the bytes of `in` it took: the rest (a unit that
 * could reach into the next part) starts the next call's input. Errors as sp_normalize's. */
int sp_normalize_part(const SpNormalizer *m, SpNormState *st, const uint8_t *in, size_t n, int last, size_t *used,
                      SpBytes *out);
/* How much of out[0, n), normalized text so far, no text after it can change: all of it but the
 * trailing spaces the text's end strips (remove_extra_whitespaces). */
size_t sp_normalized_kept(const SpNormalizer *m, const uint8_t *out, size_t n);

/* ---- decoding (decode.c) ---------------------------------------------------------------- */

/* A list of UTF-8 byte strings: element i is buf[end[i-1], end[i]). HF's decoders each take the
 * token list and return an edited one, so the native core keeps that shape between steps. */
typedef struct {
    uint8_t *buf;
    size_t len, cap;
    size_t *end;
    size_t n, ncap;
} TokList;

enum DecKind {
    DEC_JOIN_LOSSY, /* ByteLevel after its per-token byte mapping is folded into the table */
    DEC_BYTE_LEVEL, DEC_BYTE_FALLBACK, DEC_FUSE, DEC_METASPACE, DEC_WORDPIECE, DEC_REPLACE,
    DEC_STRIP, DEC_BPE, DEC_CTC,
    DEC_SENTENCEPIECE /* a whole decoder, never in a chain: it reads the pieces' kinds by id */
};

typedef struct {
    int kind;
    uint8_t *a, *b; /* replace: pattern, content; metaspace: replacement; wordpiece: prefix;
                       bpe: suffix; ctc: pad, delimiter; strip: content */
    size_t na, nb;
    size_t start, stop; /* strip */
    int flag;           /* metaspace: drop it on the first token; wordpiece, ctc: cleanup;
                           sentencepiece: DEC_SP_STRIP | DEC_SP_REMOVE_EXTRA */
} DecStep;

enum { DEC_SP_STRIP = 1, DEC_SP_REMOVE_EXTRA = 2 };
/* DEC_CONTROL, DEC_UNK and DEC_BYTE_PIECE: the piece kinds the SentencePiece decoder treats apart */
enum { DEC_PRESENT = 1, DEC_SPECIAL = 2, DEC_CONTROL = 4, DEC_UNK = 8, DEC_BYTE_PIECE = 16 };

typedef struct {
    uint8_t *pool;   /* each id's token, after the steps folded in (decoder_fold) */
    size_t *off;     /* n + 1 offsets into pool */
    uint8_t *flags;  /* DEC_PRESENT, DEC_SPECIAL, ... */
    size_t n;        /* ids 0..n-1 */
    DecStep *steps;  /* the steps run per call */
    size_t nsteps;
    int space_join;  /* no decoder: tokens joined with spaces, as transformers does */
} Decoder;

void toklist_free(TokList *l);
/* Fold the per-token steps at the head of steps[0..nsteps) into each token of the table
 * (Replace, Strip, ByteLevel's byte mapping) and keep the rest for decoder_run. Takes
 * ownership of steps. */
int decoder_fold(Decoder *d, DecStep *steps, size_t nsteps);
/* ids to one UTF-8 string in out->buf[0, out->len): lossy only where the last step is
 * DEC_JOIN_LOSSY (the caller decodes with "replace"), valid UTF-8 otherwise. */
int decoder_run(const Decoder *d, const uint32_t *ids, size_t n, int skip_special, TokList *out, TokList *tmp);
void decoder_free(Decoder *d);

/* HF's DecodeStream: the ids since the last text that came out and the text they decode to. */
typedef struct {
    uint32_t *ids;
    size_t n, cap;
    size_t prefix_index;
    TokList prefix, text, tmp, spare;
} DecodeStreamState;

enum { STREAM_NONE = 0, STREAM_TEXT = 1, STREAM_BAD_PREFIX = 2 };
/* Take id in: STREAM_TEXT with the new text at s->text.buf[*start, s->text.len), STREAM_NONE
 * while a character is incomplete, STREAM_BAD_PREFIX when the text no longer starts with what
 * came out (HF's error; the stream keeps id), -1 out of memory. */
int decode_stream_step(const Decoder *d, DecodeStreamState *s, uint32_t id, int skip_special, size_t *start);
void decode_stream_free(DecodeStreamState *s);

/* ---- token offsets (offsets.c) -------------------------------------------------------------- */

/* Each id's length in the bytes the model works on (raw bytes for byte-level vocabularies), -1
 * where it is not known for certain; WordPiece's tokens after a word's first by cont. */
typedef struct {
    int32_t *first, *cont; /* cont: NULL but for WordPiece */
    uint8_t *first8, *cont8; /* the same up to 254 bytes, 0 where not known, 255 beyond */
    uint8_t *chars8;         /* BPE, Unigram: each id's length in characters where it is whole
                              * ones, else 0; or NULL */
    /* BPE with chars: each id's step through a piece's characters, the characters it starts
     * (at most OFF_STEP_STARTS) | OFF_STEP_BACK where its first byte continues the character
     * before it (a byte-level token of part of one, a byte-fallback token after the first);
     * 0 where not known; or NULL */
    uint8_t *steps8;
    size_t n;
    int byte_level;
    int32_t unk_whole;     /* WordPiece's unknown token, covering a whole word; -1 otherwise */
    /* BPE: every unit of a piece gives a token (its own, an unk or byte tokens), so that a
     * piece's tokens cover it to its end, HF placing each after the ones before by its length */
    int tiles;
    /* byte-level BPE: each id's string's spaces ByteLevel's trimming cuts, leading | trailing
     * << 8, OFF_EDGES_UNKNOWN where they are not known (then read in the text); or NULL */
    uint16_t *edges;
    /* with edges and chars8: each id's trimmed span within its characters, where it covers
     * whole ones and its edges are known, chars8 | start << 8 | end << 16, else 0: a trimmed
     * token placed without reading its edges; or NULL */
    uint32_t *trims;
} OffsetLengths;
#define OFF_EDGES_UNKNOWN 0xFFFFu
#define OFF_STEP_STARTS 0x7F
#define OFF_STEP_BACK 0x80
/* The lengths in characters set_offsets takes (OffsetLengths.chars) hold, for a token of part of a
 * character, the characters it starts and whether it continues one, as a code below -1 */
static inline int32_t offsets_partial(size_t starts, int back) {
    return starts > INT32_MAX / 2 - 2 ? -1 : -(int32_t)(2 + (starts << 1) + (size_t)(back != 0));
}

/* ByteLevel's offset trimming: none, or with add_prefix_space's exception for a first token */
enum { OFF_NO_TRIM = -1, OFF_TRIM = 0, OFF_TRIM_PREFIX_SPACE = 1 };

/* Fill first8, cont8 and chars8 from first, cont and chars (each id's length in characters, -1
 * where it is not whole characters, not known where first is not; or NULL), -1 when out of
 * memory; free all of them. */
int offsets_lengths_init(OffsetLengths *L, const int32_t *chars);
/* OffsetLengths.edges from a TokenMeasure's edges table of L->n ids; -1 out of memory */
int offsets_edges_init(OffsetLengths *L, const int32_t *edges);
void offsets_lengths_free(OffsetLengths *L);
int offsets_trimmed_char(uint32_t c);
void offsets_spaces(const uint32_t *s, size_t n, size_t *lead, size_t *trail);
/* One token's (start, end) characters into offs, trimmed by lead / trail characters when trim
 * asks; index is the token's in its sequence. -1 out of memory, -2 beyond int32. */
int offsets_push(IdBuf *offs, int64_t start, int64_t end, size_t lead, size_t trail, int trim, size_t index);
/* The untrimmed offsets of the tokens that cover the piece cps[0..n), from ids[0..nids) on (a
 * model's ids of this piece and the next ones), whose character i is origin + align[i] in the
 * caller's text (origin + i when align is NULL); *used gets their count. With ranges
 * (unigram_piece_ranges'), ids are exactly the piece's and token k covers the piece's bytes
 * ranges[2k] .. ranges[2k + 1], else their lengths in bytes (WordPiece's by cont after the
 * first) locate them. -1 out of memory, -2 when a length is not known or the lengths do not
 * add up to the piece (the pure path then answers). */
int piece_offsets(const OffsetLengths *L, const uint32_t *cps, size_t n, int64_t origin, const uint32_t *align,
                  const int32_t *ids, size_t nids, const int32_t *ranges, IdBuf *offs, size_t *used);
/* An id's length in bytes, 0 when not known: from the compact table, a vocabulary's tables by id
 * being far larger than the caches, and the full one beyond 254 bytes. */
static inline int32_t token_length(const OffsetLengths *L, int cont, int32_t id) {
    if (id < 0 || (size_t)id >= L->n)
        return 0;
    uint8_t v = (cont ? L->cont8 : L->first8)[id];
    return v == 255 ? (cont ? L->cont : L->first)[id] : v;
}
/* piece_offsets for all pieces of a BPE segment, bpe_spans' words[0..nwords) of buf, whose ids are
 * ids[0..nids) one piece after another, each located by lengths; buf[i] is the caller's
 * character origin + align[i] (origin + i without align). 0, -1 out of memory, -2 as
 * piece_offsets. */
int spans_offsets(const OffsetLengths *L, const uint32_t *buf, const Word *words, size_t nwords, int64_t origin,
                  const uint32_t *align, const int32_t *ids, size_t nids, int trim, IdBuf *offs);
/* The spans rel[0..2 nids) of a segment's characters, each character i the caller's origin +
 * align[i] (origin + i without align), onto offs; rel may be where they go (offs's room past
 * its end, which it then need not grow): each value is read before it is written. */
int spans_map(const int32_t *rel, size_t nids, int64_t origin, const uint32_t *align, IdBuf *offs);
/* The tokens of a piece lengths_spans places; a piece of more takes piece_offsets */
#define LENGTHS_TOKENS_MAX 32
/* A WordPiece or Unigram piece's untrimmed spans of its segment's characters into o (two an id,
 * its ids ids[0..piece->nids)) where its tokens' lengths tile it, as piece_offsets places them:
 * one token of the whole piece, Unigram's of whole characters (one of unknown length taking what
 * the others leave), WordPiece's in an ASCII piece; -2 where they do not. */
int lengths_spans(const OffsetLengths *L, const Word *piece, const int32_t *ids, int32_t *o);
/* What offsets_measure reads of a token: LENGTHS_UTF8 its bytes and characters (a UTF-8 token),
 * LENGTHS_BYTE_LEVEL its bytes and the characters they spell (-1 when they are not whole UTF-8
 * characters), both after an end_of_word_suffix `affix` is taken off its end; LENGTHS_WORDPIECE
 * its bytes and, when it starts with the continuing-subword prefix `affix`, the bytes after it.
 * The suffix is no character of the text: a token spelling it before a piece's end is measured
 * short, and its piece's lengths no longer add up (the pure path answers), never a wrong span. */
enum { LENGTHS_UTF8, LENGTHS_BYTE_LEVEL, LENGTHS_WORDPIECE };

typedef struct {
    int kind;
    const uint8_t *affix; /* in the bytes the token is given in */
    size_t naffix;
    size_t bound;        /* ids from 0 below it are measured, others left out */
    int32_t *first, *second; /* bound lengths each, zeroed before the first token */
    /* LENGTHS_BYTE_LEVEL: each id's string's leading | trailing spaces << 16 (what ByteLevel's
     * trimming cuts) + 1, as the lengths: 0 for no token, -1 for an id spelled two ways; else
     * NULL */
    int32_t *edges;
} TokenMeasure;

/* Record the lengths of the token s[0..n) of the given id (its UTF-8; raw bytes for
 * LENGTHS_BYTE_LEVEL): an id's length stays 0 until a token of it is measured, and becomes -1
 * when another token of it has a different one (which of them a piece holds is not known). */
void offsets_measure(const TokenMeasure *m, const uint8_t *s, size_t n, int64_t id);

#endif
