/* The sentencepiece library's own models, as pymtok.models.SentencePieceBPE and
 * SentencePieceUnigram describe them (bpe_model.cc, unigram_model.cc): pieces with SentencePiece
 * types and float32 scores, on a whole normalized text (no pre-tokenizer). UTF-8 throughout. */
#include "native.h"

#include <float.h>

/* the word cache, as the Encoder's piece cache */
#define SP_CACHE_SLOTS (1u << 16)
#define SP_CACHE_BYTES ((size_t)4 << 20)

static const uint8_t SP_SPACE[3] = {0xE2, 0x96, 0x81}; /* U+2581, the escaped space */

enum { SP_NORMAL = 1, SP_UNKNOWN = 2, SP_USER_DEFINED = 4, SP_UNUSED = 5 };

/* unigram_model.cc's kScoreResetThreshold: once the best path to a start is this far from 0,
 * the library takes the sums from there on relative to it (float32 sums lose the precision its
 * ties are decided in) */
#define SP_SCORE_RESET 100000.0f

/* bpe_model.cc's kMaxBpeResegmentDepth */
#define SP_MAX_RESEGMENT_DEPTH 100

/* setdefault: the first id of a piece spelled twice wins, as in the library's maps */
static int put_first(StrMap *m, const uint8_t *key, size_t len, int32_t id) {
    return strmap_get(m, key, len) >= 0 ? 0 : strmap_put(m, key, len, id);
}

/* lengths[0, distinct) with len added if it is not there yet; the new count */
static size_t add_length(size_t *lengths, size_t distinct, size_t len) {
    for (size_t k = 0; k < distinct; k++)
        if (lengths[k] == len)
            return distinct;
    lengths[distinct] = len;
    return distinct + 1;
}

static int cmp_desc(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Unigram's trie edge from node on byte b as a pair map's key: node and byte in its low word,
 * which the map's multiplicative hash mixes into every bit of the slot (a node alone in the
 * high word would pick among a few slots) */
static uint64_t trie_key(uint32_t node, uint8_t b) { return (uint64_t)node << 8 | b; }

static const PairSlot *trie_edge(const PairMap *trie, uint32_t node, uint8_t b) {
    uint64_t key = trie_key(node, b);
    return pairmap_get(trie, (uint32_t)(key >> 32), (uint32_t)key);
}

