/* Pre-tokenization: hand-written matchers for the split patterns real tokenizers ship.
 *
 * Each matcher returns the end of the match of its pattern starting exactly at position i of
 * s[0..n), or i when the pattern does not match there. They reproduce Oniguruma's
 * backtracking semantics (first alternative that matches wins; greedy quantifiers give back
 * one character at a time), which HF runs on each piece separately: the end of the piece is
 * the end of the subject string, which matters for `\s+(?!\S)`. A split step then behaves as
 * a regex search: try at i, on failure move one character right.
 *
 * Character classes come from unicode_data.h, generated from the pure-Python pre-tokenizers,
 * so both paths agree on every code point.
 */
#include "native.h"
#include "unicode_data.h"

static inline uint32_t ucls(uint32_t c) {
    if (c < 0x80)
        return u_blocks[c]; /* block 0 is always the first stored block (gen_unicode.py) */
    if (c >= 0x110000)
        return 0;
    return u_blocks[((uint32_t)u_block_index[c >> U_BLOCK_SHIFT] << U_BLOCK_SHIFT) |
                    (c & ((1u << U_BLOCK_SHIFT) - 1))];
}

#define IS(c, mask) ((ucls(c) & (mask)) != 0)
#define L_ U_L
#define N_ U_N
#define WS_ U_WS
/* Oniguruma's [^\s\p{L}\p{N}] */
#define IS_OTHER(c) (!IS(c, L_ | N_ | WS_))
#define IS_CRLF(c) ((c) == '\r' || (c) == '\n')

uint32_t unicode_class(uint32_t c) { return ucls(c); }

int rust_white_space(uint32_t c) { return IS(c, U_RUST_WS); }

int rust_word(uint32_t c) { return IS(c, U_WORD); }

int regex_white_space(uint32_t c) { return IS(c, WS_); }

/* ASCII members of a character class, 16 characters at a time, as bytes (ascii16 for code
 * points): a byte of 0x80 or more stands for any other character */
#ifdef __SSE2__
static inline __m128i ascii16_bytes(const uint8_t *s) { return _mm_loadu_si128((const __m128i *)(const void *)s); }

/* The bytes x of b with x - first < count unsigned (as signed bytes with the top bit flipped),
 * 0xFF each; a byte of 0x80 or more is never in a range of ASCII */
static inline __m128i in_range16(__m128i b, char first, char count) {
    return _mm_cmplt_epi8(_mm_xor_si128(_mm_sub_epi8(b, _mm_set1_epi8(first)), _mm_set1_epi8((char)0x80)),
                          _mm_set1_epi8((char)(count ^ 0x80)));
}
#endif

/* o200k's letter classes */
#define UPPERISH (U_LU | U_LT | U_LM | U_LO | U_M)
#define LOWERISH (U_LL | U_LM | U_LO | U_M)

#define CH uint32_t
#define M(name) name
#include "pretok_gpt.h"
#undef CH
#undef M
#define CH uint8_t
#define M(name) name##_bytes
#include "pretok_gpt.h"
#undef CH
#undef M
/* DeepSeek-V3's three Splits. */

/* \p{N}{1,3} */
static size_t m_ds_digits(const uint32_t *s, size_t n, size_t i) {
    size_t e = i;
    while (e < n && e - i < 3 && IS(s[e], N_))
        e++;
    return e;
}

/* [\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+ */
static inline int ds_cjk(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x3040 && c <= 0x30FF);
}

static size_t m_ds_cjk(const uint32_t *s, size_t n, size_t i) {
    size_t e = i;
    while (e < n && ds_cjk(s[e]))
        e++;
    return e;
}

/* [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|
 *  ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static inline int ascii_punct(uint32_t c) {
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E);
}

static inline int ascii_alpha(uint32_t c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }

static size_t m_ds_main(const uint32_t *s, size_t n, size_t i) {
    uint32_t c = s[i];
    if (ascii_punct(c) && i + 1 < n && ascii_alpha(s[i + 1])) {
        size_t e = i + 1;
        while (e < n && ascii_alpha(s[e]))
            e++;
        return e;
    }
    uint32_t cls = ucls(c);
    if (!(cls & (L_ | U_P | U_S)) && !IS_CRLF(c) && i + 1 < n && IS(s[i + 1], L_ | U_M))
        return run(s, n, i + 1, L_ | U_M);
    if (cls & (L_ | U_M))
        return run(s, n, i, L_ | U_M);
    size_t j = (c == ' ' && i + 1 < n && IS(s[i + 1], U_P | U_S)) ? i + 1 : i;
    if (IS(s[j], U_P | U_S))
        return run_crlf(s, n, run(s, n, j, U_P | U_S));
    if (cls & WS_)
        return whitespace_tail(s, n, i, 1);
    return i;
}

/* CLIP: <\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+
 * (no alternative holds a space) */
static size_t literal_at(const uint32_t *s, size_t n, size_t i, const char *lit) {
    size_t k = 0;
    for (; lit[k]; k++)
        if (i + k >= n || s[i + k] != (uint8_t)lit[k])
            return 0;
    return i + k;
}

