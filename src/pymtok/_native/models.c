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
static inline int bpe_pair(const BPE *m, uint32_t left, uint32_t right, uint32_t *rank, int32_t *id) {
    if (m->mtok)
        return mtok_pair(m->mtok, left, right, rank, id);
    const PairSlot *s = pairmap_get(&m->merges, left, right);
    if (!s)
        return 0;
    *rank = s->rank;
    *id = s->id;
    return 1;
}

static inline void push_pair(const BPE *m, HeapItem *heap, size_t *len, const int32_t *c, size_t left,
                             size_t right) {
    uint32_t rank;
    int32_t id;
    if (bpe_pair(m, (uint32_t)c[left], (uint32_t)c[right], &rank, &id))
        heap_push(heap, len, (HeapItem){(uint64_t)rank << 32 | left, id, c[left], c[right]});
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
    if (n == 2) {
        if (bpe_pair(m, (uint32_t)c[0], (uint32_t)c[1], &rank, &id)) {
            c[0] = id;
            *out_n = 1;
        }
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
    if (!m->mtok)
        for (size_t i = 0; i + 1 < n; i++)
            pairmap_prefetch(&m->merges, (uint32_t)c[i], (uint32_t)c[i + 1]);
    for (size_t i = 0; i + 1 < n; i++)
        push_pair(m, heap, &len, c, i, i + 1);
    while (len) {
        HeapItem top = heap_pop(heap, &len);
        size_t pos = (size_t)(top.key & 0xFFFFFFFFu);
        if (c[pos] < 0 || next[pos] < 0)
            continue;
        size_t right = (size_t)next[pos];
        /* HF looks the current pair up again; the queued pair itself needs no second lookup */
        if ((c[pos] != top.left || c[right] != top.right) &&
            (!bpe_pair(m, (uint32_t)c[pos], (uint32_t)c[right], &rank, &id) || id != top.id))
            continue;
        c[pos] = top.id;
        c[right] = -1;
        next[pos] = next[right];
        if (next[right] >= 0)
            prev[next[right]] = (int32_t)pos;
        if (!m->mtok) {
            /* both new pairs at once, so that their cache misses overlap */
            if (prev[pos] >= 0)
                pairmap_prefetch(&m->merges, (uint32_t)c[prev[pos]], (uint32_t)c[pos]);
            if (next[pos] >= 0)
                pairmap_prefetch(&m->merges, (uint32_t)c[pos], (uint32_t)c[next[pos]]);
        }
        if (prev[pos] >= 0)
            push_pair(m, heap, &len, c, (size_t)prev[pos], pos);
        if (next[pos] >= 0)
            push_pair(m, heap, &len, c, pos, (size_t)next[pos]);
    }
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        if (c[i] >= 0)
            c[w++] = c[i];
    *out_n = w;
    return 0;
}

/* The token of one character of a char-level vocabulary, or -1. */
static inline int32_t char_token(const BPE *m, uint32_t cp) {
    if (cp < 0x10000)
        return m->bmp[cp];
    uint8_t u[4];
    size_t k = utf8_encode(&cp, 1, u);
    return m->mtok ? mtok_token_id(m->mtok, u, k) : strmap_get(&m->vocab, u, k);
}

/* HF's BPE::merge_word initial symbols: one per character (per byte for byte-level
 * vocabularies); an unknown one becomes its <0xXX> byte tokens with byte_fallback, else the
 * unk token, consecutive unknowns fused with fuse_unk. A pending unk survives byte-fallback
 * characters, as in HF. */
static int bpe_symbols(const BPE *m, const uint32_t *cps, size_t n, const uint8_t *b, size_t nb,
                       IdBuf *out) {
    int pending = 0;
    size_t units = m->byte_level ? nb : n;
    for (size_t i = 0; i < units; i++) {
        int32_t id = m->byte_level ? m->byte_unit[b[i]] : char_token(m, cps[i]);
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

/* A piece's UTF-8 bytes (into sc->bytes) and their hash: the key of every lookup and cache. */
static int piece_utf8(Scratch *sc, const uint32_t *cps, size_t n, size_t *nb, uint64_t *h) {
    if (scratch_bytes(sc, 4 * n) < 0)
        return -1;
    *nb = utf8_encode(cps, n, sc->bytes);
    *h = hash_bytes(sc->bytes, *nb);
    return 0;
}

int bpe_piece(const BPE *m, Cache *cache, const uint32_t *cps, size_t n, Scratch *sc, IdBuf *out) {
    if (!n)
        return 0;
    size_t nb;
    uint64_t h;
    if (piece_utf8(sc, cps, n, &nb, &h) < 0)
        return -1;
    uint8_t *b = sc->bytes;
    if (m->ignore_merges) {
        int32_t id = !m->mtok          ? strmap_get_h(&m->vocab, b, nb, h)
                     : m->byte_level ? mtok_byte_level_id(m->mtok, b, nb)
                                     : mtok_token_id(m->mtok, b, nb);
        if (id >= 0)
            return ids_push(out, id);
    }
    int cacheable = nb <= CACHE_MAX_PIECE;
    if (cacheable) {
        const CacheEntry *e = cache_get(cache, b, nb, h);
        if (e)
            return ids_extend(out, e->ids, e->nids);
    }
    size_t start = out->n, merged;
    if (bpe_symbols(m, cps, n, b, nb, out) < 0 ||
        bpe_merge(m, out->v + start, out->n - start, sc, &merged) < 0)
        return -1;
    out->n = start + merged;
    if (cacheable)
        cache_put(cache, b, nb, h, out->v + start, merged);
    return 0;
}

void bpe_free(BPE *m) {
    strmap_free(&m->vocab);
    pairmap_free(&m->merges);
    free(m->bmp);
    m->bmp = NULL;
}

/* ---- WordPiece -------------------------------------------------------------------------- */

static inline size_t char_start_at_or_before(const uint8_t *b, size_t lo, size_t i) {
    while (i > lo && (b[i] & 0xC0) == 0x80)
        i--;
    return i;
}

/* Greedy longest match first; the continuation map holds tokens without their prefix. Ends
 * step back one character at a time, and start no further than the longest token allows. */
int wordpiece_piece(const WordPiece *m, Cache *cache, const uint32_t *cps, size_t n, Scratch *sc,
                    IdBuf *out) {
    if (!n)
        return 0;
    if (n > m->max_chars)
        return ids_push(out, m->unk_id);
    if (scratch_bytes(sc, 4 * n + 1) < 0)
        return -1;
    uint8_t *b = sc->bytes;
    size_t nb = utf8_encode(cps, n, b);
    b[nb] = 0; /* a lead byte: ends at nb are character starts */
    uint64_t h = hash_bytes(b, nb);
    int cacheable = nb <= CACHE_MAX_PIECE;
    if (cacheable) {
        const CacheEntry *e = cache_get(cache, b, nb, h);
        if (e)
            return ids_extend(out, e->ids, e->nids);
    }
    size_t first = out->n, start = 0;
    while (start < nb) {
        const StrMap *map = start ? &m->cont : &m->vocab;
        size_t end = nb - start > map->max_len ? start + map->max_len : nb;
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
    if (cacheable)
        cache_put(cache, b, nb, h, out->v + first, out->n - first);
    return 0;
}

void wordpiece_free(WordPiece *m) {
    strmap_free(&m->vocab);
    strmap_free(&m->cont);
}

/* ---- Unigram ---------------------------------------------------------------------------- */

static inline uint32_t trie_child(const Unigram *m, uint32_t node, uint8_t byte) {
    uint64_t key = (uint64_t)node << 8 | byte;
    size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & m->trie_mask;
    for (;;) {
        const TrieSlot *s = &m->trie[i];
        if (s->key == key)
            return s->child;
        if (s->key == PAIR_EMPTY)
            return 0;
        i = (i + 1) & m->trie_mask;
    }
}

static int trie_new_node(Unigram *m, uint32_t *node) {
    int32_t *term = realloc(m->term, (m->nnodes + 1) * sizeof *term);
    if (!term)
        return -1;
    m->term = term;
    term[m->nnodes] = -1;
    *node = (uint32_t)m->nnodes++;
    return 0;
}

/* The trie table is sized by the caller for the total key bytes (one edge per byte at most). */
int trie_insert(Unigram *m, const uint8_t *key, size_t len, int32_t id) {
    if (!len)
        return 0; /* HF's prefix search never reports the empty piece */
    uint32_t node = m->root[key[0]];
    if (!node) {
        if (trie_new_node(m, &node) < 0)
            return -1;
        m->root[key[0]] = node;
    }
    for (size_t i = 1; i < len; i++) {
        uint32_t child = trie_child(m, node, key[i]);
        if (!child) {
            if (trie_new_node(m, &child) < 0)
                return -1;
            uint64_t k = (uint64_t)node << 8 | key[i];
            size_t j = (size_t)((k * 0x9E3779B97F4A7C15ull) >> 20) & m->trie_mask;
            while (m->trie[j].key != PAIR_EMPTY)
                j = (j + 1) & m->trie_mask;
            m->trie[j] = (TrieSlot){k, child};
        }
        node = child;
    }
    m->term[node] = id; /* HF keeps the last id of a duplicated piece */
    return 0;
}

static inline size_t utf8_len(uint8_t lead) {
    return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

/* The ids of one Viterbi segment [s, e): the piece's id, else its byte tokens, else unk. */
static int unigram_emit(const Unigram *m, const uint8_t *b, size_t s, size_t e, IdBuf *out) {
    int32_t id = strmap_get(&m->vocab, b + s, e - s);
    if (id >= 0)
        return ids_push(out, id);
    if (m->byte_fallback) {
        size_t i = s;
        while (i < e && m->fallback[b[i]] >= 0)
            i++;
        if (i == e) {
            for (i = s; i < e; i++)
                if (ids_push(out, m->fallback[b[i]]) < 0)
                    return -1;
            return 0;
        }
    }
    return ids_push(out, m->unk_id);
}

/* HF's Unigram::encode_optimized over the UTF-8 bytes: best path by f64 score sums, strict
 * `>` so that the first candidate (earlier start, then shorter piece) keeps a tie; a character
 * no piece covers alone gets an unk edge; consecutive unk nodes fuse into one piece. */
int unigram_piece(const Unigram *m, Cache *cache, const uint32_t *cps, size_t n, Scratch *sc,
                  IdBuf *out) {
    if (!n)
        return 0;
    size_t nb;
    uint64_t h;
    if (piece_utf8(sc, cps, n, &nb, &h) < 0)
        return -1;
    uint8_t *b = sc->bytes;
    int cacheable = nb <= CACHE_MAX_PIECE;
    if (cacheable) {
        const CacheEntry *e = cache_get(cache, b, nb, h);
        if (e)
            return ids_extend(out, e->ids, e->nids);
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
        for (size_t k = st + 1; node; k++) {
            int32_t id = m->term[node];
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
            node = trie_child(m, node, b[k]);
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
        if (in_run && unigram_emit(m, b, run_start, s, out) < 0)
            return -1;
        in_run = 0;
        if (ids_push(out, node_id[e]) < 0)
            return -1;
    }
    if (in_run && unigram_emit(m, b, run_start, nb, out) < 0)
        return -1;
    if (cacheable)
        cache_put(cache, b, nb, h, out->v + first, out->n - first);
    return 0;
}

void unigram_free(Unigram *m) {
    strmap_free(&m->vocab);
    free(m->trie);
    free(m->term);
    free(m->scores);
    m->trie = NULL;
    m->term = NULL;
    m->scores = NULL;
}