int sp_model_init(SpModel *m, int kind, const uint8_t *const *pieces, const size_t *lens, const uint8_t *types,
                  const float *scores, size_t n, int32_t unk_id, int byte_fallback) {
    memset(m, 0, sizeof *m);
    m->kind = kind;
    m->unk_id = unk_id;
    m->byte_fallback = byte_fallback;
    m->types = malloc(n ? n : 1);
    m->scores = malloc((n ? n : 1) * sizeof *m->scores);
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += lens[i];
    if (!m->types || !m->scores || strmap_init(&m->ids, n) < 0 || strmap_init(&m->matchable, n) < 0 ||
        strmap_init(&m->user, n) < 0 ||
        (kind == SP_KIND_UNIGRAM &&
         (pairmap_init(&m->trie, bytes) < 0 || !(m->trie_value = calloc(bytes + 1, sizeof *m->trie_value)))))
        goto fail;
    memcpy(m->types, types, n);
    memcpy(m->scores, scores, n * sizeof *scores);
    for (int b = 0; b < 256; b++)
        m->fallback[b] = -1;
    /* Two maps in the library: the reserved pieces (control, unknown, byte) looked up first,
     * then the others, which are also the ones matched or merged in text. */
    float min_score = FLT_MAX; /* as the library's: without NORMAL pieces an unknown outscores all */
    for (size_t i = 0; i < n; i++) {
        int t = types[i];
        int matched = kind == SP_KIND_BPE ? (t == SP_NORMAL || t == SP_USER_DEFINED || t == SP_UNUSED)
                                          : (t == SP_NORMAL || t == SP_USER_DEFINED);
        if (matched) {
            if (put_first(&m->matchable, pieces[i], lens[i], (int32_t)i) < 0)
                goto fail;
        } else if (put_first(&m->ids, pieces[i], lens[i], (int32_t)i) < 0) {
            goto fail;
        }
        if (t == SP_USER_DEFINED && put_first(&m->user, pieces[i], lens[i], (int32_t)i) < 0)
            goto fail;
        if (t == SP_NORMAL && scores[i] < min_score)
            min_score = scores[i];
        /* Unigram's lattice scores a user-defined piece 0.1f per UTF-8 byte past its first */
        if (t == SP_USER_DEFINED && kind == SP_KIND_UNIGRAM)
            m->scores[i] = 0.1f * (float)(lens[i] - 1);
    }
    for (size_t i = 0; i < n; i++) {
        int t = types[i];
        int matched = kind == SP_KIND_BPE ? (t == SP_NORMAL || t == SP_USER_DEFINED || t == SP_UNUSED)
                                          : (t == SP_NORMAL || t == SP_USER_DEFINED);
        if (matched && put_first(&m->ids, pieces[i], lens[i], strmap_get(&m->matchable, pieces[i], lens[i])) < 0)
            goto fail;
    }
    /* the <0xXX> pieces: looked up as the model's vocabulary does (BPE: reserved pieces first;
     * Unigram: HF's map, where the last of a duplicated piece wins) */
    static const char hex[] = "0123456789ABCDEF";
    if (kind == SP_KIND_BPE) {
        for (int b = 0; b < 256; b++) {
            const uint8_t name[6] = {'<', '0', 'x', (uint8_t)hex[b >> 4], (uint8_t)hex[b & 15], '>'};
            m->fallback[b] = strmap_get(&m->ids, name, 6);
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            const uint8_t *p = pieces[i];
            if (lens[i] != 6 || memcmp(p, "<0x", 3) || p[5] != '>' || !p[3] || !p[4])
                continue;
            const char *hi = memchr(hex, p[3], 16), *lo = memchr(hex, p[4], 16);
            if (hi && lo)
                m->fallback[(hi - hex) * 16 + (lo - hex)] = (int32_t)i;
        }
    }
    m->unk_score = min_score - 10.0f;
    if (kind == SP_KIND_UNIGRAM) {
        /* every matchable piece walked byte by byte from the root: Viterbi's search from a
         * position follows the text's bytes and stops where no piece goes on, where a hash of
         * each longer prefix anew was most of a Unigram model's time */
        uint32_t nodes = 1;
        for (size_t i = 0; i < n; i++) {
            int t = types[i];
            if (t != SP_NORMAL && t != SP_USER_DEFINED)
                continue;
            uint32_t node = 0;
            for (size_t e = 0; e < lens[i]; e++) {
                const PairSlot *edge = trie_edge(&m->trie, node, pieces[i][e]);
                if (!edge) {
                    uint64_t key = trie_key(node, pieces[i][e]);
                    pairmap_put(&m->trie, (uint32_t)(key >> 32), (uint32_t)key, 0, (int32_t)nodes++);
                }
                node = edge ? (uint32_t)edge->id : nodes - 1;
                int32_t id = strmap_get(&m->matchable, pieces[i], e + 1);
                if (id >= 0)
                    m->trie_value[node] = id + 1;
                if (!e)
                    m->trie_root[pieces[i][0]] = node;
            }
        }
    }
    /* merges stay inside words when no mergeable piece holds U+2581 right after another
     * character than U+2581 (runs of it, "▁▁", are pieces of many models) and no UNUSED piece
     * asks for splitting back by what was proposed anywhere in the text */
    m->word_split = kind == SP_KIND_BPE;
    for (size_t i = 0; i < n && m->word_split; i++) {
        int t = types[i];
        if (t == SP_UNUSED)
            m->word_split = 0;
        else if (t == SP_NORMAL || t == SP_USER_DEFINED)
            for (size_t b = 1; b + 3 <= lens[i]; b++)
                if (!memcmp(pieces[i] + b, SP_SPACE, 3) && (b < 3 || memcmp(pieces[i] + b - 3, SP_SPACE, 3)))
                    m->word_split = 0;
    }
    size_t distinct = 0;
    m->user_lengths = malloc((n ? n : 1) * sizeof *m->user_lengths);
    if (!m->user_lengths)
        goto fail;
    for (size_t i = 0; i < n; i++)
        if (types[i] == SP_USER_DEFINED)
            distinct = add_length(m->user_lengths, distinct, lens[i]);
    qsort(m->user_lengths, distinct, sizeof *m->user_lengths, cmp_desc);
    m->nuser_lengths = distinct;
    if (m->word_split && cache_init(&m->cache, SP_CACHE_SLOTS, SP_CACHE_BYTES) < 0)
        goto fail;
    return 0;
fail:
    sp_model_free(m);
    return -1;
}

void sp_model_free(SpModel *m) {
    if (m->cache.slots)
        cache_free(&m->cache);
    strmap_free(&m->ids);
    strmap_free(&m->matchable);
    strmap_free(&m->user);
    pairmap_free(&m->trie);
    free(m->trie_value);
    free(m->types);
    free(m->scores);
    free(m->user_lengths);
    memset(m, 0, sizeof *m);
}

/* ---- BPE ---------------------------------------------------------------------------------- */

