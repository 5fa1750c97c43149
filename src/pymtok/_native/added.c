/* Added tokens: HF's leftmost-longest matching of the added vocabulary, before normalization
 * (tokens flagged normalized: false) and inside each normalized segment (the others).
 *
 * The cuts reproduce pymtok.added_tokens.AddedVocabulary._find step by step, single_word,
 * lstrip and rstrip included.
 */
#include "native.h"

int added_trie_init(AddedTrie *t, size_t total_chars) {
    memset(t, 0, sizeof *t);
    t->ids = malloc(sizeof *t->ids);
    t->strip = malloc(1);
    if (!t->ids || !t->strip || pairmap_init(&t->edges, total_chars) < 0)
        return -1;
    t->ids[0] = -1;
    t->strip[0] = 0;
    t->nnodes = 1;
    return 0;
}

/* Later inserts of the same content win, as in the dict the pure path builds. */
int added_trie_insert(AddedTrie *t, const uint32_t *s, size_t n, int32_t id, int strip) {
    uint32_t node = 0;
    for (size_t k = 0; k < n; k++) {
        const PairSlot *e = pairmap_get(&t->edges, node, s[k]);
        if (e) {
            node = (uint32_t)e->id;
            continue;
        }
        int32_t *ids = realloc(t->ids, (t->nnodes + 1) * sizeof *ids);
        if (ids)
            t->ids = ids;
        uint8_t *st = realloc(t->strip, t->nnodes + 1);
        if (st)
            t->strip = st;
        if (!ids || !st)
            return -1;
        t->ids[t->nnodes] = -1;
        t->strip[t->nnodes] = 0;
        pairmap_put(&t->edges, node, s[k], 0, (int32_t)t->nnodes);
        if (node == 0 && s[k] < 0x10000)
            t->first[s[k] >> 3] |= (uint8_t)(1u << (s[k] & 7));
        if (node == 0)
            t->nfirsts = t->nfirsts < ADDED_FEW_FIRSTS ? t->nfirsts + 1 : SIZE_MAX;
        if (node == 0 && t->nfirsts <= ADDED_FEW_FIRSTS)
            t->firsts[t->nfirsts - 1] = s[k];
        node = (uint32_t)t->nnodes++;
    }
    t->ids[node] = id;
    t->strip[node] = (uint8_t)strip;
    t->ntokens++;
    return 0;
}

void added_trie_free(AddedTrie *t) {
    pairmap_free(&t->edges);
    free(t->ids);
    free(t->strip);
    memset(t, 0, sizeof *t);
}

static int cuts_push(AddedCuts *c, size_t start, size_t stop, int32_t id) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64;
        AddedCut *v = realloc(c->v, cap * sizeof *v);
        if (!v)
            return -1;
        c->v = v;
        c->cap = cap;
    }
    c->v[c->n++] = (AddedCut){start, stop, id};
    return 0;
}

#define SKIP_BLOCK 16

/* From i, the first of the few characters tokens start with (t->firsts), or the start of the
 * block of SKIP_BLOCK characters holding it, else of the shorter block at the end, which the
 * caller scans: a block to a few comparisons, where the bitmap is a lookup a character. */
