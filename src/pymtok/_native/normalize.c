/* Normalizers: BertNormalizer, NFC and Precompiled (SentencePiece's charsmap), on code points.
 *
 * All reproduce pymtok.normalizers exactly: the per-code-point tables (normalize_data.h) are
 * generated from that module's own HF-pinned predicates and mappings, and the grapheme classes
 * from the `regex` module whose \X the pure Precompiled cuts clusters with.
 */
#include "native.h"
#include "normalize_data.h"

#include <pthread.h>

static inline uint32_t nprops(uint32_t c) {
    if (c >= 0x110000)
        return 0;
    return n_props_blocks[((uint32_t)n_props_index[c >> N_BLOCK_SHIFT] << N_BLOCK_SHIFT) |
                          (c & ((1u << N_BLOCK_SHIFT) - 1))];
}

/* Index of c in a sorted key array, or -1. */
static ptrdiff_t find_key(const uint32_t *keys, size_t count, uint32_t c) {
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (keys[mid] < c)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < count && keys[lo] == c ? (ptrdiff_t)lo : -1;
}

static inline unsigned ccc(uint32_t c, uint32_t props) {
    if (!(props & N_NONSTARTER))
        return 0;
    return n_ccc_values[find_key(n_ccc_keys, N_CCC_COUNT, c)];
}

static int cps_grow(CpBuf *b, size_t extra) {
    if (b->cap - b->n >= extra && b->v)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->n < extra)
        cap *= 2;
    uint32_t *v = realloc(b->v, cap * sizeof *v);
    if (!v)
        return -1;
    b->v = v;
    b->cap = cap;
    return 0;
}

static inline int cps_push(CpBuf *b, uint32_t c) {
    if (b->n == b->cap && cps_grow(b, 1) < 0)
        return -1;
    b->v[b->n++] = c;
    return 0;
}

static inline int cps_extend(CpBuf *b, const uint32_t *v, size_t n) {
    if (b->cap - b->n < n && cps_grow(b, n) < 0)
        return -1;
    if (n) /* v may be NULL then (an empty mapping), which memcpy does not allow */
        memcpy(b->v + b->n, v, n * sizeof *v);
    b->n += n;
    return 0;
}

/* Append c's entry of one of the generated mappings (keys, offsets, pool); c must have one. */
static int push_mapped(CpBuf *b, const uint32_t *keys, size_t count, const uint32_t *offsets,
                       const uint32_t *pool, uint32_t c) {
    size_t k = (size_t)find_key(keys, count, c);
    return cps_extend(b, pool + offsets[k], offsets[k + 1] - offsets[k]);
}

/* c's NFD, c having one: a Hangul syllable's by formula (most of the table's keys, and a search
 * of it for every syllable of Korean text), the others' from the table */
static int push_nfd(CpBuf *b, uint32_t c) {
    uint32_t s = c - 0xAC00;
    if (s < 11172) {
        if (cps_grow(b, 3) < 0)
            return -1;
        uint32_t *o = b->v + b->n;
        o[0] = 0x1100 + s / 588;
        o[1] = 0x1161 + s % 588 / 28;
        o[2] = 0x11A7 + s % 28;
        b->n += s % 28 ? 3 : 2;
        return 0;
    }
    return push_mapped(b, n_nfd_keys, N_NFD_COUNT, n_nfd_offsets, n_nfd_pool, c);
}

#define PUSH_NFD(b, c) push_nfd((b), (c))
#define PUSH_LOWER(b, c) push_mapped((b), n_lower_keys, N_LOWER_COUNT, n_lower_offsets, n_lower_pool, (c))
#define PUSH_NFKD(b, c) push_mapped((b), n_nfkd_keys, N_NFKD_COUNT, n_nfkd_offsets, n_nfkd_pool, (c))

/* Entries of the runs sorted below: a code point, and above it nfc_aligned's change. */
enum { CP_BITS = 21 };
#define CP_MASK ((1u << CP_BITS) - 1)

static inline unsigned entry_ccc(uint32_t e) {
    uint32_t c = e & CP_MASK;
    return ccc(c, nprops(c));
}

/* A run of non-starters in stable order of class: by insertion for the few marks text has, by
 * counting for a long run (hostile text: a megabyte of alternating marks took an insertion sort
 * minutes). Returns -1 when out of memory. */
static int order_run(uint32_t *v, size_t n) {
    if (n <= 32) {
        for (size_t i = 1; i < n; i++) {
            uint32_t c = v[i];
            unsigned cc = entry_ccc(c);
            size_t j = i;
            for (; j > 0 && entry_ccc(v[j - 1]) > cc; j--)
                v[j] = v[j - 1];
            v[j] = c;
        }
        return 0;
    }
    uint32_t *sorted = malloc(n * sizeof *v);
    if (!sorted)
        return -1;
    size_t at[257] = {0};
    for (size_t i = 0; i < n; i++)
        at[entry_ccc(v[i]) + 1]++;
    for (size_t k = 1; k < 257; k++)
        at[k] += at[k - 1];
    for (size_t i = 0; i < n; i++)
        sorted[at[entry_ccc(v[i])]++] = v[i];
    memcpy(v, sorted, n * sizeof *v);
    free(sorted);
    return 0;
}

/* Whether c (a code point, none before U+0300) has a non-zero combining class */
static inline int nonstarter(uint32_t c) { return c >= 0x300 && (nprops(c) & N_NONSTARTER); }

/* NFD's canonical ordering: each run of non-starters in stable order of class (entries: code
 * points, or nfc_aligned's). Returns whether it moved any, -1 when out of memory. */
static int canonical_order(uint32_t *v, size_t n) {
    int moved = 0;
    for (size_t i = 0; i < n;) {
        if (!nonstarter(v[i] & CP_MASK)) {
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < n && nonstarter(v[j] & CP_MASK))
            j++;
        /* a non-starter alone (a virama, a vowel sign) never moves: its class, a search of the
         * class table, is not needed */
        int ordered = 1;
        for (size_t k = i + 1; j - i > 1 && k < j; k++)
            ordered &= entry_ccc(v[k - 1]) <= entry_ccc(v[k]);
        if (!ordered) {
            if (order_run(v + i, j - i) < 0)
                return -1;
            moved = 1;
        }
        i = j;
    }
    return moved;
}

/* The characters pushed since `from` come from input character `at`: their alignment. */
static int align_fill(CpBuf *align, size_t from, size_t to, uint32_t at) {
    if (!align)
        return 0;
    for (size_t k = from; k < to; k++)
        if (cps_push(align, at) < 0)
            return -1;
    return 0;
}

/* ---- BertNormalizer ------------------------------------------------------------------------ */

/* clean_text on an ASCII character: kept, dropped (a control) or written as a space */
enum { BERT_KEEP, BERT_DROP, BERT_SPACE_OUT };
static uint8_t bert_ascii_kind[0x80];
static pthread_once_t bert_ascii_once = PTHREAD_ONCE_INIT;

/* An ASCII character as BertNormalizer's lowercase leaves it (only A-Z change) */
static inline uint32_t bert_ascii_case(uint32_t c, int lower) { return lower && c - 'A' < 26 ? c + 32 : c; }