typedef struct {
    size_t start, len; /* bytes of the text; len 0 once merged into its left neighbour */
    int64_t prev, next;
    int frozen;        /* a user-defined piece: never merged */
} Symbol;

typedef struct {
    float score;
    size_t left, right, size;
} Candidate;

/* The agenda's order: the highest score first, then the leftmost (then as the tuple compares). */
static int before(const Candidate *a, const Candidate *b) {
    if (a->score != b->score)
        return a->score > b->score;
    if (a->left != b->left)
        return a->left < b->left;
    if (a->right != b->right)
        return a->right < b->right;
    return a->size < b->size;
}

typedef struct {
    Candidate *v;
    size_t n, cap;
} Agenda;

static int agenda_push(Agenda *h, Candidate c) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        Candidate *v = realloc(h->v, cap * sizeof *v);
        if (!v)
            return -1;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i && before(&c, &h->v[(i - 1) / 2])) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = c;
    return 0;
}

static Candidate agenda_pop(Agenda *h) {
    Candidate top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && before(&h->v[c + 1], &h->v[c]))
            c++;
        if (!before(&h->v[c], &last))
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n)
        h->v[i] = last;
    return top;
}

/* The pair an UNUSED piece was last proposed from, to split it back into (bpe_model.cc's
 * rev_merge, written when the pair is proposed, not when it is merged). */
typedef struct {
    size_t left_start, left_len, right_start, right_len;
} RevMerge;

typedef struct {
    const SpModel *m;
    const uint8_t *text;
    Symbol *sym;
    Agenda agenda;
    StrMap rev_keys; /* merged piece -> index in rev; initialised on first use */
    int rev_ready;
    RevMerge *rev;
    size_t nrev, cap_rev, max_rev;
    IdBuf *out;
    int previous_unk;
    int any_unk;     /* an unknown symbol was emitted: its ids depend on what came before */
} BpeRun;

static int propose(BpeRun *r, int64_t left, int64_t right) {
    if (left < 0 || right < 0)
        return 0;
    const Symbol *a = &r->sym[left], *b = &r->sym[right];
    if (a->frozen || b->frozen)
        return 0;
    size_t size = a->len + b->len;
    int32_t id = strmap_get(&r->m->matchable, r->text + a->start, size);
    if (id < 0)
        return 0;
    if (agenda_push(&r->agenda, (Candidate){r->m->scores[id], (size_t)left, (size_t)right, size}) < 0)
        return -1;
    if (r->m->types[id] != SP_UNUSED)
        return 0;
    if (!r->rev_ready) {
        if (strmap_init(&r->rev_keys, r->max_rev) < 0)
            return -1;
        r->rev_ready = 1;
    }
    int32_t at = strmap_get(&r->rev_keys, r->text + a->start, size);
    if (at < 0) {
        if (r->nrev == r->cap_rev) {
            size_t cap = r->cap_rev ? r->cap_rev * 2 : 16;
            RevMerge *v = realloc(r->rev, cap * sizeof *v);
            if (!v)
                return -1;
            r->rev = v;
            r->cap_rev = cap;
        }
        at = (int32_t)r->nrev++;
        if (strmap_put(&r->rev_keys, r->text + a->start, size, at) < 0)
            return -1;
    }
    r->rev[at] = (RevMerge){a->start, a->len, b->start, b->len};
    return 0;
}

/* The symbol text[start, start + len) resegmented (bpe_model.cc): only a piece that could have
 * been merged is found, a control, unknown or byte piece of that spelling is the unknown id; an
 * UNUSED one is split back into the pair it was proposed from, or without one (a character) is
 * the unknown id. Past the library's depth limit a symbol is looked up as it is. */
static int emit(BpeRun *r, size_t start, size_t len, int depth) {
    const SpModel *m = r->m;
    int32_t id;
    if (depth > SP_MAX_RESEGMENT_DEPTH) {
        id = strmap_get(&m->ids, r->text + start, len);
    } else {
        id = strmap_get(&m->matchable, r->text + start, len);
        if (id >= 0 && m->types[id] == SP_UNUSED) {
            int32_t at = r->rev_ready ? strmap_get(&r->rev_keys, r->text + start, len) : -1;
            if (at >= 0) {
                RevMerge rv = r->rev[at];
                return emit(r, rv.left_start, rv.left_len, depth + 1) < 0
                           ? -1
                           : emit(r, rv.right_start, rv.right_len, depth + 1);
            }
            id = -1;
        }
    }
    if (id < 0)
        id = m->unk_id;
    int unknown = m->types[id] == SP_UNKNOWN;
    r->any_unk |= unknown;
    if (unknown && m->byte_fallback) {
        for (size_t i = 0; i < len; i++) {
            int32_t b = m->fallback[r->text[start + i]];
            if (ids_push(r->out, b >= 0 ? b : id) < 0)
                return -1;
        }
    } else if (!(unknown && r->previous_unk) && ids_push(r->out, id) < 0) {
        return -1; /* a run of unknown symbols is one unknown piece */
    }
    r->previous_unk = unknown;
    return 0;
}