static size_t m_clip(const uint32_t *s, size_t n, size_t i) {
    uint32_t c = s[i];
    size_t e;
    if (c == '<' && ((e = literal_at(s, n, i, "<|startoftext|>")) || (e = literal_at(s, n, i, "<|endoftext|>"))))
        return e;
    if (c == '\'' && (e = contraction(s, n, i + 1)))
        return e;
    uint32_t cls = ucls(c);
    if (cls & L_)
        return run_letters(s, n, i);
    if (cls & N_)
        return i + 1;
    if (IS_OTHER(c))
        return run_other(s, n, i);
    return i;
}

/* HF's Whitespace: \w+|[^\w\s]+ in the Rust regex crate (its \w, White_Space for \s) */
static size_t m_words(const uint32_t *s, size_t n, size_t i) {
    uint32_t cls = ucls(s[i]);
    if (cls & U_WORD)
        return run(s, n, i, U_WORD);
    if (cls & U_RUST_WS)
        return i;
    size_t e = i + 1;
    while (e < n && !IS(s[e], U_WORD | U_RUST_WS))
        e++;
    return e;
}

typedef size_t (*Matcher)(const uint32_t *, size_t, size_t);

static const Matcher MATCHERS[] = {
    [SC_GPT2] = m_gpt2, [SC_CL100K] = m_cl100k, [SC_QWEN2] = m_qwen2, [SC_O200K] = m_o200k,
    [SC_DS_DIGITS] = m_ds_digits, [SC_DS_CJK] = m_ds_cjk, [SC_DS_MAIN] = m_ds_main, [SC_CLIP] = m_clip,
    [SC_WORDS] = m_words,
};

/* The cut of a pre-tokenizer whose one step that changes pieces is a GPT-family split keeping
 * its matches and the gaps between (Isolated, as ByteLevel's own regex does) or the matches alone
 * (Removed and inverted, as GPT-4o's: the same pieces, as these patterns match at every
 * character), or BERT's or WhitespaceSplit's character split (ASCII_BERT, ASCII_WHITESPACE):
 * ascii_split then cuts ASCII text as pretokenize does. A ByteLevel step that adds no space and
 * maps nothing changes no piece. A Metaspace step after BERT's or WhitespaceSplit's cut (T5's,
 * ALBERT's) meets pieces without a space, and with a replacement outside ASCII none starting
 * with it: it prepends the replacement to every piece (*prefix) or to none (*prefix -1, as
 * without it), except with prepend_scheme "first", which asks where the piece is. -1 for any
 * other. */
int ascii_scanner(const Step *steps, size_t nsteps, int64_t *prefix) {
    int scanner = -1;
    *prefix = -1;
    for (size_t k = 0; k < nsteps; k++) {
        const Step *st = &steps[k];
        int cut;
        if (st->kind == ST_BYTE_LEVEL && !st->add_prefix_space && !st->to_chars)
            cut = st->use_regex ? SC_GPT2 : -1;
        else if (st->kind == ST_SPLIT && (st->behavior == BH_ISOLATED || (st->behavior == BH_REMOVED && st->invert)) &&
                 (st->scanner == SC_GPT2 || st->scanner == SC_CL100K || st->scanner == SC_QWEN2 || st->scanner == SC_O200K))
            cut = st->scanner;
        else if (st->kind == ST_BERT || st->kind == ST_WHITESPACE_SPLIT)
            cut = st->kind == ST_BERT ? ASCII_BERT : ASCII_WHITESPACE;
        else if (st->kind == ST_METASPACE && (scanner == ASCII_BERT || scanner == ASCII_WHITESPACE) && *prefix < 0 &&
                 st->replacement >= 0x80 && st->prepend != PS_FIRST) {
            *prefix = st->prepend == PS_ALWAYS ? (int64_t)st->replacement : -1;
            cut = -1;
        } else
            return -1;
        if (cut >= 0 && scanner >= 0)
            return -1;
        scanner = cut >= 0 ? cut : scanner;
    }
    return scanner;
}

ptrdiff_t ascii_bytes(Scratch *sc, const uint32_t *s, size_t n) {
    if (scratch_bytes(sc, n) < 0)
        return -1;
    /* a store through uint8_t may alias sc->bytes itself, which would be read again each time */
    uint8_t *restrict to = sc->bytes;
    size_t i = 0;
#ifdef __SSE2__
    for (; i + 16 <= n; i += 16) {
        __m128i b = ascii16(s + i);
        if (_mm_movemask_epi8(b))
            break;
        _mm_storeu_si128((__m128i *)(void *)(to + i), b);
    }
#endif
    for (; i < n && s[i] < 0x80; i++)
        to[i] = (uint8_t)s[i];
    to[i] = 0;
    return (ptrdiff_t)i;
}

/* split_step's Isolated cut, each piece as its start and end into pieces (room for n of them, a
 * piece being a character at least); inlined for each matcher, which it then calls directly */