/* Whether bert_ascii's vector way holds: every printable character kept, \t, \n and \r spaces */
static int bert_ascii_vector;

static void bert_ascii_build(void) {
    for (uint32_t c = 0; c < 0x80; c++) {
        uint32_t p = nprops(c);
        /* a space written as a space is kept */
        bert_ascii_kind[c] = (p & N_BERT_CONTROL)            ? BERT_DROP
                             : (p & N_BERT_SPACE) && c != ' ' ? BERT_SPACE_OUT
                                                              : BERT_KEEP;
    }
    int vector = bert_ascii_kind['\t'] == BERT_SPACE_OUT && bert_ascii_kind['\n'] == BERT_SPACE_OUT &&
                 bert_ascii_kind['\r'] == BERT_SPACE_OUT;
    for (uint32_t c = 0x20; c < 0x7F; c++)
        vector &= bert_ascii_kind[c] == BERT_KEEP;
    bert_ascii_vector = vector;
}

/* bert_normalize on ASCII text, most of what English and code are: no character is CJK, has a
 * decomposition or is a mark, so the steps are one pass with one table. */
static int bert_ascii(int flags, const uint32_t *in, size_t n, CpBuf *out, CpBuf *align) {
    pthread_once(&bert_ascii_once, bert_ascii_build);
    out->n = 0;
    if (cps_grow(out, n) < 0)
        return -1;
    uint32_t *a = NULL;
    if (align) {
        align[1].n = 0;
        if (cps_grow(&align[1], n) < 0)
            return -1;
        a = align[1].v;
    }
    int clean = flags & BERT_CLEAN, lower = flags & BERT_LOWER;
    uint32_t *o = out->v;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
#ifdef __SSE2__
        /* four characters to an instruction where none is dropped: printable ones, and with
         * clean_text the \t, \n and \r it writes as spaces (bert_ascii_build checks both in
         * the table) */
        if (bert_ascii_vector && !a && i + 4 <= n) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(in + i));
            __m128i shown = _mm_and_si128(_mm_cmpgt_epi32(v, _mm_set1_epi32(0x1F)), _mm_cmplt_epi32(v, _mm_set1_epi32(0x7F)));
            __m128i out_space = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi32(v, _mm_set1_epi32('\t')),
                                                          _mm_cmpeq_epi32(v, _mm_set1_epi32('\n'))),
                                             _mm_cmpeq_epi32(v, _mm_set1_epi32('\r')));
            out_space = _mm_and_si128(out_space, _mm_set1_epi32(clean ? -1 : 0));
            if (_mm_movemask_epi8(_mm_or_si128(shown, out_space)) == 0xFFFF) {
                __m128i upper = _mm_and_si128(_mm_cmpgt_epi32(v, _mm_set1_epi32('A' - 1)),
                                              _mm_cmplt_epi32(v, _mm_set1_epi32('Z' + 1)));
                v = _mm_add_epi32(v, _mm_and_si128(upper, _mm_set1_epi32(lower ? 32 : 0)));
                v = _mm_or_si128(_mm_andnot_si128(out_space, v), _mm_and_si128(out_space, _mm_set1_epi32(' ')));
                _mm_storeu_si128((__m128i *)(void *)(o + k), v);
                k += 4;
                i += 4;
                continue;
            }
        }
#endif
        uint32_t c = in[i++];
        int kind = clean ? bert_ascii_kind[c] : BERT_KEEP;
        if (kind == BERT_DROP)
            continue;
        c = kind == BERT_SPACE_OUT ? ' ' : bert_ascii_case(c, lower);
        if (a)
            a[k] = (uint32_t)i - 1;
        o[k++] = c;
    }
    out->n = k;
    if (align)
        align[1].n = k;
    return 0;
}

/* The end of the run of ASCII characters from in[i] that pass 1 keeps as they are */
static inline size_t bert_kept_ascii(const uint32_t *in, size_t i, size_t n) {
    while (i < n && in[i] < 0x80 && bert_ascii_kind[in[i]] == BERT_KEEP)
        i++;
    return i;
}

/* Pass 2's map of one character x of pass 1's output onto out: a mark dropped (drop), the
 * case lowered (map) */
static inline int bert_map(CpBuf *out, uint32_t x, int lower, uint32_t drop, uint32_t map) {
    if (x < 0x80)
        return cps_push(out, bert_ascii_case(x, lower));
    uint32_t p = nprops(x);
    if (p & drop)
        return 0;
    return p & map ? PUSH_LOWER(out, x) : cps_push(out, x);
}

/* The run of non-starters out[from..) bert_one_pass put in as pass 1 gives them (al: each one's
 * input character, or NULL): put in canonical order, then mapped in place as pass 2 maps them,
 * marks dropped (no non-starter lowercases to another character: gen_normalize.py checks).
 * *moved set where ordering moved one, *kept where one stays. -1 out of memory. */
static int bert_run_done(CpBuf *out, CpBuf *al, size_t from, uint32_t drop, int *moved, int *kept) {
    /* whether ordering moves one is the alignment's question only */
    for (size_t k = from + 1; al && k < out->n; k++)
        *moved |= entry_ccc(out->v[k - 1]) > entry_ccc(out->v[k]);
    if (out->n - from > 1 && order_run(out->v + from, out->n - from) < 0)
        return -1;
    size_t k = from;
    for (size_t i = from; i < out->n; i++)
        if (!(nprops(out->v[i]) & drop)) {
            out->v[k] = out->v[i];
            if (al)
                al->v[k] = al->v[i];
            k++;
        }
    *kept |= k > from;
    out->n = k;
    if (al)
        al->n = k;
    return 0;
}

/* bert_run_done with a run of one (a virama, a nukta, most runs) inline: it has no order */
static inline int bert_run_end(CpBuf *out, CpBuf *al, size_t from, uint32_t drop, int *moved, int *kept) {
    if (out->n - from > 1)
        return bert_run_done(out, al, from, drop, moved, kept);
    int stays = !(nprops(out->v[from]) & drop);
    *kept |= stays;
    out->n -= !stays;
    if (al)
        al->n = out->n;
    return 0;
}

/* Whether bert_one_pass takes c (of properties p) the general way, the only one that may go on
 * with a run of non-starters (a control clean_text drops goes that way, and puts in nothing) */
static inline int bert_general(uint32_t c, uint32_t p, uint32_t touch, uint32_t drop, uint32_t map) {
    return !(c < 0x80 && bert_ascii_kind[c] == BERT_KEEP) && (p & touch) &&
           ((p & touch) != N_BERT_CJK || (p & (drop | map)));
}

/* bert_normalize in one pass: each character's pass-1 output mapped by pass 2 at once, but
 * for runs of non-starters (only strip_accents orders; only a decomposition or a non-starter,
 * which it touches, puts one in), which wait in out until their run ends, to be ordered and
 * mapped then (bert_run_done): a run ends within the general way, or where the next character
 * goes another. al (or NULL): each output character's input character. 0; -1 out of memory; -2
 * where ordering moved a character that stays, whose alignment the pure path follows. tmp holds
 * one character's pass-1 output. */