/* BPE on text[start, end): the symbols, their merges, their ids. */
static int bpe_word(const SpModel *m, const uint8_t *text, size_t start, size_t end, Symbol *sym, Agenda *agenda,
                    IdBuf *out, int *previous_unk, int *any_unk) {
    BpeRun r = {.m = m, .text = text, .sym = sym, .agenda = *agenda, .out = out, .max_rev = end - start,
                .previous_unk = *previous_unk};
    r.agenda.n = 0;
    int err = -1;
    size_t count = 0, n = end;
    for (size_t i = start; i < n;) {
        size_t len = 0;
        for (size_t k = 0; k < m->nuser_lengths && !len; k++) {
            size_t l = m->user_lengths[k];
            if (l <= n - i && strmap_get(&m->user, text + i, l) >= 0)
                len = l;
        }
        int frozen = len != 0;
        if (!frozen) {
            len = utf8_len(text[i]);
            if (len > n - i)
                len = n - i;
        }
        r.sym[count] = (Symbol){i, len, (int64_t)count - 1, (int64_t)count + 1, frozen};
        count++;
        i += len;
    }
    if (count)
        r.sym[count - 1].next = -1;
    for (size_t i = 1; i < count; i++)
        if (propose(&r, (int64_t)i - 1, (int64_t)i) < 0)
            goto done;
    while (r.agenda.n) {
        Candidate c = agenda_pop(&r.agenda);
        Symbol *a = &r.sym[c.left], *b = &r.sym[c.right];
        if (!a->len || !b->len || a->len + b->len != c.size)
            continue; /* stale: one side was merged since */
        a->len += b->len;
        b->len = 0;
        a->next = b->next;
        if (b->next >= 0)
            r.sym[b->next].prev = (int64_t)c.left;
        if (propose(&r, a->prev, (int64_t)c.left) < 0 || propose(&r, (int64_t)c.left, a->next) < 0)
            goto done;
    }
    for (int64_t i = count ? 0 : -1; i >= 0; i = r.sym[i].next)
        if (emit(&r, r.sym[i].start, r.sym[i].len, 0) < 0)
            goto done;
    err = 0;
done:
    *agenda = r.agenda; /* its buffer, reused by the next word */
    *previous_unk = r.previous_unk;
    *any_unk = r.any_unk;
    free(r.rev);
    if (r.rev_ready)
        strmap_free(&r.rev_keys);
    return err;
}

static int bpe_encode(SpModel *m, const uint8_t *text, size_t n, int *previous_unk, IdBuf *out) {
    Symbol *sym = malloc((n ? n : 1) * sizeof *sym);
    Agenda agenda = {0};
    int err = sym ? 0 : -1;
    /* With word_split no symbol holds U+2581 right after another character, so no merge
     * crosses the position before a U+2581 that follows one: each word merges alone, in the
     * order it would among all of them, and has the same ids wherever it is (then cached)
     * unless it holds an unknown symbol, which may join the unknown piece before it. */
    Cache *cache = m->word_split ? cache_enter(&m->cache) : NULL;
    for (size_t start = 0; start < n && !err;) {
        size_t end = n;
        if (m->word_split)
            for (size_t i = start + 1; i + 3 <= n; i++)
                if (text[i] == 0xE2 && !memcmp(text + i, SP_SPACE, 3) && (i < 3 || memcmp(text + i - 3, SP_SPACE, 3))) {
                    end = i;
                    break;
                }
        size_t len = end - start;
        uint64_t h = 0;
        if (cache && len <= CACHE_MAX_PIECE) {
            h = hash_bytes(text + start, len);
            const CacheEntry *e = cache_get(cache, text + start, len, h);
            if (e) {
                err = cache_ids_extend(out, e);
                *previous_unk = 0;
                start = end;
                continue;
            }
        }
        size_t before = out->n;
        int any_unk = 0;
        err = bpe_word(m, text, start, end, sym, &agenda, out, previous_unk, &any_unk);
        /* an unknown symbol's id depends on the one before only where runs of them are one
         * unknown piece: with byte fallback each is its bytes, the same wherever it is */
        if (!err && cache && len <= CACHE_MAX_PIECE && (!any_unk || m->byte_fallback))
            cache_put(cache, text + start, len, h, out->v + before, out->n - before);
        start = end;
    }
    cache_leave(&m->cache, cache);
    free(sym);
    free(agenda.v);
    return err;
}