static inline size_t ascii_cut(size_t (*match)(const uint8_t *, size_t, size_t), const uint8_t *s, size_t n,
                               int32_t *pieces) {
    size_t i = 0, gap = 0, k = 0;
    while (i < n) {
        size_t e = match(s, n, i);
        if (e == i) {
            i++;
            continue;
        }
        if (gap < i) {
            pieces[k++] = (int32_t)gap;
            pieces[k++] = (int32_t)i;
        }
        pieces[k++] = (int32_t)i;
        pieces[k++] = (int32_t)e;
        i = gap = e;
    }
    if (gap < n) {
        pieces[k++] = (int32_t)gap;
        pieces[k++] = (int32_t)n;
    }
    return k / 2;
}

/* ---- GPT-family cuts of ASCII text, 64 characters at a time ------------------------------- */

#ifdef __SSE2__
/* Bit j of each mask: what s[j] of 64 ASCII bytes is */
typedef struct {
    uint64_t l, up, n, ws, cr, sp, ap, slash;
} Classes64;

static inline uint64_t movemask64(__m128i a, __m128i b, __m128i c, __m128i d) {
    return (uint64_t)(uint16_t)_mm_movemask_epi8(a) | (uint64_t)(uint16_t)_mm_movemask_epi8(b) << 16 |
           (uint64_t)(uint16_t)_mm_movemask_epi8(c) << 32 | (uint64_t)(uint16_t)_mm_movemask_epi8(d) << 48;
}

/* The ASCII classes of the GPT-family patterns: \p{L} (A-Z, a-z), \p{N} (0-9), \s (\t to \r and
 * the space), as unicode_data.h has them */
static inline Classes64 classes64(const uint8_t *s) {
    __m128i l[4], up[4], n[4], ws[4], cr[4], sp[4], ap[4], slash[4];
    const __m128i fold = _mm_set1_epi8(0x20);
    for (int k = 0; k < 4; k++) {
        __m128i b = ascii16_bytes(s + 16 * k);
        l[k] = in_range16(_mm_or_si128(b, fold), 'a', 26);
        up[k] = in_range16(b, 'A', 26);
        n[k] = in_range16(b, '0', 10);
        sp[k] = _mm_cmpeq_epi8(b, _mm_set1_epi8(' '));
        ws[k] = _mm_or_si128(in_range16(b, '\t', 5), sp[k]);
        cr[k] = _mm_or_si128(_mm_cmpeq_epi8(b, _mm_set1_epi8('\n')), _mm_cmpeq_epi8(b, _mm_set1_epi8('\r')));
        ap[k] = _mm_cmpeq_epi8(b, _mm_set1_epi8('\''));
        slash[k] = _mm_cmpeq_epi8(b, _mm_set1_epi8('/'));
    }
#define M64(v) movemask64(v[0], v[1], v[2], v[3])
    return (Classes64){M64(l), M64(up), M64(n), M64(ws), M64(cr), M64(sp), M64(ap), M64(slash)};
#undef M64
}

/* classes64 of the last len (< 64) bytes of a text, spaces after them */
static inline Classes64 classes64_tail(const uint8_t *s, size_t len) {
    uint8_t tail[64];
    memset(tail, ' ', sizeof tail);
    memcpy(tail, s, len);
    return classes64(tail);
}

/* The bits of run from which its ones reach a bit of seeds (a subset of run), at or after them */
static inline uint64_t reaching(uint64_t seeds, uint64_t run) {
    for (int k = 1; k < 64; k <<= 1) {
        seeds |= (seeds >> k) & run;
        run &= run >> k;
    }
    return seeds;
}

/* The piece starts of s[j] for j in a block, given its classes x, the block before's p and the
 * next one's: where each pattern starts a piece, as a rule on the characters around each one
 * (the three before it, the rest of its run of spaces). *complex: where that rule may be wrong
 * (the pieces there depend on more of the text), which the matcher itself cuts:
 * - a piece starts where the class changes (letter, digit, space, other), but for a letter after
 *   a space other than \r and \n, or after one other character that follows no other one and
 *   no space (the pattern's [^\r\n\p{L}\p{N}]?\p{L}+: "a.b" is "a" ".b", "..b" ".." "b"), and
 *   for another character after a space ( ?[^\s\p{L}\p{N}]+); GPT-2's ` ?` takes a space only,
 *   before a letter, a digit or another character;
 * - in a run of spaces, at its last one when two or more come before a character that is not a
 *   space (\s+(?!\S)); with \r and \n (not GPT-2's), those right after other characters are
 *   theirs ([\r\n]*), and a run's last \r or \n ends a piece (\s*[\r\n]+);
 * - between digits, every one for Qwen2 (\p{N}), after the third of a run for cl100k and o200k
 *   (complex), never for GPT-2;
 * - o200k ([Upper]*[lower]+|[Upper]+[lower]*) starts a piece at an upper-case letter after a
 *   lower-case one; its [\r\n/]* after other characters takes slashes after \r or \n, and
 *   the piece after starts where a rule would not (".\n/-E" is ".\n/" "-E"): complex, any slash
 *   and the character after it;
 * - complex: an apostrophe (a contraction may follow: "'sand" is "'s" "and", o200k's "it's"
 *   one piece), and the spaces of a run that goes on into the block before or after.
 * The matcher cuts from the last start before a complex character to the first start after it,
 * where the rules take over again. */