static int bert_one_pass(int flags, const uint32_t *in, size_t n, uint32_t touch, CpBuf *tmp, CpBuf *out,
                         CpBuf *al) {
    int strip = flags & BERT_STRIP, lower = flags & BERT_LOWER, moved = 0, kept = 0;
    uint32_t drop = strip ? N_BERT_MARK : 0, map = lower ? N_LOWER : 0;
    size_t run = SIZE_MAX; /* where the run of non-starters waiting in out starts */
    out->n = 0;
    if (al)
        al->n = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = in[i];
        size_t mark = out->n;
        if (c < 0x80 && bert_ascii_kind[c] == BERT_KEEP) {
            size_t end = bert_kept_ascii(in, i + 1, n);
            if (cps_grow(out, end - i) < 0 || (al && cps_grow(al, end - i) < 0))
                return -1;
            uint32_t *o = out->v + out->n;
            for (size_t j = i; j < end; j++)
                o[j - i] = bert_ascii_case(in[j], lower);
            out->n += end - i;
            for (size_t j = i; al && j < end; j++)
                al->v[al->n++] = (uint32_t)j;
            i = end - 1;
            continue;
        }
        uint32_t p = nprops(c);
        if (!(p & touch)) {
            /* pass 1 keeps it, and with strip_accents it is no non-starter (touch's) */
            if (((p & (drop | map)) ? bert_map(out, c, lower, drop, map) : cps_push(out, c)) < 0 ||
                (al && align_fill(al, mark, out->n, (uint32_t)i) < 0))
                return -1;
            continue;
        }
        if ((p & touch) == N_BERT_CJK && !(p & (drop | map))) {
            /* most of Chinese and Japanese text: padded, changed no other way */
            if (cps_grow(out, 3) < 0)
                return -1;
            uint32_t *o = out->v + out->n;
            o[0] = ' ';
            o[1] = c;
            o[2] = ' ';
            out->n += 3;
            if (al && align_fill(al, mark, out->n, (uint32_t)i) < 0)
                return -1;
            continue;
        }
        if (!((flags & BERT_CLEAN) && (p & N_BERT_CONTROL))) {
            tmp->n = 0;
            int pad = (flags & BERT_CHINESE) && (p & N_BERT_CJK);
            if ((flags & BERT_CLEAN) && (p & N_BERT_SPACE) ? cps_push(tmp, ' ') < 0
                : (pad && cps_push(tmp, ' ') < 0) || (strip && (p & N_NFD) ? PUSH_NFD(tmp, c) : cps_push(tmp, c)) < 0 ||
                      (pad && cps_push(tmp, ' ') < 0))
                return -1;
            for (size_t k = 0; k < tmp->n; k++) {
                uint32_t x = tmp->v[k];
                if (strip && nonstarter(x)) {
                    run = run == SIZE_MAX ? out->n : run;
                    if (cps_push(out, x) < 0 || (al && align_fill(al, out->n - 1, out->n, (uint32_t)i) < 0))
                        return -1;
                    continue;
                }
                if (run != SIZE_MAX && bert_run_end(out, al, run, drop, &moved, &kept) < 0)
                    return -1;
                run = SIZE_MAX;
                size_t before = out->n;
                if (bert_map(out, x, lower, drop, map) < 0 || (al && align_fill(al, before, out->n, (uint32_t)i) < 0))
                    return -1;
            }
        }
        if (run != SIZE_MAX && (i + 1 == n || !bert_general(in[i + 1], nprops(in[i + 1]), touch, drop, map))) {
            if (bert_run_end(out, al, run, drop, &moved, &kept) < 0)
                return -1;
            run = SIZE_MAX;
        }
    }
    return al && moved && kept ? -2 : 0;
}

/* The pure path's steps in its order: clean_text (controls out, White_Space to " "),
 * handle_chinese_chars (" c "), strip_accents (NFD, then Mn out), lowercase. NFD's canonical
 * reordering runs over the whole decomposed text before marks are dropped, as there.
 * With align (two buffers), align[1] gets each output character's input character, as HF's
 * NormalizedString aligns them; -2 when canonical ordering moved characters that stay (the
 * pure path follows that alignment). ASCII text takes bert_ascii, the rest bert_one_pass. */
int bert_normalize(int flags, const uint32_t *in, size_t n, CpBuf *tmp, CpBuf *out, CpBuf *align) {
    uint32_t any = 0;
    for (size_t i = 0; i < n; i++)
        any |= in[i];
    if (any < 0x80)
        return bert_ascii(flags, in, n, out, align);
    pthread_once(&bert_ascii_once, bert_ascii_build);
    uint32_t touch = 0; /* properties that make pass 1 rewrite a character */
    if (flags & BERT_CLEAN)
        touch |= N_BERT_CONTROL | N_BERT_SPACE;
    if (flags & BERT_CHINESE)
        touch |= N_BERT_CJK;
    if (flags & BERT_STRIP)
        touch |= N_NFD | N_NONSTARTER;
    return bert_one_pass(flags, in, n, touch, tmp, out, align ? &align[1] : NULL);
}

/* ---- NFC ------------------------------------------------------------------------------------ */