/* ---- Unigram -------------------------------------------------------------------------------- */

/* run's arrays with room for positions [0, n] of the pending text, new ones unreached */
static int unigram_room(SpRun *run, size_t n) {
    if (n + 1 > run->cap) {
        size_t cap = 2 * run->cap > n + 1 ? 2 * run->cap : n + 1;
        float *best = realloc(run->best, cap * sizeof *best);
        if (best)
            run->best = best;
        int64_t *start_of = best ? realloc(run->start_of, cap * sizeof *start_of) : NULL;
        if (start_of)
            run->start_of = start_of;
        int32_t *node = start_of ? realloc(run->node, cap * sizeof *node) : NULL;
        if (!node)
            return -1;
        run->node = node;
        for (size_t i = run->cap; i < cap; i++)
            run->start_of[i] = -1;
        if (!run->cap)
            run->best[0] = 0; /* the text's start */
        run->cap = cap;
    }
    return 0;
}

/* The library's Viterbi (EncodeOptimized), resumable: the starts before run->done are processed,
 * their best paths in run's arrays. A position no piece spans (none from an earlier start ends
 * past it) is on every path, so the best path's nodes before the last such one are final: they
 * are emitted, and the DP goes on from there with that position's score, the sums the whole
 * text's. Without `last` a start whose pieces could run on past the text's end waits for more. */
static int unigram_part(const SpModel *m, SpRun *run, const uint8_t *text, size_t n, int last, size_t *used,
                        IdBuf *out) {
    if (unigram_room(run, n) < 0)
        return -1;
    float *best = run->best;
    int64_t *start_of = run->start_of;
    int32_t *node = run->node;
    size_t i = run->done, cut = 0;
    while (i < n) {
        if (run->reach <= i)
            cut = i;
        size_t first = utf8_len(text[i]) <= n - i ? utf8_len(text[i]) : n - i;
        if (!last && first < utf8_len(text[i]))
            break;
        float here = best[i];
        if (here < -SP_SCORE_RESET || here > SP_SCORE_RESET) { /* a NaN sum is never reset */
            for (size_t j = i + 1; j <= run->reach; j++)
                if (start_of[j] != -1)
                    best[j] -= here;
            /* stored, not only used: a start redone with more text must not move them again */
            best[i] = here = 0.0f;
        }
        int single = 0, open = 0;
        size_t reach = run->reach;
        /* the first byte's step from the root's table; without one the walk below stops there */
        uint32_t at = m->trie_root[text[i]];
        size_t walked = at ? i + 1 : i;
        for (size_t end = i + first; end <= n;) {
            for (; walked < end; walked++) {
                const PairSlot *edge = trie_edge(&m->trie, at, text[walked]);
                if (!edge)
                    break;
                at = (uint32_t)edge->id;
            }
            if (walked < end)
                break;
            int32_t value = m->trie_value[at];
            if (value > 0) {
                int32_t id = value - 1;
                /* a float32 sum, compared as one, as the library's */
                float cand = here + m->scores[id];
                if (start_of[end] == -1 || cand > best[end]) {
                    best[end] = cand;
                    start_of[end] = (int64_t)i;
                    node[end] = id;
                }
                if (end == i + first)
                    single = 1;
                if (end > reach)
                    reach = end;
            }
            if (end == n) {
                open = !last;
                break;
            }
            end += utf8_len(text[end]) <= n - end ? utf8_len(text[end]) : n - end;
        }
        if (open)
            break; /* a piece may run on into the text to come: redone with it */
        if (!single) {
            float cand = m->unk_score + here;
            if (start_of[i + first] == -1 || cand > best[i + first]) {
                best[i + first] = cand;
                start_of[i + first] = (int64_t)i;
                node[i + first] = m->unk_id;
            }
            if (i + first > reach)
                reach = i + first;
        }
        run->reach = reach;
        i += first;
    }
    run->done = i;
    if (last)
        cut = n;
    /* the best path to the cut, last node first, then emitted from the start */
    size_t count = 0;
    for (int64_t end = (int64_t)cut; end > 0; end = start_of[end])
        count++;
    int64_t *ends = malloc((count ? count : 1) * sizeof *ends);
    if (!ends)
        return -1;
    size_t k = count;
    for (int64_t end = (int64_t)cut; end > 0; end = start_of[end])
        ends[--k] = end;
    int err = 0;
    for (size_t j = 0; j < count && !err; j++) {
        int64_t end = ends[j], start = start_of[end];
        int32_t id = node[end];
        if (id != m->unk_id) {
            err = ids_push(out, id);
            run->previous_unk = 0;
            continue;
        }
        if (m->byte_fallback) {
            for (int64_t b = start; b < end && !err; b++) {
                int32_t byte_id = m->fallback[text[b]];
                err = ids_push(out, byte_id >= 0 ? byte_id : id);
            }
        } else if (!run->previous_unk) {
            err = ids_push(out, id); /* a run of unknown characters is one unknown piece */
        }
        run->previous_unk = 1;
    }
    free(ends);
    if (err || !cut || last) {
        *used = err ? 0 : cut;
        return err;
    }
    /* the pending text starts at the cut: its positions move there, their scores kept */
    size_t rest = n - cut;
    memmove(best, best + cut, (rest + 1) * sizeof *best);
    memmove(node, node + cut, (rest + 1) * sizeof *node);
    for (size_t q = 0; q <= rest; q++)
        start_of[q] = start_of[q + cut] >= (int64_t)cut ? start_of[q + cut] - (int64_t)cut : -1;
    for (size_t q = rest + 1; q <= n; q++)
        start_of[q] = -1;
    run->done -= cut;
    run->reach = run->reach > cut ? run->reach - cut : 0;
    *used = cut;
    return 0;
}

