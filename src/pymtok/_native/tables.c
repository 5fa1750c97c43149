/* Hash tables, the lock-free piece cache and scratch buffers of the native core. */
/* mmap's MAP_ANONYMOUS, which strict C11 hides (the files that include Python.h have it) */
#define _DEFAULT_SOURCE
#include "native.h"

#ifdef __linux__
#include <sys/mman.h>
#endif

int ids_grow(IdBuf *b, size_t extra) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->n < extra)
        cap *= 2;
    int32_t *v = realloc(b->v, cap * sizeof *v);
    if (!v)
        return -1;
    b->v = v;
    b->cap = cap;
    return 0;
}

int cps_room(uint32_t **v, size_t *cap, size_t n) {
    if (*cap >= n && *v)
        return 0;
    size_t c = *cap > 256 ? *cap : 256;
    while (c < n)
        c *= 2;
    uint32_t *p = realloc(*v, c * sizeof *p);
    if (!p)
        return -1;
    *v = p;
    *cap = c;
    return 0;
}

static size_t pow2_at_least(size_t n) {
    size_t p = 16;
    while (p < n)
        p *= 2;
    return p;
}

/* Room for a hash table of n bytes, freed with free(). One of a vocabulary's or merges' size
 * (megabytes, read at random, a cache and TLB miss a lookup on new text) is in 2 MB pages where
 * the kernel has them for the asking (transparent huge pages in "madvise" mode): a lookup then
 * skips the page walk, which a virtual machine makes twice as long. On qwen3's tokenizer.json,
 * new text encodes about 9% faster. */