/* The composite of a starter and the character after it, or 0 (Hangul by formula). */
static uint32_t compose_pair(uint32_t a, uint32_t b) {
    if (a - 0x1100 < 19 && b - 0x1161 < 21)
        return 0xAC00 + ((a - 0x1100) * 21 + (b - 0x1161)) * 28;
    if (a - 0xAC00 < 11172 && (a - 0xAC00) % 28 == 0 && b - 0x11A8 < 27)
        return a + (b - 0x11A7);
    uint64_t key = (uint64_t)a << 21 | b;
    size_t lo = 0, hi = N_COMPOSE_COUNT;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (n_compose_keys[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < N_COMPOSE_COUNT && n_compose_keys[lo] == key ? n_compose_values[lo] : 0;
}

static int nfc_append(const uint32_t *in, size_t n, CpBuf *tmp, CpBuf *out);

/* BMP characters with a decomposition that NFC gives back as they are, wherever they stand
 * among other such characters and characters without one of NFD, NONSTARTER, COMPOSES: those
 * whose decomposition starts with a starter that composes with nothing before it, and composes
 * back to the character alone (precomposed Latin, kana with dakuten, every Hangul syllable). Each
 * decomposition then starts a new composition and ends as it was, so text made of them is its
 * own NFC, which Japanese and Korean text mostly is. Built on first use; a bit left unset only
 * costs the full pass. */
static uint8_t nfc_kept[0x10000 / 8];
static pthread_once_t nfc_kept_once = PTHREAD_ONCE_INIT;

static void nfc_kept_build(void) {
    CpBuf tmp = {0}, out = {0};
    for (size_t k = 0; k < N_NFD_COUNT; k++) {
        uint32_t c = n_nfd_keys[k];
        const uint32_t *d = n_nfd_pool + n_nfd_offsets[k];
        size_t len = n_nfd_offsets[k + 1] - n_nfd_offsets[k];
        if (c >= 0x10000 || !len || (nprops(d[0]) & (N_COMPOSES | N_NONSTARTER)))
            continue;
        out.n = 0;
        if (nfc_append(d, len, &tmp, &out) == 0 && out.n == 1 && out.v[0] == c)
            nfc_kept[c >> 3] |= (uint8_t)(1u << (c & 7));
    }
    free(tmp.v);
    free(out.v);
}

/* Whether NFC keeps c as it is wherever it stands among such characters: ASCII, characters of
 * no decomposition that are starters composing with nothing before them, and the nfc_kept ones.
 * Nothing after one composes or reorders with anything before it, so text can be normalized in
 * pieces cut before them. */
static inline int nfc_stays(uint32_t c, int *kept_built) {
    if (c < 0x80)
        return 1;
    uint32_t p = nprops(c) & (N_NFD | N_NONSTARTER | N_COMPOSES);
    if (!p)
        return 1;
    if (p != N_NFD || c >= 0x10000)
        return 0;
    if (!*kept_built) {
        pthread_once(&nfc_kept_once, nfc_kept_build);
        *kept_built = 1;
    }
    return nfc_kept[c >> 3] >> (c & 7) & 1;
}

/* The first character of in[0..n) NFC may change (n when there is none). */
static size_t nfc_first_change(const uint32_t *in, size_t n) {
    /* ASCII, which NFC never changes, without a table lookup */
    size_t first = ascii_blocks(in, n);
    int kept_built = 0;
    while (first < n && nfc_stays(in[first], &kept_built))
        first++;
    return first;
}

/* Canonical decomposition, canonical ordering, canonical composition, with HF's tables. Only the
 * pieces that may change go through them: from the character before one that may change (it can
 * compose with it) to the next character NFC keeps; the text between pieces is copied. One
 * Arabic line with its marks no longer sends the whole text after it through the full pass. */
int nfc_normalize(const uint32_t *in, size_t n, CpBuf *tmp, CpBuf *out) {
    out->n = 0;
    size_t first = nfc_first_change(in, n);
    if (first == n)
        return 1;
    int kept_built = 0;
    for (size_t done = 0; first < n;) {
        size_t from = first ? first - 1 : 0, end = first + 1;
        while (end < n && !nfc_stays(in[end], &kept_built))
            end++;
        if (cps_extend(out, in + done, from - done) < 0 || nfc_append(in + from, end - from, tmp, out) < 0)
            return -1;
        done = end;
        first = end + nfc_first_change(in + end, n - end);
        if (first == n && cps_extend(out, in + done, n - done) < 0)
            return -1;
    }
    return 0;
}

/* The NFC of in[0..n) after out's characters */
static int nfc_append(const uint32_t *in, size_t n, CpBuf *tmp, CpBuf *out) {
    tmp->n = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t p = nprops(in[i]);
        if ((p & N_NFD ? PUSH_NFD(tmp, in[i]) : cps_push(tmp, in[i])) < 0)
            return -1;
    }
    uint32_t *v = tmp->v;
    size_t len = tmp->n;
    if (canonical_order(v, len) < 0)
        return -1;
    /* compose in place: c joins the last starter unless a character between them has class 0
     * or one at least c's (kept characters after a starter are in ascending class order) */
    size_t w = 0, starter = 0;
    int has_starter = 0;
    unsigned last = 0;
    for (size_t r = 0; r < len; r++) {
        uint32_t c = v[r], p = nprops(c);
        unsigned cc = ccc(c, p);
        if (has_starter && (p & N_COMPOSES) && (w == starter + 1 || last < cc)) {
            uint32_t composite = compose_pair(v[starter], c);
            if (composite) {
                v[starter] = composite;
                continue;
            }
        }
        if (!cc) {
            has_starter = 1;
            starter = w;
        }
        last = cc;
        v[w++] = c;
    }
    return cps_extend(out, v, w);
}

/* HF's transform of the alignment: the change each output character has in al (changes_push's,
 * nfc_aligned's) becomes the input character it is aligned to (an inserted one shares the
 * previous input character's, a replacing one takes the next and skips those it removes),
 * through in_align; *used gets how far into the n input characters it went. -2 where HF's
 * alignment is no input character. */
static int changes_apply(CpBuf *al, size_t n, const uint32_t *in_align, size_t *used) {
    size_t off = 0;
    for (size_t j = 0; j < al->n; j++) {
        int32_t change = (int32_t)al->v[j];
        size_t idx;
        if (change > 0) {
            if (off < 1)
                return -2;
            idx = off - 1;
        } else {
            if (off >= n)
                return -2;
            idx = off;
            off += 1 + (size_t)-(int64_t)change;
        }
        al->v[j] = in_align ? in_align[idx] : (uint32_t)idx;
    }
    *used = off;
    return 0;
}

/* nfc_normalize with, in align, each output character's input character as HF aligns its NFC
 * (unicode-normalization-alignments; normalizers.py _UnicodeForm._changes the reference): each
 * character decomposed, its first part replacing it and the others inserted after it; marks put
 * in canonical order, each keeping that role; each composed onto its starter, the composite
 * charging one input character more. Returns 1 when the text stays as it is (out and align
 * untouched), 0, -1 when out of memory, -2 when HF gives a character no input character (the
 * pure path answers). */
int nfc_aligned(const uint32_t *in, size_t n, CpBuf *tmp, CpBuf *out, CpBuf *align) {
    size_t first = nfc_first_change(in, n);
    if (first == n)
        return 1;
    size_t from = first ? first - 1 : 0;
    tmp->n = 0;
    for (size_t i = from; i < n; i++) {
        uint32_t c = in[i], p = nprops(c);
        size_t mark = tmp->n;
        if ((p & N_NFD ? PUSH_NFD(tmp, c) : cps_push(tmp, c)) < 0)
            return -1;
        for (size_t k = mark + 1; k < tmp->n; k++)
            tmp->v[k] |= 1u << CP_BITS; /* inserted */
    }
    if (canonical_order(tmp->v, tmp->n) < 0)
        return -1;
    /* composed as the crate's Recompositions emits it: a starter with everything composed onto
     * it, then the marks that did not compose; align holds each character's change for now */
    out->n = align->n = 0;
    if (cps_extend(out, in, from) < 0)
        return -1;
    for (size_t i = 0; i < from; i++)
        if (cps_push(align, 0) < 0)
            return -1;
    size_t starter = 0;
    int has_starter = 0, held = 0;
    unsigned last = 0;
    for (size_t r = 0; r < tmp->n; r++) {
        uint32_t c = tmp->v[r] & CP_MASK, p = nprops(c), change = tmp->v[r] >> CP_BITS;
        unsigned cc = ccc(c, p);
        if (has_starter && (p & N_COMPOSES) && !(held && last >= cc)) {
            uint32_t composite = compose_pair(out->v[starter], c);
            if (composite) {
                out->v[starter] = composite;
                align->v[starter] = (uint32_t)((int32_t)align->v[starter] + (int32_t)change - 1);
                continue;
            }
        }
        if (!cc) {
            has_starter = 1;
            held = 0;
            starter = out->n;
        } else if (has_starter) {
            held = 1;
            last = cc;
        }
        if (cps_push(out, c) < 0 || cps_push(align, change) < 0)
            return -1;
    }
    size_t used;
    int err = changes_apply(align, n, NULL, &used);
    return err ? err : used == n ? 0 : -2;
}

/* ---- grapheme clusters --------------------------------------------------------------------- */

enum Gcb { G_OTHER, G_CR, G_LF, G_CONTROL, G_EXTEND, G_ZWJ, G_RI, G_PREPEND, G_SPACING_MARK,
           G_L, G_V, G_T, G_LV, G_LVT };
enum Incb { I_NONE, I_CONSONANT, I_EXTEND, I_LINKER };

#define GCB(p) ((p) & 0xF)
#define INCB(p) (((p) >> N_INCB_SHIFT) & 3)

/* The end of the extended grapheme cluster starting at s[i] (UAX #29, GB3-GB13). */
size_t grapheme_end(const uint32_t *s, size_t n, size_t i) {
    uint32_t p = nprops(s[i]);
    unsigned a = GCB(p);
    int ri = a == G_RI;                              /* regional indicators in a row */
    int emoji = (p & N_EXTPICT) != 0;                /* ExtPict Extend* so far (GB11) */
    int emoji_zwj = 0;                               /* ... followed by ZWJ */
    int conjunct = INCB(p) == I_CONSONANT;           /* Consonant [Extend Linker]* (GB9c) */
    int linked = 0;                                  /* ... with a Linker among them */
    for (size_t j = i + 1; j < n; j++) {
        uint32_t q = nprops(s[j]);
        unsigned b = GCB(q);
        int join;
        if (a == G_CR && b == G_LF)
            join = 1;
        else if (a == G_CR || a == G_LF || a == G_CONTROL || b == G_CR || b == G_LF || b == G_CONTROL)
            join = 0;
        else if (a == G_L && (b == G_L || b == G_V || b == G_LV || b == G_LVT))
            join = 1;
        else if ((a == G_LV || a == G_V) && (b == G_V || b == G_T))
            join = 1;
        else if ((a == G_LVT || a == G_T) && b == G_T)
            join = 1;
        else if (b == G_EXTEND || b == G_ZWJ || b == G_SPACING_MARK || a == G_PREPEND)
            join = 1;
        else if (INCB(q) == I_CONSONANT && linked)
            join = 1;
        else if (emoji_zwj && (q & N_EXTPICT))
            join = 1;
        else
            join = a == G_RI && b == G_RI && (ri & 1);
        if (!join)
            return j;
        ri = b == G_RI ? ri + 1 : 0;
        emoji_zwj = emoji && b == G_ZWJ;
        emoji = (q & N_EXTPICT) || (emoji && b == G_EXTEND);
        unsigned ic = INCB(q);
        if (ic == I_CONSONANT) {
            conjunct = 1;
            linked = 0;
        } else if (conjunct && ic == I_LINKER) {
            linked = 1;
        } else if (!(conjunct && ic == I_EXTEND)) {
            conjunct = linked = 0;
        }
        a = b;
    }
    return n;
}

/* ---- NFKD, StripAccents, Lowercase, runs of a character -------------------------------------- */

/* NFKD with HF's tables: each character's compatibility decomposition (n_nfkd holds those that
 * are not its canonical one), then canonical ordering. With chg, each output character's change as HF's NFKD stream has it (the first part
 * of a decomposition replacing its character, the others inserted; marks keep theirs as they
 * move), for changes_apply. Returns 1 when the text stays as it is (out untouched). */
static int nfkd_run(const uint32_t *in, size_t n, CpBuf *out, CpBuf *chg) {
    size_t first = 0;
    while (first < n && !(nprops(in[first]) & (N_NFKD | N_NFD | N_NONSTARTER)))
        first++;
    if (first == n)
        return 1;
    out->n = 0;
    if (cps_extend(out, in, first) < 0)
        return -1;
    for (size_t i = first; i < n; i++) {
        uint32_t c = in[i], p = nprops(c);
        size_t mark = out->n;
        if ((p & N_NFKD ? PUSH_NFKD(out, c) : p & N_NFD ? PUSH_NFD(out, c) : cps_push(out, c)) < 0)
            return -1;
        for (size_t k = mark + 1; chg && k < out->n; k++)
            out->v[k] |= 1u << CP_BITS; /* inserted */
    }
    int moved = canonical_order(out->v + first, out->n - first);
    if (moved < 0)
        return -1;
    if (!chg)
        return 0;
    chg->n = 0;
    if (cps_grow(chg, out->n) < 0)
        return -1;
    for (size_t k = 0; k < out->n; k++) {
        chg->v[chg->n++] = out->v[k] >> CP_BITS;
        out->v[k] &= CP_MASK;
    }
    return 0;
}

/* Whether StripAccents drops c: a combining mark of HF's tables. */
static int strip_mark(uint32_t c) {
    if (c < 0x300)
        return 0;
    size_t lo = 0, hi = N_MARK_COUNT;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c > n_mark_ranges[2 * mid + 1])
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < N_MARK_COUNT && c >= n_mark_ranges[2 * lo];
}