int sp_model_encode_part(SpModel *m, SpRun *run, const uint8_t *text, size_t n, int last, size_t *used, IdBuf *out) {
    if (m->kind != SP_KIND_BPE)
        return unigram_part(m, run, text, n, last, used, out);
    /* BPE with word_split cuts before the last word's U+2581 (one after another character);
     * run->reach is where the search stopped last time, so no byte is searched twice */
    size_t cut = last ? n : 0;
    if (!last && m->word_split && n >= 6) {
        size_t from = run->reach > 3 ? run->reach : 3;
        for (size_t i = n - 3; i >= from; i--) {
            if (text[i] == 0xE2 && !memcmp(text + i, SP_SPACE, 3) && memcmp(text + i - 3, SP_SPACE, 3)) {
                cut = i;
                break;
            }
            if (i == from)
                break;
        }
        run->reach = cut ? 0 : n - 2;
    }
    *used = cut;
    return cut ? bpe_encode(m, text, cut, &run->previous_unk, out) : 0;
}

int sp_model_encode(SpModel *m, const uint8_t *text, size_t n, IdBuf *out) {
    SpRun run = {0};
    size_t used;
    int err = sp_model_encode_part(m, &run, text, n, 1, &used, out);
    sp_run_free(&run);
    return err;
}

void sp_run_free(SpRun *run) {
    free(run->best);
    free(run->start_of);
    free(run->node);
    *run = (SpRun){0};
}

/* ---- the normalizer (normalizer.cc) ---------------------------------------------------------- */

static size_t unit_offset(uint32_t unit) {
    return (size_t)(unit >> 10) << ((unit & 0x200) >> 6);
}

int sp_normalizer_init(SpNormalizer *m, const uint8_t *const *user, const size_t *lens, size_t nuser) {
    m->user_lengths = malloc((nuser ? nuser : 1) * sizeof *m->user_lengths);
    if (!m->user_lengths || strmap_init(&m->user, nuser) < 0)
        return -1;
    size_t distinct = 0;
    for (size_t i = 0; i < nuser; i++) {
        if (put_first(&m->user, user[i], lens[i], (int32_t)i) < 0)
            return -1;
        distinct = add_length(m->user_lengths, distinct, lens[i]);
    }
    qsort(m->user_lengths, distinct, sizeof *m->user_lengths, cmp_desc);
    m->nuser_lengths = distinct;
    /* a key starts with byte b where walk's first step from the root finds it, and goes on
     * with byte c where the next step from there does */
    size_t root = m->nunits ? unit_offset(m->units[0]) : 0;
    for (uint32_t b = 0; b < 128; b++) {
        size_t at = root ^ b;
        int key = m->nunits && at < m->nunits && (m->units[at] & 0x800000FFu) == b;
        m->plain[b] = key ? SP_PLAIN_NO : b == ' ' ? SP_PLAIN_SPACE : SP_PLAIN_COPY;
        if (!key || b == ' ' || m->units[at] & 0x100)
            continue;
        size_t next = at ^ unit_offset(m->units[at]);
        int ascii_after = 0;
        for (uint32_t c = 0; c < 128; c++)
            ascii_after |= (next ^ c) < m->nunits && (m->units[next ^ c] & 0x800000FFu) == c;
        if (!ascii_after)
            m->plain[b] = SP_PLAIN_BEFORE_ASCII;
    }
    for (size_t i = 0; i < nuser; i++)
        if (lens[i] && user[i][0] < 128)
            m->plain[user[i][0]] = SP_PLAIN_NO;
    return 0;
}