static size_t skip_blocks(const AddedTrie *t, const uint32_t *s, size_t n, size_t i) {
#ifdef __SSE2__
    /* a first character under U+00FF (most are ASCII: '<' of most tokens) is compared with the
     * block's 16 characters at once, as ascii16's bytes (U+00FF and above are all 0xFF there),
     * the others with four at a time where the block has a character they might be; the
     * block's mask of them gives the first */
    __m128i narrow[ADDED_FEW_FIRSTS], wide[ADDED_FEW_FIRSTS];
    size_t nn = 0, nw = 0;
    for (size_t k = 0; k < t->nfirsts; k++) {
        if (t->firsts[k] < 0xFF)
            narrow[nn++] = _mm_set1_epi8((char)t->firsts[k]);
        else
            wide[nw++] = _mm_set1_epi32((int)t->firsts[k]);
    }
    for (; i + SKIP_BLOCK <= n; i += SKIP_BLOCK) {
        __m128i bytes = ascii16(s + i), any = _mm_setzero_si128();
        for (size_t k = 0; k < nn; k++)
            any = _mm_or_si128(any, _mm_cmpeq_epi8(bytes, narrow[k]));
        unsigned mask = (unsigned)_mm_movemask_epi8(any);
        /* a block of no character from U+00FF up (English, code) holds none of the others */
        int others = nw && _mm_movemask_epi8(_mm_cmpeq_epi8(bytes, _mm_set1_epi8((char)0xFF)));
        for (size_t j = 0; others && j < SKIP_BLOCK; j += 4) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i + j)), eq = _mm_setzero_si128();
            for (size_t k = 0; k < nw; k++)
                eq = _mm_or_si128(eq, _mm_cmpeq_epi32(v, wide[k]));
            mask |= (unsigned)_mm_movemask_ps(_mm_castsi128_ps(eq)) << j;
        }
        if (mask)
            return i + (size_t)__builtin_ctz(mask);
    }
    return i;
#else
    u32x4 f[ADDED_FEW_FIRSTS];
    size_t nf = t->nfirsts;
    for (size_t k = 0; k < nf; k++)
        f[k] = u32x4_of(t->firsts[k]);
    for (; i + SKIP_BLOCK <= n; i += SKIP_BLOCK) {
        u32x4 any = u32x4_of(0);
        for (size_t j = 0; j < SKIP_BLOCK; j += 4) {
            u32x4 v;
            memcpy(&v, s + i + j, sizeof v);
            any |= (u32x4)(v == f[0]);
            for (size_t k = 1; k < nf; k++)
                any |= (u32x4)(v == f[k]);
        }
        if (any[0] | any[1] | any[2] | any[3])
            return i;
    }
    return i;
#endif
}

int added_split(const AddedTrie *t, const uint32_t *s, size_t n, AddedCuts *out) {
    out->n = 0;
    size_t done = 0, pos = 0;
    int few = t->nfirsts && t->nfirsts <= ADDED_FEW_FIRSTS;
    while (t->ntokens && pos < n) {
        /* the leftmost start with a match, and its longest match */
        size_t start = pos, stop = 0, scanned = pos;
        uint32_t best = 0;
        for (; start < n; start++) {
            if (few && start >= scanned) {
                start = skip_blocks(t, s, n, start);
                scanned = start + SKIP_BLOCK;
                if (start == n)
                    break;
            }
            uint32_t c = s[start], node = 0;
            if (c < 0x10000 && !(t->first[c >> 3] & (1u << (c & 7))))
                continue;
            for (size_t j = start; j < n; j++) {
                const PairSlot *e = pairmap_get(&t->edges, node, s[j]);
                if (!e)
                    break;
                node = (uint32_t)e->id;
                if (t->ids[node] >= 0) {
                    best = node;
                    stop = j + 1;
                }
            }
            if (stop)
                break;
        }
        if (!stop)
            break;
        pos = stop; /* the next search starts at this match's end, before any rstrip */
        /* a single_word token with a word character beside it is no match, and the search goes
         * on after it, as HF's find_iter does past a match it then drops */
        if ((t->strip[best] & ADDED_SINGLE_WORD) &&
            ((start > 0 && rust_word(s[start - 1])) || (stop < n && rust_word(s[stop]))))
            continue;
        if (t->strip[best] & ADDED_LSTRIP) {
            size_t ws = start;
            while (ws > 0 && rust_white_space(s[ws - 1]))
                ws--;
            start = ws > done ? ws : done; /* spaces taken by the previous rstrip stay there */
        }
        if (t->strip[best] & ADDED_RSTRIP)
            while (stop < n && rust_white_space(s[stop]))
                stop++;
        if (done < start && cuts_push(out, done, start, -1) < 0)
            return -1;
        if (cuts_push(out, start, stop, t->ids[best]) < 0)
            return -1;
        done = stop;
    }
    if (done < n && cuts_push(out, done, n, -1) < 0)
        return -1;
    return 0;
}