/* Whether NORM_RUNS replaces runs of c: c is pat[0], or with no pattern any \s character. */
static inline int runs_member(const NormOp *op, uint32_t c) {
    return op->npat ? c == op->pat[0] : regex_white_space(c);
}

/* in[from..to) onto out; with align, each character's alignment in_align's (NULL: its own). */
static int copy_aligned(const uint32_t *in, const uint32_t *in_align, size_t from, size_t to, CpBuf *out,
                        CpBuf *align) {
    if (cps_extend(out, in + from, to - from) < 0)
        return -1;
    if (!align)
        return 0;
    if (in_align)
        return cps_extend(align, in_align + from, to - from);
    if (cps_grow(align, to - from) < 0)
        return -1;
    for (size_t i = from; i < to; i++)
        align->v[align->n++] = (uint32_t)i;
    return 0;
}

/* The end of the characters from in[i] on that op (Lowercase, StripAccents, NORM_RUNS) leaves
 * as they are: no lowercase mapping, no mark, no run long enough. */
static size_t kept_end(const NormOp *op, const uint32_t *in, size_t n, size_t i) {
    if (op->kind == NORM_LOWERCASE) {
        while (i < n && !(nprops(in[i]) & N_LOWER))
            i++;
        return i;
    }
    if (op->kind == NORM_STRIP_ACCENTS) {
        while (i < n && !strip_mark(in[i]))
            i++;
        return i;
    }
    while (i < n) {
        size_t run = 0;
        while (i + run < n && runs_member(op, in[i + run]))
            run++;
        if (run && run >= (size_t)op->flags)
            return i;
        i += run ? run : 1;
    }
    return n;
}

/* Lowercase (each character's full lowercase mapping), StripAccents (marks dropped) and
 * NORM_RUNS (each run of at least flags characters pat[0] replaced by rep, as HF's Replace of
 * the regex "c{m,}"; without a pattern, each run of \s characters, as HF's "\s+") into out;
 * with align, each output character's input character through in_align (HF: a lowercase
 * mapping's characters all its character's, a run's replacement its last character's). The
 * characters op leaves go a stretch at a time; 1 when it leaves them all (out untouched). */