static inline uint64_t starts64(int scanner, Classes64 x, Classes64 p, Classes64 next, uint64_t *complex) {
#define BEFORE(field, k) ((x.field << (k)) | (p.field >> (64 - (k))))
    uint64_t o = ~(x.l | x.n | x.ws), po = ~(BEFORE(l, 1) | BEFORE(n, 1) | BEFORE(ws, 1)),
             ppo = ~(BEFORE(l, 2) | BEFORE(n, 2) | BEFORE(ws, 2));
    uint64_t starts = (x.l ^ BEFORE(l, 1)) | (x.n ^ BEFORE(n, 1)) | (x.ws ^ BEFORE(ws, 1));
    uint64_t ws2 = x.ws & BEFORE(ws, 1), c = x.ap;
    /* (a run that goes on into the next block is complex, its last space in this one too) */
    uint64_t last = ws2 & ~(x.ws >> 1);
    if (x.ws & p.ws >> 63)
        c |= x.ws & ~(x.ws + 1) & ws2;
    if (x.ws >> 63 & next.ws)
        c |= reaching(1ull << 63, x.ws) & ws2;
    if (scanner == SC_GPT2) {
        starts &= ~(BEFORE(sp, 1) & ~x.ws);
        starts |= last;
    } else {
        starts &= ~(x.l & BEFORE(ws, 1) & ~BEFORE(cr, 1)) & ~(x.l & po & ~ppo & ~BEFORE(sp, 2)) & ~(o & BEFORE(sp, 1));
        /* the \r and \n after other characters (a run of them that starts a block goes on from
         * the block before: complex) */
        uint64_t taken = ((x.cr + (x.cr & po)) ^ x.cr) & x.cr, later = reaching(x.cr, x.ws);
        starts = (starts & ~taken) | (x.ws & ~taken & taken << 1) | (ws2 & later << 1 & ~later) | (last & ~(later << 1));
        if (scanner == SC_QWEN2)
            starts |= x.n & BEFORE(n, 1);
        else
            c |= x.n & BEFORE(n, 1) & BEFORE(n, 2) & BEFORE(n, 3);
        if (scanner == SC_O200K) {
            starts |= x.up & BEFORE(l, 1) & ~BEFORE(up, 1);
            c |= x.slash | BEFORE(slash, 1);
        }
    }
#undef BEFORE
    *complex = c;
    return starts;
}

/* The bits of m for the block's characters from `first` on */
static inline uint64_t from(uint64_t m, size_t lo, size_t first) {
    if (first <= lo)
        return m;
    return first - lo >= 64 ? 0 : m & (~0ull << (first - lo));
}

/* Pieces from start to each piece start among the bits of `at` (the block's from lo), in order;
 * returns the last start */
static inline size_t cut_at(uint64_t at, size_t lo, size_t start, int32_t *pieces, size_t *k) {
    for (; at; at &= at - 1) {
        size_t j = lo + (size_t)__builtin_ctzll(at);
        pieces[(*k)++] = (int32_t)start;
        pieces[(*k)++] = (int32_t)j;
        start = j;
    }
    return start;
}

/* ascii_cut of a GPT-family scanner, whose pattern matches at every ASCII character (no gaps):
 * the piece starts come from starts64 a block at a time, the matcher cutting the text from the
 * last start before a complex character to the first start after it (in English, mostly an
 * apostrophe's piece). */
static size_t gpt_blocks_cut(int scanner, size_t (*match)(const uint8_t *, size_t, size_t), const uint8_t *s,
                             size_t n, int32_t *pieces) {
    size_t k = 0, start = 0;
    /* before the text and after it, spaces: no other character for a letter's rule to join, and
     * \s+(?!\S) holds at the end */
    Classes64 prev = {.ws = 1ull << 63}, next, spaces = {.ws = ~0ull, .sp = ~0ull};
    Classes64 x = n >= 64 ? classes64(s) : classes64_tail(s, n);
    for (size_t lo = 0; lo < n; lo += 64, prev = x, x = next) {
        size_t hi = lo + 64;
        next = hi >= n ? spaces : n - hi >= 64 ? classes64(s + hi) : classes64_tail(s + hi, n - hi);
        uint64_t valid = n - lo >= 64 ? ~0ull : (1ull << (n - lo)) - 1;
        /* a complex character where a piece starts: the matcher cuts that piece */
        uint64_t complex, at = from(starts64(scanner, x, prev, next, &complex) & valid, lo, start + 1);
        complex = from(complex & valid, lo, start);
        while (complex) {
            size_t c = lo + (size_t)__builtin_ctzll(complex);
            start = cut_at(at & ((1ull << (c - lo)) - 1), lo, start, pieces, &k);
            while (start <= c) {
                size_t e = match(s, n, start);
                pieces[k++] = (int32_t)start;
                pieces[k++] = (int32_t)e;
                start = e;
            }
            at = from(at, lo, start + 1);
            complex = from(complex, lo, start);
        }
        start = cut_at(at, lo, start, pieces, &k);
    }
    if (start < n) {
        pieces[k++] = (int32_t)start;
        pieces[k++] = (int32_t)n;
    }
    return k / 2;
}
#endif