#define HUGE_PAGE ((size_t)2 << 20)
static void *table_alloc(size_t n) {
    if (n < HUGE_PAGE)
        return malloc(n);
    size_t whole = (n + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    void *p = aligned_alloc(HUGE_PAGE, whole);
#ifdef MADV_HUGEPAGE
    if (p)
        madvise(p, whole, MADV_HUGEPAGE);
#endif
    return p;
}

/* ---- StrMap ----------------------------------------------------------------------------- */

int strmap_init(StrMap *m, size_t expected) {
    memset(m, 0, sizeof *m);
    size_t nslots = pow2_at_least(expected * 2 + 1); /* load <= 1/2 keeps probe chains short */
    m->slots = table_alloc(nslots * sizeof *m->slots);
    m->pool_cap = expected * 8 + 16;
    m->pool = malloc(m->pool_cap);
    if (!m->slots || !m->pool) {
        strmap_free(m);
        return -1;
    }
    for (size_t i = 0; i < nslots; i++)
        m->slots[i].id = -1;
    m->mask = nslots - 1;
    m->max_n = expected;
    return 0;
}

int strmap_put(StrMap *m, const uint8_t *key, size_t len, int32_t id) {
    uint64_t h = hash_bytes(key, len);
    size_t i = (size_t)(h >> 32) & m->mask;
    for (;;) {
        StrSlot *s = &m->slots[i];
        if (s->id < 0)
            break;
        if (s->hash == (uint32_t)h && s->len == len && bytes_eq(m->pool + s->off, key, len)) {
            s->id = id;
            return 0;
        }
        i = (i + 1) & m->mask;
    }
    if (m->n == m->max_n)
        return -1; /* sized by strmap_init; callers never exceed the expected count */
    if (m->pool_cap - m->pool_n < len) {
        size_t cap = m->pool_cap * 2 + len;
        uint8_t *pool = realloc(m->pool, cap);
        if (!pool)
            return -1;
        m->pool = pool;
        m->pool_cap = cap;
    }
    memcpy(m->pool + m->pool_n, key, len);
    m->slots[i] = (StrSlot){(uint32_t)h, id, (uint32_t)m->pool_n, (uint32_t)len};
    m->pool_n += len;
    m->n++;
    if (len > m->max_len)
        m->max_len = len;
    return 0;
}

void strmap_free(StrMap *m) {
    free(m->slots);
    free(m->pool);
    memset(m, 0, sizeof *m);
}

/* ---- PairMap ---------------------------------------------------------------------------- */

int pairmap_init(PairMap *m, size_t expected) {
    size_t nslots = pow2_at_least(expected * 2 + 1);
    m->slots = table_alloc(nslots * sizeof *m->slots);
    if (!m->slots)
        return -1;
    for (size_t i = 0; i < nslots; i++)
        m->slots[i].key = PAIR_EMPTY;
    m->mask = nslots - 1;
    return 0;
}

void pairmap_put(PairMap *m, uint32_t left, uint32_t right, uint32_t rank, int32_t id) {
    uint64_t key = (uint64_t)left << 32 | right;
    size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & m->mask;
    while (m->slots[i].key != PAIR_EMPTY && m->slots[i].key != key)
        i = (i + 1) & m->mask;
    m->slots[i] = (PairSlot){key, rank, id};
}

void pairmap_free(PairMap *m) {
    free(m->slots);
    m->slots = NULL;
}

/* ---- Pages ------------------------------------------------------------------------------ */

void *pages_alloc(size_t n) {
#if defined(__linux__) && defined(MAP_ANONYMOUS)
    void *p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
#else
    return calloc(n ? n : 1, 1);
#endif
}

void pages_free(void *p, size_t n) {
    if (!p)
        return;
#if defined(__linux__) && defined(MAP_ANONYMOUS)
    munmap(p, n ? n : 1);
#else
    (void)n;
    free(p);
#endif
}

/* ---- Cache ------------------------------------------------------------------------------ */

/* Probes stay short: slots that may yet double are a quarter filled at most (the fastest of a
 * quarter, a half and three quarters; at three quarters 4% of English pieces found no slot in
 * 8 probes), the most slots three quarters. */
static size_t entries_max(size_t slots, size_t cap) { return slots < cap ? slots / 4 : slots / 4 * 3; }

int cache_init(Cache *c, size_t slots, size_t arena_bytes) {
    c->side = NULL;
    c->slots_cap = slots;
    c->mask = (slots < CACHE_FIRST_SLOTS ? slots : CACHE_FIRST_SLOTS) - 1;
    c->arena_bytes = arena_bytes;
    c->slots = pages_alloc(slots * sizeof *c->slots);
    c->arena = pages_alloc(arena_bytes + KEY_PAD);
    if (!c->slots || !c->arena) {
        cache_free(c);
        return -1;
    }
    c->max_entries = entries_max(c->mask + 1, slots);
    atomic_init(&c->used, 0);
    atomic_init(&c->count, 0);
    atomic_init(&c->full, 0);
    atomic_init(&c->grow, 0);
    atomic_init(&c->users, 0);
    atomic_init(&c->resets, 0);
    return 0;
}

static int entry_is(const CacheEntry *e, const uint8_t *key, size_t len, uint64_t h) {
    return e->hash == h && e->len == len && memcmp(e->data + e->nids * sizeof(int32_t), key, len) == 0;
}

static size_t entry_bytes(size_t nids, size_t len) {
    size_t data = nids * sizeof(int32_t) + len;
    return (sizeof(CacheEntry) + (data > CACHE_DATA_MIN ? data : CACHE_DATA_MIN) + 7) & ~(size_t)7;
}

/* Twice the slots in use, the entries put in them anew, by a thread alone in the cache. The
 * entries lie one after the other from the arena's start (no reservation failed since the last
 * emptying: that sets full, which empties instead) and every put has returned. An entry no
 * probe took, or another thread's copy of a piece, goes in at most once. */
static void cache_double(Cache *c) {
    size_t size = 2 * (c->mask + 1), count = 0, used = atomic_load_explicit(&c->used, memory_order_relaxed);
    memset((void *)c->slots, 0, size * sizeof *c->slots);
    for (size_t at = 0; at < used && at + sizeof(CacheEntry) <= c->arena_bytes;) {
        const CacheEntry *e = cache_at(c, (uint32_t)at + 1);
        const uint8_t *key = e->data + e->nids * sizeof(int32_t);
        size_t i = (size_t)e->hash & (size - 1);
        for (int probe = 0; probe < CACHE_PROBES; probe++, i = (i + 1) & (size - 1)) {
            uint32_t ref = atomic_load_explicit(&c->slots[i], memory_order_relaxed);
            if (ref && !entry_is(cache_at(c, ref), key, e->len, e->hash))
                continue;
            if (!ref) {
                atomic_store_explicit(&c->slots[i], (uint32_t)at + 1, memory_order_relaxed);
                count++;
            }
            break;
        }
        at += entry_bytes(e->nids, e->len);
    }
    c->mask = size - 1;
    c->max_entries = entries_max(size, c->slots_cap);
    atomic_store_explicit(&c->count, count, memory_order_relaxed);
}

/* What a thread inside the cache does when it finds itself alone there: the slots in use
 * doubled when a put asked for it, and a full cache emptied when the thread is leaving (a
 * thread at work may hold an entry: doubling moves none, emptying frees them all). Those
 * arriving meanwhile see CACHE_RESETTING and do without. 0 when another thread is inside. */
static int cache_tidy_alone(Cache *c, int leaving) {
    unsigned alone = 1;
    if (!atomic_compare_exchange_strong_explicit(&c->users, &alone, 1u | CACHE_RESETTING, memory_order_acquire,
                                                 memory_order_relaxed))
        return 0;
    if (!atomic_load_explicit(&c->full, memory_order_relaxed)) {
        if (atomic_load_explicit(&c->grow, memory_order_relaxed))
            cache_double(c);
        atomic_store_explicit(&c->grow, 0, memory_order_relaxed);
    } else if (leaving) {
        memset((void *)c->slots, 0, (c->mask + 1) * sizeof *c->slots);
        atomic_store_explicit(&c->used, 0, memory_order_relaxed);
        atomic_store_explicit(&c->count, 0, memory_order_relaxed);
        atomic_store_explicit(&c->full, 0, memory_order_relaxed);
        atomic_store_explicit(&c->grow, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&c->resets, 1, memory_order_relaxed);
    }
    atomic_fetch_sub_explicit(&c->users, CACHE_RESETTING, memory_order_release);
    return 1;
}

Cache *cache_enter(Cache *c) {
    unsigned before = atomic_fetch_add_explicit(&c->users, 1, memory_order_acquire);
    if (!(before & CACHE_RESETTING)) {
        /* while the slots wait to be doubled, those inside leave and none enter: the last one
         * out doubles them at the end of its segment, or the first to come in alone (a thread
         * that found no room with others inside would leave the cache without room for as long
         * as they overlap) */
        if (!atomic_load_explicit(&c->grow, memory_order_relaxed) || (!before && cache_tidy_alone(c, 0)))
            return c;
    }
    atomic_fetch_sub_explicit(&c->users, 1, memory_order_release);
    return NULL;
}

void cache_leave(Cache *c, Cache *entered) {
    if (!entered)
        return;
    /* the last one out tidies: no other thread holds an entry of the cache then */
    if (atomic_load_explicit(&c->full, memory_order_relaxed) || atomic_load_explicit(&c->grow, memory_order_relaxed))
        cache_tidy_alone(c, 1);
    atomic_fetch_sub_explicit(&c->users, 1, memory_order_release);
}

const CacheEntry *cache_get(const Cache *c, const uint8_t *key, size_t len, uint64_t h) {
    return cache_probe(c, key, len, h, 0);
}

void cache_put(Cache *c, const uint8_t *key, size_t len, uint64_t h, const int32_t *ids, size_t n) {
    if (!c)
        return;
    size_t bytes = entry_bytes(n, len);
    if (atomic_load_explicit(&c->full, memory_order_relaxed) || atomic_load_explicit(&c->grow, memory_order_relaxed))
        return;
    if (atomic_load_explicit(&c->count, memory_order_relaxed) >= c->max_entries) {
        /* as many entries as the slots in use should hold: doubled now if this thread is alone
         * in the cache, else when the others have left; at their most, the cache is full */
        atomic_store_explicit(c->mask + 1 < c->slots_cap ? &c->grow : &c->full, 1, memory_order_relaxed);
        if (!cache_tidy_alone(c, 0) || atomic_load_explicit(&c->full, memory_order_relaxed) ||
            atomic_load_explicit(&c->count, memory_order_relaxed) >= c->max_entries)
            return;
    }
    size_t at = atomic_fetch_add_explicit(&c->used, bytes, memory_order_relaxed);
    if (at > c->arena_bytes - bytes || bytes > c->arena_bytes) {
        atomic_store_explicit(&c->full, 1, memory_order_relaxed);
        return;
    }
    CacheEntry *e = (CacheEntry *)(void *)(c->arena + at);
    e->hash = h;
    e->len = (uint32_t)len;
    e->nids = (uint32_t)n;
    /* ids or key may be NULL when empty (an unused buffer), which memcpy does not allow */
    if (n)
        memcpy(e->data, ids, n * sizeof(int32_t));
    if (len)
        memcpy(e->data + n * sizeof(int32_t), key, len);
    size_t i = (size_t)h & c->mask;
    for (int probe = 0; probe < CACHE_PROBES; probe++) {
        uint32_t expected = 0;
        if (atomic_compare_exchange_strong_explicit(&c->slots[i], &expected, (uint32_t)at + 1, memory_order_release,
                                                    memory_order_acquire)) {
            atomic_fetch_add_explicit(&c->count, 1, memory_order_relaxed);
            return;
        }
        /* another thread may have just stored this very piece */
        if (entry_is(cache_at(c, expected), key, len, h))
            return;
        i = (i + 1) & c->mask;
    }
    /* the entry's bytes stay unused until the cache is emptied */
}

int cache_side_init(Cache *c) {
    if (!c->side)
        c->side = pages_alloc(c->arena_bytes);
    return c->side ? 0 : -1;
}

void cache_spans_put(Cache *c, const CacheEntry *e, int32_t first, const int32_t *rel) {
    if (!c || !c->side)
        return;
    size_t at = cache_side_at(c, e);
    for (size_t j = 0; j < e->nids; j++)
        atomic_store_explicit(&c->side[at + CACHE_SIDE_SPANS + j],
                              (uint32_t)(rel[2 * j] - first) | (uint32_t)(rel[2 * j + 1] - first) << 16,
                              memory_order_relaxed);
    atomic_store_explicit(&c->side[at], cache_side_mark(c), memory_order_release);
}

void cache_free(Cache *c) {
    pages_free((void *)c->side, c->arena_bytes);
    c->side = NULL;
    pages_free((void *)c->slots, c->slots_cap * sizeof *c->slots);
    pages_free(c->arena, c->arena_bytes + KEY_PAD);
    c->slots = NULL;
    c->arena = NULL;
}

/* ---- Scratch ---------------------------------------------------------------------------- */

int scratch_bytes(Scratch *s, size_t n) {
    n += KEY_PAD;
    if (s->bytes_cap >= n)
        return 0;
    size_t cap = s->bytes_cap ? s->bytes_cap : 1024;
    while (cap < n)
        cap *= 2;
    uint8_t *p = realloc(s->bytes, cap);
    if (!p)
        return -1;
    s->bytes = p;
    s->bytes_cap = cap;
    return 0;
}

int scratch_work(Scratch *s, size_t n) {
    if (s->work_cap >= n)
        return 0;
    size_t cap = s->work_cap ? s->work_cap : 4096;
    while (cap < n)
        cap *= 2;
    void *p = realloc(s->work, cap);
    if (!p)
        return -1;
    s->work = p;
    s->work_cap = cap;
    return 0;
}