static int per_char(const NormOp *op, const uint32_t *in, size_t n, const uint32_t *in_align, CpBuf *out,
                    CpBuf *align) {
    size_t i = kept_end(op, in, n, 0);
    if (i == n)
        return 1;
    out->n = 0;
    if (align)
        align->n = 0;
    if (copy_aligned(in, in_align, 0, i, out, align) < 0)
        return -1;
    while (i < n) {
        uint32_t c = in[i];
        size_t mark = out->n, used = 1;
        int err = 0;
        if (op->kind == NORM_LOWERCASE) {
            err = PUSH_LOWER(out, c);
        } else if (op->kind == NORM_RUNS) {
            while (i + used < n && runs_member(op, in[i + used]))
                used++;
            err = cps_extend(out, op->rep, op->nrep);
        }
        size_t at = i + used - 1, end = kept_end(op, in, n, i + used);
        if (err < 0 || align_fill(align, mark, out->n, in_align ? in_align[at] : (uint32_t)at) < 0 ||
            copy_aligned(in, in_align, i + used, end, out, align) < 0)
            return -1;
        i = end;
    }
    return 0;
}

/* ---- Precompiled ----------------------------------------------------------------------------- */

static inline size_t unit_offset(uint32_t unit) { return (size_t)(unit >> 10) << ((unit & 0x200) >> 6); }

/* The replacement offset of the shortest trie key that key[0..len) starts with, or -1. */
static int64_t charsmap_lookup(const Charsmap *m, const uint8_t *key, size_t len) {
    const uint32_t *units = m->units;
    size_t node = unit_offset(units[0]);
    for (size_t k = 0; k < len; k++) {
        uint8_t byte = key[k];
        if (byte == 0)
            return -1;
        node ^= byte;
        if (node >= m->nunits)
            return -1;
        uint32_t unit = units[node];
        if ((unit & 0x800000FFu) != byte)
            return -1;
        node ^= unit_offset(unit);
        if (unit & 0x100) {
            if (node >= m->nunits)
                return -1;
            return units[node] & 0x7FFFFFFF;
        }
    }
    return -1;
}

/* Append the NUL-terminated replacement at byte `start`; -2 if it starts inside a character
 * (the pure path raises FormatError there). */
static int push_replacement(const Charsmap *m, size_t start, CpBuf *out) {
    const uint8_t *r = m->repl;
    size_t end = start;
    if (start < m->nrepl && (r[start] & 0xC0) == 0x80)
        return -2;
    while (end < m->nrepl && r[end])
        end++;
    if (cps_grow(out, end > start ? end - start : 0) < 0)
        return -1;
    /* the whole blob is valid UTF-8 (checked when the normalizer was built) */
    for (size_t k = start; k < end;)
        k += utf8_get(r + k, end - k, &out->v[out->n++]);
    return 0;
}

void charsmap_init(Charsmap *m) {
    for (uint8_t c = 0; c < 0x80; c++)
        m->ascii[c] = charsmap_lookup(m, &c, 1);
    m->memo = m->nrepl < INT32_MAX - 2 ? calloc(0x10000, sizeof *m->memo) : NULL;
}

void charsmap_free(Charsmap *m) {
    free((void *)m->memo);
    m->memo = NULL;
}

/* The lookup of one character alone; CJK text asks for the same few thousand again and again. */
static inline int64_t char_lookup(const Charsmap *m, uint32_t c) {
    int32_t known = c < 0x10000 && m->memo ? atomic_load_explicit(&m->memo[c], memory_order_relaxed) : 0;
    if (known)
        return (int64_t)known - 2;
    uint8_t buf[4];
    int64_t hit = charsmap_lookup(m, buf, utf8_encode(&c, 1, buf));
    if (c < 0x10000 && m->memo)
        atomic_store_explicit(&m->memo[c], (int32_t)(hit + 2), memory_order_relaxed);
    return hit;
}

/* HF's changes (NormalizedString::transform) for the `new` characters last pushed in place of
 * `old` by Precompiled's replace(): 0 each, the last new - old of them 1 (inserted); fewer new
 * than old charge the difference to the last character so far, which may be an earlier one. */
static int changes_push(CpBuf *chg, size_t old, size_t new) {
    if (!chg)
        return 0;
    if (cps_grow(chg, new) < 0)
        return -1;
    for (size_t k = 0; k < new; k++)
        chg->v[chg->n++] = 0;
    if (new > old) {
        for (size_t k = chg->n - (new - old); k < chg->n; k++)
            chg->v[k] = 1;
    } else if (new < old && chg->n) {
        chg->v[chg->n - 1] = (uint32_t)((int32_t)chg->v[chg->n - 1] - (int32_t)(old - new));
    }
    return 0;
}

/* One lookup's result for in[0..old): its replacement, else the character (old is 1); *same
 * cleared where the replacement's length is not old's. */
static int precompiled_push(const Charsmap *m, int64_t hit, const uint32_t *in, size_t old, CpBuf *out, CpBuf *chg,
                            int *same) {
    /* a character the map leaves as it is (most text but ASCII's), a change of 0 */
    if (hit < 0 && old == 1)
        return cps_push(out, in[0]) < 0 || (chg && cps_push(chg, 0) < 0) ? -1 : 0;
    size_t mark = out->n;
    int r = hit >= 0 ? push_replacement(m, (size_t)hit, out) : cps_push(out, in[0]);
    *same &= out->n - mark == old;
    return r ? r : changes_push(chg, old, out->n - mark);
}

/* HF's spm_precompiled: per grapheme cluster, a cluster under 6 UTF-8 bytes that starts with a
 * key becomes that key's replacement; otherwise each character is looked up alone. With chg,
 * each output character's change as int32 (changes_push). *same: whether each replacement has
 * the length of what it replaced (every change 0: each character keeps its place, as the
 * newlines and tabs ASCII text has become spaces). */
static int precompiled_run(const Charsmap *m, const uint32_t *in, size_t n, CpBuf *out, CpBuf *chg, int *same) {
    *same = 1;
    out->n = 0;
    if (chg)
        chg->n = 0;
    uint8_t buf[8];
    for (size_t i = 0; i < n;) {
        uint32_t c = in[i];
        /* a stretch of such characters that the map leaves as they are (most text) at once */
        size_t j = i;
        while (j < n && in[j] < 0x80 && m->ascii[in[j]] < 0 &&
               (j + 1 == n || (in[j + 1] < 0x80 && !(in[j] == '\r' && in[j + 1] == '\n'))))
            j++;
        if (j > i) {
            if (cps_extend(out, in + i, j - i) < 0 || (chg && cps_grow(chg, j - i) < 0))
                return -1;
            if (chg) {
                memset(chg->v + chg->n, 0, (j - i) * sizeof *chg->v);
                chg->n += j - i;
            }
            i = j;
            continue;
        }
        /* an ASCII character before another one is a cluster of its own, but for CR LF */
        if (c < 0x80 && (i + 1 == n || (in[i + 1] < 0x80 && !(c == '\r' && in[i + 1] == '\n')))) {
            int r = precompiled_push(m, m->ascii[c], in + i, 1, out, chg, same);
            if (r < 0)
                return r;
            i++;
            continue;
        }
        /* a character of no grapheme class of its own is a cluster alone unless the next one
         * extends it (GB9, GB9a; the others need a class, or a run before): most letters of
         * most scripts, told without grapheme_end's walk */
        unsigned next = i + 1 < n ? GCB(nprops(in[i + 1])) : G_OTHER;
        size_t e = GCB(nprops(c)) == G_OTHER && next != G_EXTEND && next != G_ZWJ && next != G_SPACING_MARK
                       ? i + 1
                       : grapheme_end(in, n, i),
               bytes = 0;
        if (e - i == 1) {
            /* a one-character cluster: its own lookup, as the cluster's below would be */
            int r = precompiled_push(m, char_lookup(m, c), in + i, 1, out, chg, same);
            if (r < 0)
                return r;
            i = e;
            continue;
        }
        for (size_t k = i; k < e && bytes < 6; k++)
            bytes += in[k] < 0x80 ? 1 : in[k] < 0x800 ? 2 : in[k] < 0x10000 ? 3 : 4;
        if (bytes < 6) {
            utf8_encode(in + i, e - i, buf);
            int64_t hit = charsmap_lookup(m, buf, bytes);
            if (hit >= 0) {
                int r = precompiled_push(m, hit, in + i, e - i, out, chg, same);
                if (r < 0)
                    return r;
                i = e;
                continue;
            }
        }
        for (; i < e; i++) {
            int r = precompiled_push(m, char_lookup(m, in[i]), in + i, 1, out, chg, same);
            if (r < 0)
                return r;
        }
    }
    return 0;
}