/* The characters of s[0..m) (m <= 16) that are not ASCII letters or digits, a bit each */
static inline unsigned non_alnum16(const uint8_t *s, size_t m) {
#ifdef __SSE2__
    if (m == 16) {
        __m128i b = ascii16_bytes(s);
        __m128i members = _mm_or_si128(in_range16(_mm_or_si128(b, _mm_set1_epi8(0x20)), 'a', 26), in_range16(b, '0', 10));
        return ~(unsigned)_mm_movemask_epi8(members) & 0xFFFF;
    }
#endif
    unsigned cuts = 0;
    for (size_t j = 0; j < m; j++)
        cuts |= (unsigned)!is_ascii_alnum(s[j]) << j;
    return cuts;
}

/* char_split on ASCII text: the characters that may cut it, those not letters or digits (which
 * are in neither class), found 16 at a time and taken in turn */
static size_t ascii_chars_cut(const uint8_t *s, size_t n, uint32_t drop, uint32_t isolate, int32_t *pieces) {
    size_t start = 0, k = 0;
    for (size_t base = 0; base < n; base += 16) {
        for (unsigned cuts = non_alnum16(s + base, n - base < 16 ? n - base : 16); cuts; cuts &= cuts - 1) {
            size_t i = base + (size_t)__builtin_ctz(cuts);
            uint32_t cls = ucls(s[i]);
            if (!(cls & (drop | isolate)))
                continue;
            if (start < i) {
                pieces[k++] = (int32_t)start;
                pieces[k++] = (int32_t)i;
            }
            if (!(cls & drop)) { /* isolate's */
                pieces[k++] = (int32_t)i;
                pieces[k++] = (int32_t)i + 1;
            }
            start = i + 1;
        }
    }
    if (start < n) {
        pieces[k++] = (int32_t)start;
        pieces[k++] = (int32_t)n;
    }
    return k / 2;
}

/* Texts shorter than this are cut by the matcher: a block costs gpt_blocks_cut the same work
 * whatever its length (a quarter of the encoding of "Hello"), the matcher a step a byte. */
#define GPT_BLOCKS_MIN 16

int ascii_split(int scanner, const uint8_t *s, size_t n, IdBuf *pieces) {
    pieces->n = 0;
    if (pieces->cap < 2 * n && ids_grow(pieces, 2 * n) < 0)
        return -1;
    int32_t *v = pieces->v;
#ifdef __SSE2__
    if (n >= GPT_BLOCKS_MIN &&
        (scanner == SC_CL100K || scanner == SC_QWEN2 || scanner == SC_O200K || scanner == SC_GPT2)) {
        pieces->n = 2 * (scanner == SC_CL100K    ? gpt_blocks_cut(SC_CL100K, m_cl100k_bytes, s, n, v)
                         : scanner == SC_QWEN2 ? gpt_blocks_cut(SC_QWEN2, m_qwen2_bytes, s, n, v)
                         : scanner == SC_O200K ? gpt_blocks_cut(SC_O200K, m_o200k_bytes, s, n, v)
                                               : gpt_blocks_cut(SC_GPT2, m_gpt2_bytes, s, n, v));
        return 0;
    }
#endif
    pieces->n = 2 * (scanner == SC_CL100K      ? ascii_cut(m_cl100k_bytes, s, n, v)
                     : scanner == SC_QWEN2     ? ascii_cut(m_qwen2_bytes, s, n, v)
                     : scanner == SC_O200K     ? ascii_cut(m_o200k_bytes, s, n, v)
                     : scanner == SC_GPT2      ? ascii_cut(m_gpt2_bytes, s, n, v)
                     : scanner == ASCII_BERT   ? ascii_chars_cut(s, n, U_RUST_WS, U_BERT_PUNCT, v)
                                               : ascii_chars_cut(s, n, U_RUST_WS, 0, v));
    return 0;
}

/* The scanners whose every match is one character of a class: HF's char predicates, which
 * yield each such character as a match of its own (a run of them is several matches). */
static inline int single_char(const Step *st) {
    return st->scanner == SC_PUNCTUATION || st->scanner == SC_NUMERIC || st->scanner == SC_DELIMITER;
}

static inline int char_member(const Step *st, uint32_t c) {
    switch (st->scanner) {
    case SC_PUNCTUATION:
        return IS(c, U_BERT_PUNCT);
    case SC_NUMERIC:
        return IS(c, U_NUMERIC);
    default:
        return c == st->delimiter;
    }
}

/* ---- the steps -------------------------------------------------------------------------- */

static int spans_push(Spans *sp, size_t start, size_t end, int64_t off) {
    if (sp->n == sp->cap) {
        size_t cap = sp->cap ? sp->cap * 2 : 256;
        Span *v = realloc(sp->v, cap * sizeof *v);
        if (!v)
            return -1;
        sp->v = v;
        sp->cap = cap;
    }
    sp->v[sp->n++] = (Span){start, end, off};
    return 0;
}

/* One piece's segments (matches and the text between, in order, none empty) folded into pieces
 * as HF's NormalizedString.split folds them for the behaviors that join segments: Contiguous
 * joins neighbours that are both matches or both not, MergedWithPrevious a match to the segment
 * before it, MergedWithNext a match to a non-match after it (HF folds that one from the end:
 * a match followed by a match stays alone). */