void sp_normalizer_free(SpNormalizer *m) {
    strmap_free(&m->user);
    free(m->user_lengths);
    m->user_lengths = NULL;
}

/* darts-clone's common-prefix search over d[start, end) from node: the longest key's length and
 * value; *node is where the walk stands after all of it, or -1 if it ended. -2 for a value
 * outside the replacements. A NUL byte is a label like any other (the library searches by the
 * text's length): no trainer's trie has a unit it matches, one made by hand can. */
static int walk(const SpNormalizer *m, const uint8_t *d, size_t start, size_t end, int64_t *node, size_t *best,
                uint32_t *value) {
    size_t count = m->nunits;
    int64_t at = *node;
    *best = 0;
    *value = 0;
    for (size_t i = start; i < end; i++) {
        uint8_t byte = d[i];
        at ^= byte;
        if ((size_t)at >= count || (m->units[at] & 0x800000FFu) != byte) {
            *node = -1;
            return 0;
        }
        uint32_t unit = m->units[at];
        at ^= (int64_t)unit_offset(unit);
        if (unit & 0x100) {
            if ((size_t)at >= count || (m->units[at] & 0x7FFFFFFFu) >= m->nrepl)
                return -2;
            *best = i + 1 - start;
            *value = m->units[at] & 0x7FFFFFFFu;
        }
    }
    *node = at;
    return 0;
}

/* Whether s[0, n) is UTF-8 as Python's strict decoder takes it (no overlong forms, surrogates or
 * code points past U+10FFFF): a charsmap's replacement may be any bytes. */
static int utf8_strict(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t len = c < 0x80 ? 1 : c >= 0xC2 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xF0 && c < 0xF5 ? 4 : 0;
        if (!len || len > n - i)
            return 0;
        for (size_t k = 1; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
        if ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] >= 0xA0) || (c == 0xF0 && s[i + 1] < 0x90) ||
            (c == 0xF4 && s[i + 1] >= 0x90))
            return 0;
        i += len;
    }
    return 1;
}

/* NormalizePrefix: the normalized bytes of the input's next unit (*piece, *piece_n) and its
 * length in the input. The input is valid UTF-8 (a Python str's), but a charsmap key may end
 * inside a character: the library then goes on from that byte, a continuation byte, which is
 * one character to its trie and, unless a key starts there, malformed: U+FFFD for one byte.
 * Unless `last`, d[0, n) is only the text so far: 1 when the unit could reach past it, whose
 * answer the bytes after decide. */
static int next_unit(const SpNormalizer *m, const uint8_t *d, size_t n, size_t pos, int last, const uint8_t **piece,
                     size_t *piece_n, size_t *used) {
    for (size_t k = 0; k < m->nuser_lengths; k++) {
        size_t l = m->user_lengths[k];
        if (l > n - pos) {
            if (!last)
                return 1;
        } else if (strmap_get(&m->user, d + pos, l) >= 0) {
            *piece = d + pos;
            *piece_n = *used = l;
            return 0;
        }
    }
    int inside = (d[pos] & 0xC0) == 0x80;
    size_t size = inside ? 1 : utf8_len(d[pos]);
    if (size > n - pos) {
        if (!last)
            return 1;
        size = n - pos;
    }
    if (m->nunits) {
        int64_t node = (int64_t)unit_offset(m->units[0]);
        size_t best, more;
        uint32_t value, more_value;
        if (walk(m, d, pos, pos + size, &node, &best, &value) < 0)
            return -2;
        if (node >= 0 && pos + size < n) {
            /* a key runs on past this character (a letter and its accent) */
            if (walk(m, d, pos + size, n, &node, &more, &more_value) < 0)
                return -2;
            if (more) {
                best = size + more;
                value = more_value;
            }
        }
        if (node >= 0 && !last)
            return 1; /* the walk is still in a key at the end of what is here */
        if (best) {
            const uint8_t *r = m->repl + value, *stop = memchr(r, 0, m->nrepl - value);
            *piece = r;
            *piece_n = stop ? (size_t)(stop - r) : m->nrepl - value;
            *used = best;
            return utf8_strict(r, *piece_n) ? 0 : -2;
        }
    }
    if (inside) {
        static const uint8_t replacement[3] = {0xEF, 0xBF, 0xBD};
        *piece = replacement;
        *piece_n = 3;
        *used = 1;
        return 0;
    }
    *piece = d + pos;
    *piece_n = *used = size;
    return 0;
}