int precompiled_normalize(const Charsmap *m, const uint32_t *in, size_t n, CpBuf *out) {
    int same;
    return precompiled_run(m, in, n, out, NULL, &same);
}

static inline int cps_eq(const uint32_t *a, const uint32_t *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

/* str.replace on code points (every non-overlapping occurrence, left to right) onto out; with
 * align, each output character's input character through in_align (NULL: its own): a match's
 * content takes the alignment of its last character, as HF's replace; the text between matches
 * is copied a stretch at a time. 1 when the pattern does not occur (out untouched), as most text
 * holds none of a normalizer's quotes. */
static int replace_aligned(const NormOp *op, const uint32_t *in, size_t n, const uint32_t *in_align, CpBuf *out,
                           CpBuf *align) {
    size_t done = 0;
    for (size_t i = 0; op->npat <= n && i <= n - op->npat;) {
        if (in[i] != op->pat[0] || !cps_eq(in + i + 1, op->pat + 1, op->npat - 1)) {
            i++;
            continue;
        }
        size_t last = i + op->npat - 1, mark = out->n + (i - done);
        if (copy_aligned(in, in_align, done, i, out, align) < 0 || cps_extend(out, op->rep, op->nrep) < 0 ||
            align_fill(align, mark, out->n, in_align ? in_align[last] : (uint32_t)last) < 0)
            return -1;
        i += op->npat;
        done = i;
    }
    if (!done)
        return 1;
    return copy_aligned(in, in_align, done, n, out, align);
}

/* Whether op replaces one character by one (Gemma's and SentencePiece's space): a plain map */
static inline int replace_one(const NormOp *op) { return op->kind == NORM_REPLACE && op->npat == 1 && op->nrep == 1; }

/* in[0..n) onto out's end through replace_one's map (out has the room) */
static void map_one(const NormOp *op, const uint32_t *in, size_t n, CpBuf *out) {
    uint32_t from = op->pat[0], to = op->rep[0], *o = out->v + out->n;
    for (size_t i = 0; i < n; i++)
        o[i] = in[i] == from ? to : in[i];
    out->n += n;
}

/* replace_aligned without alignments, the text copied where the pattern does not occur. */
static int replace_literal(const NormOp *op, const uint32_t *in, size_t n, CpBuf *out) {
    out->n = 0;
    if (replace_one(op)) {
        if (cps_grow(out, n) < 0)
            return -1;
        map_one(op, in, n, out);
        return 0;
    }
    int err = replace_aligned(op, in, n, NULL, out, NULL);
    return err == 1 ? cps_extend(out, in, n) : err;
}

int normalize_aligned(const NormOp *ops, size_t nops, const uint32_t *in, size_t n, CpBuf bufs[3], CpBuf aligns[2],
                      const uint32_t **res, size_t *res_n, const uint32_t **res_align) {
    for (size_t k = 0; k < nops; k++)
        if (ops[k].kind == NORM_BERT || ((ops[k].kind == NORM_REPLACE || ops[k].kind == NORM_RUNS) && !ops[k].nrep))
            return -3;
    const uint32_t *cur = in, *cur_align = NULL; /* NULL: each character is its own */
    for (size_t k = 0; k < nops; k++) {
        const NormOp *op = &ops[k];
        /* the alignments alternate apart from the texts: a step that keeps each character's
         * alignment keeps the array (or none) as it is */
        CpBuf *dst = &bufs[cur == bufs[0].v ? 1 : 0], *dal = &aligns[cur_align == aligns[0].v ? 1 : 0];
        if (n == 0) /* as normalize_ops: both leave empty text alone */
            continue;
        dst->n = dal->n = 0;
        if (op->kind == NORM_NFC) {
            int err = nfc_aligned(cur, n, &bufs[2], dst, dal);
            if (err == 1)
                continue; /* the text as it is */
            if (err)
                return err;
            /* each output character's input character, through the steps before */
            for (size_t i = 0; cur_align && i < dal->n; i++)
                dal->v[i] = cur_align[dal->v[i]];
            cur = dst->v;
            cur_align = dal->v;
            n = dst->n;
            continue;
        }
        if (op->kind == NORM_PRECOMPILED || op->kind == NORM_NFKD) {
            size_t used = n;
            int same = 0, err = 0;
            err = op->kind == NORM_NFKD ? nfkd_run(cur, n, dst, dal)
                                        : precompiled_run(op->map, cur, n, dst, dal, &same);
            if (!err && same) {
                /* each character kept its place: so does the alignment */
                cur = dst->v;
                continue;
            }
            if (err == 1)
                continue; /* NFKD left the text as it is */
            if (!err)
                err = changes_apply(dal, n, cur_align, &used);
            if (err)
                return err;
            if (op->kind == NORM_NFKD && used != n)
                return -2;
            cur = dst->v;
            cur_align = dal->v;
            n = dst->n;
            continue;
        }
        if (op->kind == NORM_LOWERCASE || op->kind == NORM_STRIP_ACCENTS || op->kind == NORM_RUNS) {
            int err = per_char(op, cur, n, cur_align, dst, dal);
            if (err == 1)
                continue; /* the text as it is */
            if (err)
                return err;
            cur = dst->v;
            cur_align = dal->v;
            n = dst->n;
            continue;
        }
        /* HF's prepend: the first added character takes over the first character's alignment,
         * the others and that character come after it, all from the first input character;
         * the text follows as it is */
        if (op->kind == NORM_PREPEND) {
            if (cps_extend(dst, op->rep, op->nrep) < 0 || align_fill(dal, 0, op->nrep, cur_align ? cur_align[0] : 0) < 0 ||
                cps_extend(dst, cur, n) < 0 || cps_grow(dal, n) < 0)
                return -1;
            for (size_t i = 0; i < n; i++)
                dal->v[op->nrep + i] = cur_align ? cur_align[i] : (uint32_t)i;
            dal->n = op->nrep + n;
            cur = dst->v;
            cur_align = dal->v;
            n = dst->n;
            continue;
        }
        if (replace_one(op)) {
            /* one character for one (SentencePiece's space): a map, each keeping its alignment */
            if (replace_literal(op, cur, n, dst) < 0)
                return -1;
            cur = dst->v;
            continue;
        }
        int err = replace_aligned(op, cur, n, cur_align, dst, dal);
        if (err == 1)
            continue; /* no match: the text as it is */
        if (err)
            return err;
        cur = dst->v;
        cur_align = dal->v;
        n = dst->n;
    }
    *res = cur;
    *res_n = n;
    *res_align = cur_align;
    return 0;
}

int normalize_shifted(const NormOp *ops, size_t nops, const uint32_t *in, size_t n, CpBuf bufs[3],
                      const uint32_t **res, size_t *res_n, size_t *shift) {
    size_t added = 0;
    for (size_t k = 0; k < nops; k++) {
        if (ops[k].kind == NORM_PREPEND)
            added += ops[k].nrep;
        else if (!replace_one(&ops[k]))
            return -3;
    }
    /* both leave empty text alone: nothing is prepended to it */
    *shift = n ? added : 0;
    return normalize_ops(ops, nops, in, n, bufs, res, res_n);
}

int normalize_ops(const NormOp *ops, size_t nops, const uint32_t *in, size_t n, CpBuf bufs[3],
                  const uint32_t **res, size_t *res_n) {
    const uint32_t *cur = in;
    for (size_t k = 0; k < nops; k++) {
        const NormOp *op = &ops[k];
        CpBuf *dst = cur == bufs[0].v ? &bufs[1] : &bufs[0], *tmp = &bufs[2];
        int err = 0;
        /* both the pure Replace and Prepend leave empty text alone */
        if (n == 0 && (op->kind == NORM_REPLACE || op->kind == NORM_PREPEND))
            continue;
        switch (op->kind) {
        case NORM_BERT:
            err = bert_normalize(op->flags, cur, n, tmp, dst, NULL);
            break;
        case NORM_NFC:
            if ((err = nfc_normalize(cur, n, tmp, dst)) == 1)
                continue; /* the text as it is */
            break;
        case NORM_PRECOMPILED:
            err = precompiled_normalize(op->map, cur, n, dst);
            break;
        case NORM_REPLACE:
            err = replace_literal(op, cur, n, dst);
            break;
        case NORM_PREPEND:
            dst->n = 0;
            if (k + 1 < nops && replace_one(&ops[k + 1])) {
                /* SentencePiece's Prepend and Replace of the space, in one pass over the text
                 * rather than a copy and a map */
                if ((err = cps_grow(dst, op->nrep + n)) == 0) {
                    map_one(&ops[k + 1], op->rep, op->nrep, dst);
                    map_one(&ops[k + 1], cur, n, dst);
                }
                k++;
                break;
            }
            err = cps_extend(dst, op->rep, op->nrep) < 0 || cps_extend(dst, cur, n) < 0 ? -1 : 0;
            break;
        case NORM_NFKD:
            if ((err = nfkd_run(cur, n, dst, NULL)) == 1)
                continue; /* the text as it is */
            break;
        case NORM_LOWERCASE:
        case NORM_STRIP_ACCENTS:
        case NORM_RUNS:
            if ((err = per_char(op, cur, n, NULL, dst, NULL)) == 1)
                continue; /* the text as it is */
            break;
        }
        if (err)
            return err;
        cur = dst->v; /* NULL only for an empty result */
        n = dst->n;
    }
    *res = cur ? cur : in;
    *res_n = n;
    return 0;
}

/* ---- normalizing a long text in parts --------------------------------------------------------- */

/* The one character a Precompiled replacement at byte `start` is, or -1. */
static int64_t one_char_replacement(const Charsmap *m, int64_t start) {
    const uint8_t *r = m->repl;
    size_t at = (size_t)start;
    if (at >= m->nrepl || !r[at] || (r[at] & 0xC0) == 0x80)
        return -1;
    uint32_t c;
    size_t len = utf8_get(r + at, m->nrepl - at, &c);
    return at + len >= m->nrepl || !r[at + len] ? (int64_t)c : -1;
}

int normalize_cut(const NormOp *ops, size_t nops, uint32_t *t, size_t margin) {
    /* t[lo..hi): the characters whose image is known so far */
    size_t lo = 0, hi = 2 * margin + 1;
    for (size_t k = 0; k < nops; k++) {
        const NormOp *op = &ops[k];
        switch (op->kind) {
        case NORM_PREPEND: /* only before the text's first character */
            break;
        case NORM_REPLACE:
            /* no match can overlap characters that are none of the pattern's */
            for (size_t i = lo; i < hi; i++)
                for (size_t j = 0; j < op->npat; j++)
                    if (t[i] == op->pat[j]) {
                        if (op->npat != 1 || op->nrep != 1)
                            return 0;
                        t[i] = op->rep[0];
                    }
            break;
        case NORM_NFC:
            /* starters that compose with nothing before them and do not decompose: UAX #15's
             * boundaries before each, each its own image but the last, which may compose with
             * what follows */
            for (size_t i = lo; i < hi; i++)
                if (nprops(t[i]) & (N_NFD | N_NONSTARTER | N_COMPOSES))
                    return 0;
            hi--;
            break;
        case NORM_BERT:
            /* one character for one, none reordered across (strip_accents leaves starters) */
            for (size_t i = lo; i < hi; i++) {
                uint32_t p = nprops(t[i]);
                if (((op->flags & BERT_CLEAN) && (p & N_BERT_CONTROL)) || ((op->flags & BERT_CHINESE) && (p & N_BERT_CJK)) ||
                    ((op->flags & BERT_STRIP) && (p & (N_NFD | N_NONSTARTER | N_BERT_MARK))))
                    return 0;
                if ((op->flags & BERT_CLEAN) && (p & N_BERT_SPACE)) {
                    t[i] = ' ';
                } else if ((op->flags & BERT_LOWER) && (p & N_LOWER)) {
                    size_t e = (size_t)find_key(n_lower_keys, N_LOWER_COUNT, t[i]);
                    if (n_lower_offsets[e + 1] - n_lower_offsets[e] != 1)
                        return 0;
                    t[i] = n_lower_pool[n_lower_offsets[e]];
                }
            }
            break;
        case NORM_PRECOMPILED:
            /* ASCII before ASCII is a grapheme cluster of its own (but CR LF) and is looked up
             * alone; the first and last may belong to clusters that reach beyond */
            for (size_t i = lo; i < hi; i++)
                if (t[i] >= 0x80 || (i + 1 < hi && t[i] == '\r' && t[i + 1] == '\n'))
                    return 0;
            for (size_t i = lo + 1; i + 1 < hi; i++) {
                int64_t hit = op->map->ascii[t[i]], c = hit >= 0 ? one_char_replacement(op->map, hit) : (int64_t)t[i];
                if (c < 0)
                    return 0;
                t[i] = (uint32_t)c;
            }
            lo++;
            hi--;
            break;
        default:
            return 0;
        }
    }
    return lo < margin && hi > margin + 1;
}