typedef struct {
    Spans *out;
    Span piece;
    size_t first;       /* the piece's first entry in out */
    int behavior, prev; /* prev: whether the previous segment was a match */
    size_t held;        /* MergedWithNext: the start of a match waiting for what follows, or SIZE_MAX */
    size_t held_end;
} Fold;

static int fold_push(Fold *f, size_t start, size_t end) {
    return spans_push(f->out, f->piece.start + start, f->piece.start + end, f->piece.off + (int64_t)start);
}

static int fold_segment(Fold *f, size_t start, size_t end, int is_match) {
    int joins = 0;
    switch (f->behavior) {
    case BH_CONTIGUOUS:
        joins = is_match == f->prev;
        break;
    case BH_MERGED_WITH_PREVIOUS:
        joins = is_match && !f->prev;
        break;
    case BH_MERGED_WITH_NEXT:
        if (f->held != SIZE_MAX) {
            size_t held = f->held;
            f->held = SIZE_MAX;
            if (!is_match)
                return fold_push(f, held, end);
            if (fold_push(f, held, f->held_end))
                return -1;
        }
        if (is_match) {
            f->held = start;
            f->held_end = end;
            return 0;
        }
        return fold_push(f, start, end);
    }
    f->prev = is_match;
    if (joins && f->out->n > f->first) {
        f->out->v[f->out->n - 1].end = f->piece.start + end;
        return 0;
    }
    return fold_push(f, start, end);
}

static int fold_end(Fold *f) { return f->held != SIZE_MAX ? fold_push(f, f->held, f->held_end) : 0; }

/* The end of the match at i (i when there is none there), or REGEX_NOMEM. The engine's matches
 * are never empty (regex_compile refuses nullable patterns). */
static inline size_t match_at(const Step *st, Matcher match, const uint32_t *s, size_t n, size_t i,
                              RegexStack *stack) {
    if (st->scanner == SC_REGEX) {
        size_t e = regex_match(st->regex, s, n, i, stack);
        return e == REGEX_NONE ? i : e;
    }
    return match ? match(s, n, i) : i + (size_t)char_member(st, s[i]);
}

/* HF's NormalizedString.split: Isolated (every segment) or Removed (the segments that are not
 * matches, or with invert only the matches) in one pass; the other behaviors fold the segments
 * (Fold). Empty pieces are dropped. */
static int split_step(const Step *st, Pieces *p) {
    Matcher match = single_char(st) || st->scanner == SC_REGEX ? NULL : MATCHERS[st->scanner];
    RegexStack stack = {0};
    int err = -1;
    Spans *out = &p->tmp;
    out->n = 0;
    int simple = st->behavior == BH_ISOLATED || st->behavior == BH_REMOVED;
    int keep_match = st->behavior == BH_ISOLATED || st->invert;
    int keep_gap = st->behavior == BH_ISOLATED || !st->invert;
    for (size_t k = 0; k < p->spans.n; k++) {
        Span sp = p->spans.v[k];
        const uint32_t *s = p->buf + sp.start;
        size_t n = sp.end - sp.start, gap = 0, i = 0;
        Fold f = {out, sp, out->n, st->behavior, 0, SIZE_MAX, 0};
        while (i < n) {
            size_t e = match_at(st, match, s, n, i, &stack);
            if (e == REGEX_NOMEM)
                goto done;
            if (e == i) {
                i++;
                continue;
            }
            if (simple) {
                if (gap < i && keep_gap && spans_push(out, sp.start + gap, sp.start + i, sp.off + (int64_t)gap))
                    goto done;
                if (keep_match && spans_push(out, sp.start + i, sp.start + e, sp.off + (int64_t)i))
                    goto done;
            } else if ((gap < i && fold_segment(&f, gap, i, st->invert)) || fold_segment(&f, i, e, !st->invert)) {
                goto done;
            }
            i = gap = e;
        }
        if (simple) {
            if (gap < n && keep_gap && spans_push(out, sp.start + gap, sp.start + n, sp.off + (int64_t)gap))
                goto done;
        } else if ((gap < n && fold_segment(&f, gap, n, st->invert)) || fold_end(&f)) {
            goto done;
        }
    }
    Spans t = p->spans;
    p->spans = *out;
    *out = t;
    err = 0;
done:
    free(stack.v);
    return err;
}

/* The spare buffer, with room for need code points, for a step to rebuild the text into (and at,
 * with track set); NULL when out of memory. */
static uint32_t *rebuild_room(Pieces *p, size_t need, uint32_t **at) {
    *at = NULL;
    if (cps_room(&p->spare, &p->spare_cap, need ? need : 1) < 0 ||
        (p->track && !(*at = malloc((need ? need : 1) * sizeof **at))))
        return NULL;
    return p->spare;
}

/* The rebuilt text, of len code points, in the spare buffer: it becomes the text's (and at, when
 * tracked, each of its characters' index in the first buffer). */