static int out_put(SpBytes *o, const uint8_t *s, size_t len) {
    if (o->cap - o->n < len) {
        size_t c = o->cap * 2 + len + 64;
        uint8_t *v = realloc(o->v, c);
        if (!v)
            return -1;
        o->v = v;
        o->cap = c;
    }
    memcpy(o->v + o->n, s, len);
    o->n += len;
    return 0;
}

int sp_normalize_part(const SpNormalizer *m, SpNormState *st, const uint8_t *d, size_t n, int last, size_t *used_in,
                      SpBytes *o) {
    const uint8_t *space = m->escape_whitespaces ? SP_SPACE : (const uint8_t *)" ";
    size_t space_n = m->escape_whitespaces ? 3 : 1, pos = 0, used;
    const uint8_t *piece;
    size_t piece_n;
    int err = 0;
    if (!st->begun) {
        if (m->remove_extra_whitespaces) {
            while (pos < n) {
                if ((err = next_unit(m, d, n, pos, last, &piece, &piece_n, &used)) != 0)
                    goto stop;
                if (piece_n != 1 || piece[0] != ' ')
                    break;
                pos += used;
            }
        }
        if (pos == n)
            goto stop; /* nothing but leading whitespace so far */
        st->begun = 1;
        if (m->add_dummy_prefix && !m->treat_whitespace_as_suffix && out_put(o, space, space_n) < 0)
            return -1;
        st->previous_space = m->remove_extra_whitespaces;
    }
    while (pos < n) {
        int plain = d[pos] < 128 ? m->plain[d[pos]] : SP_PLAIN_NO;
        if (plain == SP_PLAIN_BEFORE_ASCII && pos + 1 < n && d[pos + 1] < 128)
            plain = SP_PLAIN_COPY;
        if (plain == SP_PLAIN_COPY) {
            size_t end = pos + 1;
            while (end < n && d[end] < 128 &&
                   (m->plain[d[end]] == SP_PLAIN_COPY ||
                    (m->plain[d[end]] == SP_PLAIN_BEFORE_ASCII && end + 1 < n && d[end + 1] < 128)))
                end++;
            if (out_put(o, d + pos, end - pos) < 0)
                return -1;
            st->previous_space = 0;
            pos = end;
            continue;
        }
        /* the steps below on a unit of one space */
        if (plain == SP_PLAIN_SPACE) {
            if (!st->previous_space && out_put(o, space, space_n) < 0)
                return -1;
            st->previous_space = m->remove_extra_whitespaces;
            pos++;
            continue;
        }
        if ((err = next_unit(m, d, n, pos, last, &piece, &piece_n, &used)) != 0)
            goto stop;
        if (st->previous_space)
            while (piece_n && piece[0] == ' ') {
                piece++;
                piece_n--;
            }
        if (piece_n) {
            for (size_t i = 0; i < piece_n; i++) {
                int sp = piece[i] == ' ' && m->escape_whitespaces;
                if (out_put(o, sp ? SP_SPACE : piece + i, sp ? 3 : 1) < 0)
                    return -1;
            }
            st->previous_space = piece[piece_n - 1] == ' ';
        }
        pos += used;
        if (!m->remove_extra_whitespaces)
            st->previous_space = 0;
    }
stop:
    *used_in = pos;
    if (err < 0)
        return err;
    if (last && st->begun) {
        if (m->remove_extra_whitespaces)
            while (o->n >= space_n && !memcmp(o->v + o->n - space_n, space, space_n))
                o->n -= space_n;
        if (m->add_dummy_prefix && m->treat_whitespace_as_suffix && out_put(o, space, space_n) < 0)
            return -1;
    }
    return 0;
}

size_t sp_normalized_kept(const SpNormalizer *m, const uint8_t *out, size_t n) {
    if (!m->remove_extra_whitespaces)
        return n;
    const uint8_t *space = m->escape_whitespaces ? SP_SPACE : (const uint8_t *)" ";
    size_t space_n = m->escape_whitespaces ? 3 : 1;
    while (n >= space_n && !memcmp(out + n - space_n, space, space_n))
        n -= space_n;
    return n;
}

int sp_normalize(const SpNormalizer *m, const uint8_t *d, size_t n, uint8_t **out, size_t *out_n) {
    SpNormState st = {0};
    SpBytes o = {malloc(n + n / 2 + 16), 0, n + n / 2 + 16};
    size_t used;
    int err = o.v ? sp_normalize_part(m, &st, d, n, 1, &used, &o) : -1;
    if (err) {
        free(o.v);
        return err;
    }
    *out = o.v;
    *out_n = o.n;
    return 0;
}