static void pieces_rebuilt(Pieces *p, uint32_t *at, size_t len) {
    uint32_t *buf = p->buf;
    size_t cap = p->cap;
    p->buf = p->spare;
    p->cap = p->spare_cap;
    p->spare = buf;
    p->spare_cap = cap;
    p->len = len;
    if (at) {
        free(p->at);
        p->at = at;
    }
}

/* Rebuild the buffer so that each piece may gain one leading character, `pre` (ByteLevel's
 * prefix space, Metaspace's replacement) where `prefixed(span)` says so, and each space becomes
 * `space`. Whether a piece is prefixed is a flag of its own: any code point, U+0000 included, is
 * a legal prefix. */
static int rebuild(Pieces *p, int (*prefixed)(const Step *, const Pieces *, const Span *), const Step *st,
                   uint32_t pre, uint32_t space) {
    uint32_t *at, *buf = rebuild_room(p, p->len + p->spans.n, &at);
    if (!buf)
        return -1;
    size_t w = 0;
    for (size_t k = 0; k < p->spans.n; k++) {
        Span *sp = &p->spans.v[k];
        size_t start = w;
        /* HF's prepend: the new character shares the piece's first character's alignment */
        if (prefixed(st, p, sp)) {
            if (at)
                at[w] = p->at ? p->at[sp->start] : (uint32_t)sp->start;
            buf[w++] = pre;
        }
        for (size_t i = sp->start; i < sp->end; i++) {
            if (at)
                at[w] = p->at ? p->at[i] : (uint32_t)i;
            buf[w++] = p->buf[i] == ' ' ? space : p->buf[i];
        }
        sp->start = start;
        sp->end = w;
    }
    pieces_rebuilt(p, at, w);
    return 0;
}

static int byte_level_prefixed(const Step *st, const Pieces *p, const Span *sp) {
    (void)st;
    return sp->end > sp->start && p->buf[sp->start] != ' ';
}

/* Metaspace: spaces become the replacement, which is prepended unless the piece starts with
 * one (before the replacement: the check is on the replaced text) and per prepend_scheme;
 * "first": to the pieces from the text's start, at offset 0 or less (normalizers.normalize_first). */
static int metaspace_prefixed(const Step *st, const Pieces *p, const Span *sp) {
    if (sp->end == sp->start)
        return 0;
    uint32_t first = p->buf[sp->start] == ' ' ? st->replacement : p->buf[sp->start];
    if (first == st->replacement)
        return 0;
    return st->prepend == PS_ALWAYS || (st->prepend == PS_FIRST && sp->off <= 0);
}

/* ByteLevel's mapping, for the steps after it: every piece's characters become the GPT-2
 * characters of their UTF-8 bytes, each standing (for offsets) for the character it encodes. */
static int to_byte_chars(Pieces *p) {
    size_t need = 0;
    for (size_t k = 0; k < p->spans.n; k++)
        need += utf8_size(p->buf + p->spans.v[k].start, p->spans.v[k].end - p->spans.v[k].start);
    uint32_t *at, *buf = rebuild_room(p, need, &at);
    if (!buf)
        return -1;
    size_t w = 0;
    uint8_t u[4];
    for (size_t k = 0; k < p->spans.n; k++) {
        Span *sp = &p->spans.v[k];
        size_t start = w;
        for (size_t i = sp->start; i < sp->end; i++) {
            size_t len = utf8_put(p->buf[i], u);
            for (size_t j = 0; j < len; j++, w++) {
                if (at)
                    at[w] = p->at ? p->at[i] : (uint32_t)i;
                buf[w] = gpt2_char(u[j]);
            }
        }
        sp->start = start;
        sp->end = w;
    }
    pieces_rebuilt(p, at, w);
    return 0;
}

/* Split on whitespace (dropped) and, for BERT, isolate each punctuation character. */
static int char_split(Pieces *p, uint32_t drop, uint32_t isolate) {
    Spans *out = &p->tmp;
    out->n = 0;
    for (size_t k = 0; k < p->spans.n; k++) {
        Span sp = p->spans.v[k];
        size_t start = sp.start;
        for (size_t i = sp.start; i < sp.end; i++) {
            uint32_t cls = ucls(p->buf[i]);
            if (!(cls & (drop | isolate)))
                continue;
            if (start < i && spans_push(out, start, i, sp.off + (int64_t)(start - sp.start)))
                return -1;
            if ((cls & isolate) && !(cls & drop) &&
                spans_push(out, i, i + 1, sp.off + (int64_t)(i - sp.start)))
                return -1;
            start = i + 1;
        }
        if (start < sp.end && spans_push(out, start, sp.end, sp.off + (int64_t)(start - sp.start)))
            return -1;
    }
    Spans t = p->spans;
    p->spans = *out;
    *out = t;
    return 0;
}

static inline uint8_t script_class(uint32_t c) {
    if (c >= 0x110000)
        return 0;
    return u_script_blocks[((uint32_t)u_script_index[c >> U_BLOCK_SHIFT] << U_BLOCK_SHIFT) |
                           (c & ((1u << U_BLOCK_SHIFT) - 1))];
}

/* UnicodeScripts: a piece is cut where a character's script (its class, 0 for "Any") differs
 * from the last script seen; "Any" characters join the piece they are in. As in HF, the cuts
 * make the pieces: characters before the first cut (a piece's leading "Any" ones, or all of a
 * piece holding no other) are dropped. */
static int scripts_step(Pieces *p) {
    Spans *out = &p->tmp;
    out->n = 0;
    for (size_t k = 0; k < p->spans.n; k++) {
        Span sp = p->spans.v[k];
        size_t start = SIZE_MAX;
        int last = -1;
        for (size_t i = sp.start; i < sp.end; i++) {
            int script = script_class(p->buf[i]);
            if (!script || script == last)
                continue;
            if (start != SIZE_MAX && spans_push(out, start, i, sp.off + (int64_t)(start - sp.start)))
                return -1;
            start = i;
            last = script;
        }
        if (start != SIZE_MAX && spans_push(out, start, sp.end, sp.off + (int64_t)(start - sp.start)))
            return -1;
    }
    Spans t = p->spans;
    p->spans = *out;
    *out = t;
    return 0;
}

/* Cut every piece before each occurrence of `c` (keeping it). Offsets follow the pure path's
 * Metaspace arithmetic: a prepended character (shift[k] = 1) stands for the piece's first one. */
/* Metaspace with split: rebuild's pass, cutting each piece before every replacement after its
 * first character as it goes. A cut piece's offset counts from its piece's, less the prepended
 * replacement, which stands for no character of the text. */
static int metaspace_split(const Step *st, Pieces *p) {
    uint32_t *at, *buf = rebuild_room(p, p->len + p->spans.n, &at);
    if (!buf)
        return -1;
    Spans *out = &p->tmp;
    out->n = 0;
    uint32_t rep = st->replacement;
    size_t w = 0;
    for (size_t k = 0; k < p->spans.n; k++) {
        const Span *sp = &p->spans.v[k];
        size_t begin = w, start = w;
        int64_t shift = metaspace_prefixed(st, p, sp);
        if (shift) {
            if (at)
                at[w] = p->at ? p->at[sp->start] : (uint32_t)sp->start;
            buf[w++] = rep;
        }
        /* a piece with no space nor replacement in it (every piece after WhitespaceSplit, as
         * T5's) is copied whole and cut nowhere */
        int plain = sp->end > sp->start;
        for (size_t i = sp->start; i < sp->end; i++)
            plain &= p->buf[i] != ' ' && p->buf[i] != rep;
        if (plain) {
            size_t len = sp->end - sp->start;
            memcpy(buf + w, p->buf + sp->start, len * sizeof *buf);
            for (size_t i = 0; at && i < len; i++)
                at[w + i] = p->at ? p->at[sp->start + i] : (uint32_t)(sp->start + i);
            w += len;
            if (spans_push(out, begin, w, sp->off)) {
                free(at);
                return -1;
            }
            continue;
        }
        for (size_t i = sp->start; i <= sp->end; i++) {
            uint32_t c = i < sp->end ? (p->buf[i] == ' ' ? rep : p->buf[i]) : 0;
            if (i == sp->end || (c == rep && w > begin)) {
                int64_t rel = (int64_t)(start - begin) - shift;
                if (start < w && spans_push(out, start, w, sp->off + (rel > 0 ? rel : 0))) {
                    free(at);
                    return -1;
                }
                start = w;
            }
            if (i == sp->end)
                break;
            if (at)
                at[w] = p->at ? p->at[i] : (uint32_t)i;
            buf[w++] = c;
        }
    }
    pieces_rebuilt(p, at, w);
    Spans t = p->spans;
    p->spans = *out;
    *out = t;
    return 0;
}

static int metaspace_step(const Step *st, Pieces *p) {
    return st->split ? metaspace_split(st, p) : rebuild(p, metaspace_prefixed, st, st->replacement, st->replacement);
}

int pretokenize(const Step *steps, size_t nsteps, Pieces *p) {
    for (size_t k = 0; k < nsteps; k++) {
        const Step *st = &steps[k];
        int err = 0;
        switch (st->kind) {
        case ST_SPLIT:
            err = split_step(st, p);
            break;
        case ST_BYTE_LEVEL:
            /* the last step leaves the mapping to bytes to the model */
            if (st->add_prefix_space)
                err = rebuild(p, byte_level_prefixed, st, ' ', ' ');
            if (!err && st->use_regex) {
                Step gpt2 = {.kind = ST_SPLIT, .scanner = SC_GPT2, .behavior = BH_ISOLATED};
                err = split_step(&gpt2, p);
            }
            if (!err && st->to_chars)
                err = to_byte_chars(p);
            break;
        case ST_BERT:
            err = char_split(p, U_RUST_WS, U_BERT_PUNCT);
            break;
        case ST_WHITESPACE_SPLIT:
            err = char_split(p, U_RUST_WS, 0);
            break;
        case ST_METASPACE:
            err = metaspace_step(st, p);
            break;
        case ST_SCRIPTS:
            err = scripts_step(p);
            break;
        }
        if (err)
            return -1;
    }
    return 0;
}

size_t utf8_encode(const uint32_t *s, size_t n, uint8_t *out) {
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        w += utf8_put(s[i], out + w);
    return w;
}
